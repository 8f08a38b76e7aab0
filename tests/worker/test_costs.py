"""Cost limits under real workers: ``current_job().set_cost`` settles what a run
spent (in the completion's or failure's own call), on every worker driver, and a
worker at full speed never claims more cost than the budget in any window."""

from __future__ import annotations

import random
import threading
from typing import Any

import leaseq
from tests.support.drivers import Driver
from tests.support.servers import wait_until


def test_set_cost_settles_the_window_for_the_next_claims(driver: Driver) -> None:
    q = driver.q
    q.set_limits(cost_rate=100, cost_per=600.0)
    ids = q.enqueue_many(["x"] * 4, cost=50)
    ran: list[str] = []

    def handler(lease: leaseq.Lease) -> None:
        leaseq.current_job().set_cost(10)
        ran.append(lease.id)

    # Unsettled, only two of the four would fit in the 600 s window (2 x 50):
    # each run spent 10, so all four do.
    run = driver.worker(handler, concurrency=2)
    run.start()
    wait_until(lambda: q.stats().succeeded == 4, what="four runs under a budget of two estimates")
    run.stop()
    assert sorted(ran) == sorted(ids)
    assert [q.get(i).spent for i in ids] == [10.0] * 4
    assert q.limits().recent_cost == 40


def test_a_failing_run_settles_too_and_bad_costs_fail_the_handler(driver: Driver) -> None:
    q = driver.q
    q.set_limits(cost_rate=1000, cost_per=600.0)
    spent = q.enqueue("spent", cost=100, max_attempts=1)
    bad = q.enqueue("bad", cost=100, max_attempts=1)

    def handler(lease: leaseq.Lease) -> None:
        leaseq.current_job().set_cost(3 if lease.id == spent else float("nan"))
        raise RuntimeError("the API said no")

    driver.worker(handler).run(burst=True)
    assert q.get(spent).state == leaseq.State.DEAD and q.get(spent).spent == 3
    failed = q.get(bad)
    assert failed.spent is None and failed.last_error and "cost" in failed.last_error
    assert q.limits().recent_cost == 103  # the bad report settled nothing


def test_a_worker_never_claims_more_than_the_budget_in_any_window(live_driver: Driver) -> None:
    """Costs 1..400 against 2,000 per 0.5 s for about 2 s, every run settling to
    half its estimate: the cost each job counts (what it spent) in any 0.5 s of
    claim times stays within the budget."""
    q = live_driver.q
    budget, per_ms = 2000, 500
    q.set_limits(cost_rate=budget, cost_per=per_ms / 1000)
    rng = random.Random(7)
    for _ in range(60):
        c = rng.randint(1, 400)
        q.enqueue_many([c] * 5, cost=c)

    def handler(lease: leaseq.Lease) -> None:
        leaseq.current_job().set_cost(lease.payload / 2)

    run = live_driver.worker(handler, concurrency=8)
    run.start()
    done = lambda: q.stats().succeeded  # noqa: E731
    wait_until(lambda: done() >= 150, timeout=60.0, what="150 runs under the cost limit")
    run.stop()
    rows = [j for j in q.ls(state="succeeded", limit=1000)]
    claims = sorted((int(j.claimed_at * 1000), j.spent) for j in rows if j.spent)
    assert len(claims) >= 150
    for i, (t, _) in enumerate(claims):
        window = sum(s for u, s in claims[i:] if u < t + per_ms)
        assert window <= budget + 1e-6, (t, window)


def test_ids_of_a_settle_keep_their_own_claim(r: Any) -> None:
    """Two claims of one id (a retry) are two members: settling the second leaves the
    first's estimate in the window."""
    q = leaseq.Queue("settle-twice", redis=r)
    q.set_limits(cost_rate=1000, cost_per=600.0)
    job = q.enqueue("x", cost=100)
    first = q.claim(ttl=30.0)
    q.fail(first, "again", retry_in=0)
    second = q.claim(ttl=30.0)
    assert second.id == job and second.attempt == 2
    q.complete(second, cost=1)
    assert q.limits().recent_cost == 101


def test_worker_processes_settle_costs_and_sweep_deadlines(rr: Any, redis_server: Any) -> None:
    """``leaseq worker --processes 2``: the children settle what their handlers
    spent in the queue's window, and a job past its deadline is never run."""
    import subprocess
    import sys
    from pathlib import Path

    q = leaseq.Queue("proc-costs", redis=rr)
    q.set_limits(cost_rate=10_000, cost_per=600.0)
    ids = q.enqueue_many([100] * 20, cost=100)
    late = q.enqueue(100, cost=100, expires=0.05)
    deadline = q.get(late).expires_at

    def server_now() -> float:
        sec, usec = rr.time()
        return float(sec) + usec / 1e6

    wait_until(lambda: server_now() > deadline, what="the deadline to pass")
    cmd = [sys.executable, "-m", "leaseq", "--url", redis_server.url, "worker", "proc-costs"]
    done = subprocess.run(
        [*cmd, "tests.support.handlers:half_cost", "--processes", "2", "--burst"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert [q.get(i).spent for i in ids] == [50.0] * 20
    assert q.limits().recent_cost == 20 * 50
    assert q.get(late).state == leaseq.State.DEAD and q.get(late).spent is None


def test_a_handler_that_spent_nothing_says_so_and_succeeds(driver: Driver) -> None:
    q = driver.q
    q.set_limits(cost_rate=1000, cost_per=600.0)
    job = q.enqueue("cached", cost=100)
    runs: list[int] = []

    def handler(lease: leaseq.Lease) -> str:
        runs.append(lease.attempt)
        leaseq.current_job().set_cost(0)  # a cache hit: no tokens spent
        return "from the cache"

    driver.worker(handler).run(burst=True)
    done = q.get(job)
    assert runs == [1] and done.state == leaseq.State.SUCCEEDED
    assert done.spent == 0 and q.limits().recent_cost == 0


def test_spares_handed_back_at_stop_give_their_estimates_back(driver: Driver) -> None:
    """A worker stopping with prefetched spares its handlers never began releases
    them with nothing spent: their estimates leave the window at once."""
    q = driver.q
    q.set_limits(cost_rate=100_000, cost_per=600.0)
    ids = q.enqueue_many(["x"] * 8, cost=100)
    started: list[str] = []
    gate = threading.Event()

    def handler(lease: leaseq.Lease) -> None:
        started.append(lease.id)
        gate.wait(10.0)

    run = driver.worker(handler, concurrency=1, prefetch=4)
    run.start()
    wait_until(lambda: len(started) == 1 and q.stats().active >= 2, what="a run and spares")
    run.stop()
    gate.set()
    wait_until(lambda: q.stats().active == 0, what="the stop")
    ran = q.stats().succeeded
    # Each claim counted 100; every spare handed back unstarted settled to 0.
    assert q.limits().recent_cost == 100 * ran
    assert all(q.get(i).spent is None for i in ids)
