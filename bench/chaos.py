"""Chaos run: real worker processes SIGKILLed at random while they work a queue.

    python -m bench.chaos --jobs 20000 --workers 4 --kill-every 0.2 --mode effects

M jobs go into one queue on a real redis-server (started here on a free
loopback port unless ``--url`` is given). K worker processes work it; a
driver SIGKILLs a random one every ``--kill-every`` seconds and starts a
new one. Each delivery is logged (RPUSH), each success performs one effect:

- ``--mode once``: ``if q.once(lease, "effect"): HINCRBY effects <id> 1``,
  then ``complete`` — the marker is set *before* the effect, so a kill
  between the two skips the effect for good (a "once-miss"), which this run
  counts;
- ``--mode effects``: ``complete(lease, effects=[("HINCRBY", ...)])`` — the
  effect is part of the completion script: exactly once or not at all.

Some jobs are flaky (fail their first attempt) and a few are poison (fail
every attempt, so they must end dead with the handler's error). At the end
the run checks: enqueued = succeeded + dead; zero lost; every effect exactly
once (once mode: no doubles, misses counted); no job dead that never ran;
attempts <= max_attempts; no active job and no expired lease after a final
reap. Succeeded rows a worker's ``keep_succeeded_count`` deleted (the CLI
keeps 10,000) count as succeeded up to the queue's own total of successes;
any other missing row is lost.

Two kinds of worker process (``--runner``):

- ``loop`` (default): a minimal claim/complete loop of this file. It crashes
  the store's protocol at any instruction: the kill windows fall exactly
  between the calls that matter (claim, once, effect, complete).
- ``leaseq``: the real ``leaseq worker`` CLI (``leaseq.Worker``: prefetch,
  heartbeats, batched completions) running ``bench.chaos:leaseq_handler``;
  once mode only, since its handler's effect goes through ``once``.
- ``durable``: the same, running ``bench.chaos:durable_handler``: three
  durable steps with a sleep between the first two (docs/durable.md). Each
  step's body logs the attempt it ran in and returns it, so the run also
  checks that no step's body ran in an attempt after the one its record
  came from (``steps_rerun_after_record``: a recorded step never runs
  again). A body may run twice when a kill falls between it and its record:
  ``step_bodies_repeated`` counts those, as expected.

``python -m bench.chaos failover [...]`` runs the failover mode instead: a
Sentinel-managed primary SIGKILLed or failed over under load
(``bench/failover.py``, which has its options).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis

import leaseq
from bench.server import Server

QUEUE = "chaos"
MAX_ATTEMPTS = 8
ROOT = Path(__file__).resolve().parent.parent


UNAVAILABLE = (leaseq.ServerUnavailable, redis.ConnectionError, redis.TimeoutError)
"""What a worker rides out: the server down, restarting, or cut off (a proxy)."""


def now_ms() -> int:
    """The machine's wall clock in ms: the ``at`` of history records."""
    return round(time.time() * 1000)


def app_keys(queue: str) -> tuple[str, str]:
    """The run's own keys (deliveries log, effect counters), in the queue's slot."""
    return f"chaos:{{{queue}}}:deliveries", f"chaos:{{{queue}}}:effects"


def working_key(queue: str) -> str:
    """SET of the pids of worker processes that have started working (see Workers)."""
    return f"chaos:{{{queue}}}:working"


# -- the worker process ------------------------------------------------------------


def work(
    url: str,
    queue: str,
    mode: str,
    ttl: float,
    seed: int,
    acks: str | None,
    history: str | None = None,
    *,
    kept: bool = True,
    deliveries: bool = True,
    retry_for: float = 0.0,
) -> None:
    """A worker process: claim, log the delivery, fail or do the effect, complete.

    ``acks``: a file to which the id of every completion the server
    acknowledged is appended (flushed at once), so a test can check that the
    server still has it after a crash. ``history``: a file for this worker's
    records of ``bench.histories`` (each lease it was handed, each completion
    acknowledged with its time, each completion or failure refused), flushed
    line by line; ``kept``: whether the run's settings promise that an
    acknowledged completion survives its faults (``appendfsync always``: yes;
    ``everysec``: not inside a crash's window). ``deliveries``: log each
    delivery in Redis (an RPUSH, which a full server refuses). ``retry_for``:
    how long a completion or failure is sent again after a transient error
    (``sent``; 0: the lease is given up at once).
    """
    r = redis.Redis.from_url(url)
    ack_file = open(acks, "a", buffering=1) if acks else None  # noqa: SIM115 - lives as long as we do
    log = open(history, "a", buffering=1) if history else None  # noqa: SIM115 - the same
    q = leaseq.Queue(queue, redis=r, max_attempts=MAX_ATTEMPTS, backoff=0.0, keep_succeeded=None)
    logged, effects = app_keys(queue)
    delivered = logged if deliveries else None
    rng = random.Random(seed)
    sent(lambda: r.sadd(working_key(queue), os.getpid()), 60.0)  # (through a proxy: cut)
    while True:
        try:
            lease = q.claim(ttl=ttl, block=1.0)
        except UNAVAILABLE:
            time.sleep(0.05)  # the restart test kills the server under us
            continue
        if lease is None:
            continue
        token = {"id": lease.id, "attempt": lease.attempt, "fence": lease.fence}
        if log:
            deadline = round(lease.deadline * 1000)
            record = {"op": "lease", **token, "worker": os.getpid(), "deadline": deadline}
            log.write(json.dumps(record) + "\n")
        try:
            if handle(q, r, lease, mode, rng, delivered, effects, retry_for):
                if ack_file:
                    ack_file.write(lease.id + "\n")
                if log:
                    done = {"op": "complete", **token, "at": now_ms()}
                    log.write(json.dumps(done if kept else {**done, "kept": False}) + "\n")
        except leaseq.LeaseLost as exc:
            # Reaped while we slept (someone else has or had it), or a call
            # sent again after its reply was lost (AlreadyFinished).
            if log:
                refused = {"op": "refused", **token, "error": type(exc).__name__}
                log.write(json.dumps(refused) + "\n")
        except UNAVAILABLE:
            time.sleep(0.05)


_handler_queue: leaseq.Queue | None = None


def leaseq_handler(lease: leaseq.Lease) -> None:
    """The handler for ``leaseq worker`` (``--runner leaseq``): the same steps as
    ``handle``, with failures raised for the Worker to record."""
    global _handler_queue
    if _handler_queue is None:
        client = redis.Redis.from_url(os.environ["LEASEQ_URL"])
        _handler_queue = leaseq.Queue(lease.queue, redis=client, keep_succeeded=None)
    q, r = _handler_queue, _handler_queue.redis
    deliveries, effects = app_keys(lease.queue)
    r.sadd(working_key(lease.queue), os.getpid())
    r.rpush(deliveries, f"{lease.id}:{lease.attempt}")
    if lease.payload.get("poison"):
        raise RuntimeError("poison: this job always fails")
    if lease.payload.get("flaky") and lease.attempt == 1:
        raise RuntimeError("flaky: first attempt fails")
    time.sleep(random.uniform(0, 0.02))
    if q.once(lease, "effect"):
        time.sleep(0.001)  # a kill here is a once-miss
        r.hincrby(effects, lease.id, 1)


def durable_handler(lease: leaseq.Lease) -> None:
    """``leaseq_handler`` behind three durable steps and a sleep (``--runner durable``)."""
    ctx = leaseq.current_job()

    def body(name: str) -> int:
        client = leaseq.current_job().queue.redis
        client.rpush(f"{lease.queue}:bodies", f"{lease.id} {name} {lease.attempt}")
        time.sleep(random.uniform(0, 0.005))
        return lease.attempt

    ctx.step("fetch", body, "fetch")
    ctx.sleep("nap", 0.05)
    ctx.step("transform", body, "transform")
    ctx.step("store", body, "store")
    leaseq_handler(lease)


def step_report(q: leaseq.Queue, r: Any) -> dict[str, int]:
    """What ``--runner durable`` adds to the report (see the module's docstring)."""
    ran: dict[tuple[str, str], list[int]] = {}
    for entry in r.lrange(f"{q.name}:bodies", 0, -1):
        job_id, name, attempt = entry.decode().split()
        ran.setdefault((job_id, name), []).append(int(attempt))
    rerun = repeated = 0
    steps: dict[str, dict[str, Any]] = {}
    for (job_id, name), attempts in ran.items():
        if job_id not in steps:
            job = q.get(job_id)
            steps[job_id] = {} if job is None else job.steps
        recorded = steps[job_id].get(name)
        repeated += len(attempts) > 1
        if isinstance(recorded, int):
            rerun += any(a > recorded for a in attempts)
    return {"steps_rerun_after_record": rerun, "step_bodies_repeated": repeated}


def handle(
    q: leaseq.Queue,
    r: Any,
    lease: leaseq.Lease,
    mode: str,
    rng: random.Random,
    deliveries: str | None,
    effects: str,
    retry_for: float = 0.0,
) -> bool:
    """Run one delivery; True when it completed the job (the server acknowledged it).
    ``retry_for``: see ``sent``."""
    if deliveries is not None:
        r.rpush(deliveries, f"{lease.id}:{lease.attempt}")
    payload = lease.payload
    if payload.get("poison"):
        sent(lambda: q.fail(lease, "poison: this job always fails", retry_in=0), retry_for)
        return False
    if payload.get("flaky") and lease.attempt == 1:
        sent(lambda: q.fail(lease, "flaky: first attempt fails", retry_in=0), retry_for)
        return False
    time.sleep(payload.get("work", rng.uniform(0, 0.02)))  # the "work"
    if mode == "effects":
        sent(lambda: q.complete(lease, effects=[("HINCRBY", effects, lease.id, 1)]), retry_for)
        return True
    if q.once(lease, "effect"):
        time.sleep(0.001)  # a kill here is a once-miss: marker set, effect not done
        r.hincrby(effects, lease.id, 1)
    q.complete(lease)
    return True


def sent(call: Callable[[], Any], retry_for: float) -> Any:
    """``call()``, sent again after each transient error (the link cut, the reply
    lost) for up to ``retry_for`` seconds: a worker that insists on finishing
    its job, past its lease if need be. Fencing answers the late tries
    (``LeaseLost``, or ``AlreadyFinished`` when the first one ran)."""
    give_up = time.monotonic() + retry_for
    while True:
        try:
            return call()
        except UNAVAILABLE:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.05)


# -- the driver --------------------------------------------------------------------


MIN_AGE = 0.2
"""Seconds a worker must have been working (see ``Workers``) before it may be
killed: long enough to hold leases, so a kill strands some for the reaper."""


class Workers:
    """K worker processes; kill_one() SIGKILLs a random one (of those that have
    worked for at least MIN_AGE) and starts another.

    Age counts from when a worker says it started working (its pid in the
    working set), not from its spawn: on a loaded machine a process can take
    longer than the kill interval just to start, and a run that killed workers
    before they ever claimed would test nothing and never finish."""

    def __init__(
        self,
        url: str,
        queue: str,
        mode: str,
        ttl: float,
        k: int,
        seed: int,
        acks: str | None,
        runner: str = "loop",
        extra: Sequence[str] = (),
    ) -> None:
        self.url, self.queue, self.mode, self.ttl, self.acks = url, queue, mode, ttl, acks
        self.runner, self.extra = runner, list(extra)
        self.spawned = 0
        self.rng = random.Random(seed)
        self.redis = redis.Redis.from_url(url)
        self.procs = [self._spawn() for _ in range(k)]
        self.born: list[float | None] = [None] * k
        """When each worker was first seen working (None: not yet)."""
        self.kills = 0
        self.stalled: dict[int, float] = {}
        """Workers SIGSTOPped now, and when each is to get its SIGCONT."""

    def _spawn(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONPATH=str(ROOT), LEASEQ_URL=self.url)
        if self.runner in ("leaseq", "durable"):
            handler = "leaseq_handler" if self.runner == "leaseq" else "durable_handler"
            cmd = [sys.executable, "-m", "leaseq.cli", "worker", self.queue]
            cmd += [f"bench.chaos:{handler}", "--ttl", str(self.ttl), "--concurrency", "2"]
            cmd += ["--log-level", "WARNING"]
            return subprocess.Popen(cmd, cwd=ROOT, env=env)
        cmd = [sys.executable, "-m", "bench.chaos", "worker", "--url", self.url]
        cmd += ["--queue", self.queue, "--mode", self.mode, "--ttl", str(self.ttl)]
        cmd += ["--seed", str(self.rng.randrange(2**31))]
        if self.acks:
            cmd += ["--acks", os.path.join(self.acks, f"worker-{self.spawned}.acks")]
            cmd += ["--history", os.path.join(self.acks, f"worker-{self.spawned}.history")]
        cmd += self.extra
        self.spawned += 1
        return subprocess.Popen(cmd, cwd=ROOT, env=env)

    def _grown(self, now: float) -> list[int]:
        """The workers that have worked for MIN_AGE (and are not stalled now)."""
        try:
            working = {int(pid) for pid in self.redis.smembers(working_key(self.queue))}
        except redis.RedisError:  # the restart test has the server down: none is new
            working = set()
        for i, proc in enumerate(self.procs):
            if self.born[i] is None and proc.pid in working:
                self.born[i] = now
        return [
            i
            for i, born in enumerate(self.born)
            if born is not None and now - born >= MIN_AGE and i not in self.stalled
        ]

    def stall_one(self, seconds: float) -> None:
        """SIGSTOP a random worker for ``seconds`` (``resume_due`` sends SIGCONT):
        a process paused past its lease (a GC pause, a frozen VM) wakes up still
        holding leases that others hold now; fencing must refuse every write of it."""
        grown = self._grown(time.monotonic())
        if grown:
            i = self.rng.choice(grown)
            self.procs[i].send_signal(signal.SIGSTOP)
            self.stalled[i] = time.monotonic() + seconds
            self.kills += 1

    def resume_due(self) -> None:
        now = time.monotonic()
        for i, until in list(self.stalled.items()):
            if now >= until:
                self.procs[i].send_signal(signal.SIGCONT)
                del self.stalled[i]

    def kill_one(self) -> None:
        grown = self._grown(time.monotonic())
        if not grown:
            return
        i = self.rng.choice(grown)
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()
        self.kills += 1
        self.procs[i] = self._spawn()
        self.born[i] = None

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGCONT)  # a stopped process dies at SIGKILL too; be sure
            proc.kill()
        for proc in self.procs:
            proc.wait()
        self.redis.close()


def enqueue(q: leaseq.Queue, jobs: int, rng: random.Random, work: float = 0.0) -> list[str]:
    """The run's jobs; ``work``: each takes up to that many seconds (0: up to 20 ms)."""
    payloads: list[dict[str, Any]] = [
        {"i": i, "poison": rng.random() < 0.01, "flaky": rng.random() < 0.05} for i in range(jobs)
    ]
    for payload in payloads if work else ():
        payload["work"] = rng.uniform(0, work)
    return q.enqueue_many(payloads, ids=[f"j{i}" for i in range(jobs)])


def drive(
    url: str,
    *,
    jobs: int = 1000,
    workers: int = 4,
    kill_every: float = 0.25,
    mode: str = "once",
    ttl: float = 0.5,
    timeout: float = 120.0,
    seed: int = 1,
    queue: str = QUEUE,
    during: Any = None,
    acks: str | None = None,
    runner: str = "loop",
    stall: float = 0.0,
    work: float = 0.0,
    worker_args: Sequence[str] = (),
) -> dict[str, Any]:
    """Run one chaos run against ``url``; return the report (see ``check``).

    ``during(elapsed_s)`` is called from the driver loop (the restart test
    kills the server from there); while it returns True the run goes on even
    with nothing left to do, so what it means to do happens however fast the
    workers drain. ``acks``: a directory for the workers'
    files of acknowledged completions and the run's history (``bench.histories``:
    the workers' leases and completions, the producer's enqueues, the queue's
    clock as the driver reads it; see ``work``). ``runner``: ``loop`` or
    ``leaseq`` (see the module docstring). ``stall``: SIGSTOP a worker for that
    many seconds every ``kill_every`` instead of SIGKILLing one (0: kill).
    ``work``: the most seconds a job's work takes (0: 20 ms). ``worker_args``:
    more options for each ``loop`` worker process (``--unkept``, ``--no-deliveries``).
    """
    if runner != "loop" and mode != "once":
        raise ValueError(f"--runner {runner} runs once mode only")
    r = redis.Redis.from_url(url)
    q = leaseq.Queue(queue, redis=r, max_attempts=MAX_ATTEMPTS, backoff=0.0, keep_succeeded=None)
    rng = random.Random(seed)
    ids = enqueue(q, jobs, rng, work)
    log = open(os.path.join(acks, "driver.history"), "a", buffering=1) if acks else None  # noqa: SIM115
    if log:
        at = now_ms()
        log.writelines(
            json.dumps({"op": "enqueue", "id": i, "kept": True, "at": at}) + "\n" for i in ids
        )
    started = time.monotonic()
    pool = Workers(url, queue, mode, ttl, workers, seed, acks, runner, worker_args)
    next_kill = started + kill_every
    try:
        while True:
            now = time.monotonic()
            busy = during is not None and during(now - started) is True
            pool.resume_due()
            if now >= next_kill:
                pool.stall_one(stall) if stall else pool.kill_one()
                next_kill = now + rng.uniform(0.5, 1.5) * kill_every
            try:
                s = q.stats()
                if log:
                    log.write(json.dumps({"op": "clock", "at": round(s.server_time * 1000)}) + "\n")
                if s.pending + s.scheduled + s.active + s.suspended == 0 and not busy:
                    break
            except leaseq.ServerUnavailable:
                pass
            if now - started > timeout:
                break
            time.sleep(0.05)
    finally:
        pool.stop()
        if log:
            log.close()
    elapsed = time.monotonic() - started
    q.reap()
    report = check(q, r, ids, mode)
    if runner == "durable":
        report.update(step_report(q, r))
    report.update(
        mode=mode,
        runner=runner,
        workers=workers,
        kills=pool.kills,
        seconds=round(elapsed, 1),
        ttl=ttl,
    )
    r.close()
    return report


def check(q: leaseq.Queue, r: Any, ids: list[str], mode: str) -> dict[str, Any]:
    """Read every row back and count what the claims in the docstring need."""
    deliveries_key, effects_key = app_keys(q.name)
    effects = {k.decode(): int(v) for k, v in r.hgetall(effects_key).items()}
    delivered = Counter(x.decode().split(":")[0] for x in r.lrange(deliveries_key, 0, -1))
    states: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    over_attempts = missing = double = once_misses = dead_healthy = poison_alive = 0
    orphaned = dead_never_ran = 0
    gone_delivered = 0
    # Ungrouped pending jobs of priority 0 are indexed in the ready LIST, not the ZSET.
    listed = {x.decode() for x in r.lrange(q.keys.ready, 0, -1)}
    for job_id in ids:
        n = effects.get(job_id, 0)
        double += n > 1
        job = q.get(job_id)
        if job is None:
            states["gone"] += 1
            gone_delivered += delivered[job_id] > 0
            continue
        states[job.state.value] += 1
        in_list = job.state is leaseq.State.PENDING and job_id in listed
        if not in_list and r.zscore(q.keys.index(job.state.value), job_id) is None:
            orphaned += 1  # a row in no index: nothing would ever move it again
        if job.attempts > job.max_attempts:
            over_attempts += 1
        poison = bool(job.payload.get("poison"))
        if job.state is leaseq.State.DEAD:
            causes[(job.last_error or "?").split(":")[0].split(" (")[0]] += 1
            dead_healthy += not poison
            dead_never_ran += delivered[job_id] == 0
        elif poison:
            poison_alive += 1
        if job.state is leaseq.State.SUCCEEDED and n == 0:
            if "effect" in job.once:
                once_misses += 1
            else:
                missing += 1
    s = q.stats()
    # A queue that keeps a bounded count of succeeded rows (the CLI worker's
    # default) deletes the oldest: the queue's own total of successes says how
    # many rows went that way, and only a row that was delivered can be one.
    # Any other row that is gone is lost.
    trimmed = min(gone_delivered, max(0, s.totals.get("succeeded", 0) - states["succeeded"]))
    return {
        "enqueued": len(ids),
        "succeeded": states["succeeded"] + trimmed,
        "trimmed_succeeded": trimmed,
        "dead": states["dead"],
        "dead_causes": dict(causes),
        "dead_but_healthy": dead_healthy,
        "poison_not_dead": poison_alive,
        "dead_never_ran": dead_never_ran,
        "lost": states["gone"] - trimmed + orphaned,
        "unfinished": {k: v for k, v in states.items() if k not in ("succeeded", "dead", "gone")},
        "deliveries": sum(delivered.values()),
        "redelivered_jobs": sum(1 for n in delivered.values() if n > 1),
        "effects_double": double,
        "effects_missing": missing,
        "once_misses": once_misses,
        "over_max_attempts": over_attempts,
        "active_after_reap": s.active,
        "expired_after_reap": s.expired,
    }


def ok(report: dict[str, Any]) -> bool:
    """Whether a report proves the claims (once-misses are expected in once mode)."""
    return bool(
        report["lost"] == 0
        and not report["unfinished"]
        and report["dead_but_healthy"] == 0
        and report["dead_never_ran"] == 0
        and report["poison_not_dead"] == 0
        and report["effects_double"] == 0
        and report["effects_missing"] == 0
        and report["over_max_attempts"] == 0
        and report["active_after_reap"] == 0
        and report["expired_after_reap"] == 0
        and report.get("steps_rerun_after_record", 0) == 0
        and (report["mode"] == "once" or report["once_misses"] == 0)
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["failover"]:
        from bench import failover

        return failover.main(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd")
    w = sub.add_parser("worker", help="(internal) one worker process")
    w.add_argument("--url", required=True)
    w.add_argument("--queue", default=QUEUE)
    w.add_argument("--mode", choices=["once", "effects"], default="once")
    w.add_argument("--ttl", type=float, default=0.5)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--acks", help="append acknowledged completions' ids to this file")
    w.add_argument("--history", help="append this worker's history records to this file")
    w.add_argument("--unkept", action="store_true", help="completions may be lost in a window")
    w.add_argument("--no-deliveries", action="store_true", help="no RPUSH per delivery")
    w.add_argument("--retry-for", type=float, default=0.0, help="send a completion again, s")
    p.add_argument("--url", help="a redis:// URL (default: start a redis-server here)")
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--kill-every", type=float, default=0.25, help="seconds between SIGKILLs")
    p.add_argument("--mode", choices=["once", "effects"], default="once")
    p.add_argument("--ttl", type=float, default=0.5, help="lease length, seconds")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runner", choices=["loop", "leaseq", "durable"], default="loop")
    args = p.parse_args(argv)
    if args.cmd == "worker":
        work(args.url, args.queue, args.mode, args.ttl, args.seed, args.acks, args.history,
             kept=not args.unkept, deliveries=not args.no_deliveries,
             retry_for=args.retry_for)  # fmt: skip
        return 0
    server = None if args.url else Server()
    try:
        url = args.url or server.url  # type: ignore[union-attr]
        report = drive(
            url,
            jobs=args.jobs,
            workers=args.workers,
            kill_every=args.kill_every,
            mode=args.mode,
            ttl=args.ttl,
            timeout=args.timeout,
            seed=args.seed,
            runner=args.runner,
        )
    finally:
        if server is not None:
            server.stop()
    for key, value in report.items():
        print(f"{key:>20}: {value}")
    print("OK: zero lost, every effect exactly once" if ok(report) else "FAILED")
    return 0 if ok(report) else 1


if __name__ == "__main__":
    sys.exit(main())
