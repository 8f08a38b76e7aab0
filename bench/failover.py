"""Failover run: a Sentinel-managed primary fails over while producers and
workers are busy; then count what was lost, run again or applied twice.

    python -m bench.failover --round kill --jobs 2000 --produce 10
    python -m bench.failover --round failover --jobs 2000 --produce 10
    python -m bench.chaos failover ...          (the same run, as a chaos mode)

A primary, a replica and three ``redis-server --sentinel`` processes on
loopback ports (``tests/support/sentinel.py``; Sentinel's timers short).
Three worker processes reach the primary through a ``redis+sentinel://``
URL and complete each job with ``effects=`` (an HINCRBY per job, in the
completion script: applied with it or not at all). Each logs every handler
run and every acknowledged completion to a local file, outside Redis, so the
log survives the failover. One producer enqueues, one job per call,
alternately on a plain queue setting and on ``durable=1`` (WAIT for one
replica), recording the ids the server acknowledged. Once jobs are being
completed, the round's fault:

- ``kill``: SIGKILL the primary; Sentinel promotes the replica; the old
  primary's server is started again (empty: no persistence) as the new
  primary's replica, so ``durable=1`` can be met again;
- ``failover``: ``SENTINEL FAILOVER`` with no kill: the old primary lives
  on, answers READONLY once demoted, and until then still takes writes
  that its resync throws away.

After the promotion the producer goes on for ``--after`` seconds, then the
queue drains. The report counts: acknowledged ``durable=1`` enqueues lost
(must be 0); acknowledged plain enqueues lost (what asynchronous
replication costs); handler re-runs and completions acknowledged but lost
(the job ran again: at least once); effects applied twice in the surviving
data (must be 0); rows not finished after the run (must be 0: leases from
the old primary expire and are reaped on the new one); steps back of the
queue's clock (``Stats.server_time``; must be 0); the time from the fault to
the first claim served by the new primary; and the rate of plain and
``durable=1`` enqueues side by side.

``run(..., history=True)`` (what ``python -m bench.faults --only
sentinel-kill`` runs) also records the round's history for
``bench.histories``: every lease with its full token, every completion
acknowledged or refused, every enqueue acknowledged (``kept``: a
``durable=1`` one), the queue's clock, and the fault with its window — from
``LAG`` before it until the old primary replicates the new one — inside
which a plain write may be lost; the report's ``verdict`` is the checker's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import leaseq
from bench import histories
from bench.chaos import now_ms
from leaseq.errors import LeaseqError
from leaseq.work.outage import Backoff, error_kind
from tests.support.sentinel import SERVICE, Sentinels

QUEUE = "failover"
PROBE = "failover-probe"
CLI_QUEUE = "failover-cli"
"""The queue of the run's real ``leaseq worker`` process (``cli_handler``)."""
MAX_ATTEMPTS = 50
TRANSIENT = (leaseq.ServerUnavailable, leaseq.ServerBusy, leaseq.NotReplicated)
ROOT = Path(__file__).resolve().parent.parent


def effects_key(queue: str) -> str:
    """The run's effect counters (one per job id), in the queue's slot."""
    return f"failover:{{{queue}}}:effects"


# -- the worker process ------------------------------------------------------------


def work(url: str, queue: str, ttl: float, log_path: str, history: str | None = None) -> None:
    """Claim, log the run, complete with the effect, log the acknowledgement;
    transient errors (the failover) back off as ``leaseq.Worker`` does.
    ``history``: a file for this worker's records of ``bench.histories`` (each
    lease, each completion acknowledged: not ``kept``, a plain write that a
    failover may lose; each completion refused)."""
    q = leaseq.Queue.from_url(url, queue, max_attempts=MAX_ATTEMPTS, keep_succeeded=None)
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - lives as long as we do
    records = Records(history)
    effects = effects_key(queue)
    backoff = Backoff()
    while True:
        try:
            lease = q.claim(ttl=ttl, block=0.5)
            backoff.reset()
        except LeaseqError as exc:
            if error_kind(exc) != "transient":
                raise
            time.sleep(backoff.next())
            continue
        if lease is None:
            continue
        log.write(f"run {lease.id} {lease.attempt} {time.monotonic():.3f}\n")
        records.lease(lease)
        time.sleep(0.002)  # the "work"
        give_up = time.monotonic() + ttl
        while True:  # a completion whose reply was lost is sent again
            try:
                q.complete(lease, effects=[("HINCRBY", effects, lease.id, 1)])
                log.write(f"ack {lease.id} {lease.attempt} {time.monotonic():.3f}\n")
                records.write(lease, "complete", at=now_ms(), kept=False)
                break
            except leaseq.LeaseLost as exc:
                # reaped, or finished by another run (AlreadyFinished)
                records.write(lease, "refused", error=type(exc).__name__)
                break
            except LeaseqError as exc:
                if error_kind(exc) != "transient" or time.monotonic() > give_up:
                    break
                time.sleep(backoff.next())


class Records:
    """A worker's ``bench.histories`` records, to ``path`` (nothing when None)."""

    def __init__(self, path: str | None) -> None:
        self.file = open(path, "a", buffering=1) if path else None  # noqa: SIM115 - lives as long as we do
        self.worker = os.getpid()

    def write(self, lease: leaseq.Lease, op: str, **more: Any) -> None:
        if self.file is not None:
            token = {"id": lease.id, "attempt": lease.attempt, "fence": lease.fence}
            self.file.write(json.dumps({"op": op, **token, **more}) + "\n")

    def lease(self, lease: leaseq.Lease) -> None:
        self.write(lease, "lease", worker=self.worker, deadline=round(lease.deadline * 1000))


def cli_handler(lease: leaseq.Lease) -> None:
    """The handler of the run's ``leaseq worker`` process: a little work."""
    time.sleep(0.002)


def leaseq_worker(url: str, ttl: float, log: Path) -> subprocess.Popen[bytes]:
    """A real ``leaseq worker`` (``leaseq.Worker``: prefetch, heartbeats, its
    outage backoff) on ``CLI_QUEUE``, through the same Sentinel URL."""
    cmd = [sys.executable, "-m", "leaseq.cli", "--url", url, "worker", CLI_QUEUE]
    cmd += ["bench.failover:cli_handler", "--concurrency", "2", "--ttl", str(ttl)]
    with log.open("wb") as err:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)


def outage_lines(log: Path) -> int:
    """The worker's log lines that start an outage (one WARNING per outage;
    retries are logged at DEBUG, so a tight loop would not show here, but a
    worker that lost and regained Redis over and over would)."""
    return sum(1 for line in log.read_text().splitlines() if "retrying in" in line)


# -- the driver --------------------------------------------------------------------


class Producer(threading.Thread):
    """Enqueues one job per call, alternately plain and ``durable=1``, until stopped."""

    def __init__(
        self, plain: leaseq.Queue, durable: leaseq.Queue, every: float, log: Any = None
    ) -> None:
        super().__init__(daemon=True)
        self.plain, self.durable, self.every = plain, durable, every
        self.log = log
        """A file for the ``bench.histories`` record of each enqueue acknowledged
        (``kept``: a ``durable=1`` one), or None."""
        self.acked: dict[str, list[str]] = {"plain": [], "durable": []}
        self.refused: Counter[str] = Counter()
        self.halt = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.halt.is_set():
            for kind, q in (("plain", self.plain), ("durable", self.durable)):
                job_id = f"{kind[0]}{i}"
                try:
                    q.enqueue({"i": i, "kind": kind}, id=job_id)
                    self.acked[kind].append(job_id)
                    if self.log is not None:
                        done = {"op": "enqueue", "id": job_id, "kept": kind == "durable"}
                        self.log.write(json.dumps({**done, "at": now_ms()}) + "\n")
                except TRANSIENT:
                    self.refused[kind] += 1
            i += 1
            self.halt.wait(self.every)


def enqueue_rates(q: leaseq.Queue, durable: leaseq.Queue, n: int) -> dict[str, float]:
    """Jobs per second, one per call, plain and ``durable=1``, and their ratio.
    Taken in alternating slices (after a warm-up), so a machine whose load
    drifts during the sample slows both alike."""
    spent = {"plain": 0.0, "durable": 0.0}
    q.enqueue({"warm": 1})
    durable.enqueue({"warm": 1})
    for chunk in range(10):
        for kind, queue in (("plain", q), ("durable", durable)):
            started = time.perf_counter()
            for i in range(chunk * n // 10, (chunk + 1) * n // 10):
                queue.enqueue({"i": i}, id=f"rate-{kind}-{i}")
            spent[kind] += time.perf_counter() - started
    rates = {kind: round(n / seconds, 1) for kind, seconds in spent.items()}
    return {**rates, "ratio": round(rates["durable"] / rates["plain"], 3)}


def first_claim_on(ha: Sentinels, probe: leaseq.Queue, new_port: list[int]) -> float:
    """Seconds (monotonic) when a probe claim is first served by the new primary:
    its row on that server carries the claim's token."""
    while True:
        try:
            lease = probe.claim(ttl=60.0)
        except TRANSIENT:
            time.sleep(0.01)
            continue
        at = time.monotonic()
        if lease is None:
            raise AssertionError("the probe queue ran dry")
        attempts = None
        if new_port:  # else promotion is not seen yet: this may be the old primary
            node = ha.node(ha.server(new_port[0]))
            try:
                attempts = node.hget(probe.keys.job(lease.id), "attempts")
            finally:
                node.close()
        if attempts is not None and int(attempts) == lease.attempt:
            return at
        try:  # served by the old primary: put it back, so the probe never runs dry
            probe.release(lease)
        except (*TRANSIENT, leaseq.LeaseLost):
            pass
        time.sleep(0.005)


def run(
    fault: str = "kill",
    *,
    jobs: int = 300,
    produce: float = 3.0,
    after: float = 1.0,
    workers: int = 3,
    ttl: float = 1.0,
    rate_jobs: int = 200,
    timeout: float = 90.0,
    min_replicas: int = 0,
    logs: str,
    history: bool = False,
) -> dict[str, Any]:
    """One round, ``fault`` ``kill`` or ``failover``; the report (see the module docstring).
    ``logs``: a directory for the workers' logs. ``history``: the run also
    writes its ``bench.histories`` records there (the workers' leases and
    completions, the producer's enqueues, the queue's clock, the fault and its
    window) and the report's ``verdict`` is their check."""
    if fault not in ("kill", "failover"):
        raise ValueError(f"fault must be 'kill' or 'failover', not {fault!r}")
    # min-replicas-to-write N: a primary with fewer live replicas refuses writes
    # (NOREPLICAS), so one cut off by a failover stops taking what it would lose.
    extra = ("--min-replicas-to-write", str(min_replicas), "--min-replicas-max-lag", "2")
    ha = Sentinels(*(extra if min_replicas else ()), auth=True)
    procs: list[subprocess.Popen[bytes]] = []
    producer: Producer | None = None
    try:
        url = ha.url()
        q = leaseq.Queue.from_url(url, QUEUE, max_attempts=MAX_ATTEMPTS, keep_succeeded=None)
        settings: dict[str, Any] = {"max_attempts": MAX_ATTEMPTS, "keep_succeeded": None}
        durable = leaseq.Queue(QUEUE, redis=q.redis, durable=1, durable_timeout=0.5, **settings)
        rates = enqueue_rates(
            leaseq.Queue("failover-rate", redis=q.redis),
            leaseq.Queue("failover-rate", redis=q.redis, durable=1),
            rate_jobs,
        )
        backlog = durable.enqueue_many([{"i": -i} for i in range(jobs)])
        backlog_at = now_ms()
        probe = leaseq.Queue(PROBE, redis=q.redis, durable=1)
        probe.enqueue_many([{"probe": i} for i in range(200)])
        cli_queue = leaseq.Queue(CLI_QUEUE, redis=q.redis, durable=1)
        cli_ids = cli_queue.enqueue_many([{"i": i} for i in range(jobs // 3)])
        cli_log = Path(logs) / "leaseq-worker.err"
        procs.append(leaseq_worker(url, ttl, cli_log))
        for i in range(workers):
            log = str(Path(logs) / f"worker-{i}.log")
            cmd = [sys.executable, "-m", "bench.failover", "worker", "--url", url]
            cmd += ["--queue", QUEUE, "--ttl", str(ttl), "--log", log]
            cmd += ["--history", str(Path(logs) / f"worker-{i}.history")] if history else []
            procs.append(subprocess.Popen(cmd, cwd=ROOT))
        acked_log = (Path(logs) / "producer.history").open("a", buffering=1) if history else None
        producer = Producer(q, durable, every=0.004, log=acked_log)
        producer.start()
        clock: list[float] = []
        effects = effects_key(QUEUE)
        started = time.monotonic()
        # The fault comes once workers are completing jobs (the leaseq worker
        # too: its CLI exits if Redis is down as it starts), and the producer has
        # run a while.
        while (
            time.monotonic() - started < produce / 2
            or q.redis.hlen(effects) < jobs // 4
            or cli_queue.stats().succeeded == 0
        ):
            clock.append(q.stats().server_time)
            if time.monotonic() - started > timeout:
                raise AssertionError("the workers completed too few jobs before the fault")
            time.sleep(0.02)
        old = ha.primary.port
        new_port: list[int] = []
        first: list[float] = []
        prober = threading.Thread(
            target=lambda: first.append(first_claim_on(ha, probe, new_port)), daemon=True
        )
        fault_at, fault_ms = time.monotonic(), now_ms()
        if fault == "kill":
            ha.primary.kill()
        else:
            ha.sentinel().execute_command("SENTINEL", "FAILOVER", SERVICE)
        prober.start()
        new_port.append(ha.wait_promoted(old))
        promoted_at = time.monotonic()
        if fault == "kill":
            ha.rejoin(ha.primary, new_port[0])  # empty, as the new primary's replica
        # Until the old primary is a replica, it may still serve (and lose)
        # writes: the run is not over before that.
        ha.wait_replica_of(ha.primary, new_port[0], timeout)
        settled_ms = now_ms()
        while time.monotonic() - promoted_at < after or time.monotonic() - started < produce:
            _tick(q, clock)
        producer.halt.set()
        producer.join()
        if acked_log is not None:
            acked_log.close()
        prober.join(timeout)
        cli_ids += [_until_acked(cli_queue, i, timeout) for i in range(50)]
        while True:
            s = _tick(q, clock)
            cli = _tick(cli_queue, [])
            if s is not None and cli is not None and _idle(s) and _idle(cli):
                break
            if time.monotonic() - started > timeout:
                break
        drained_at = time.monotonic()
        cli_alive = procs[0].poll() is None
        failovers = ha.switches()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        if producer is not None:
            producer.halt.set()
    try:
        q.reap()
        report = check(q, backlog, producer.acked, Path(logs), fault_at, promoted_at)
        if history:
            window = {"what": WHAT[fault], "at": fault_ms, "from": fault_ms - round(LAG * 1000)}
            driver = [{"op": "enqueue", "id": i, "kept": True, "at": backlog_at} for i in backlog]
            driver += [{"op": "clock", "at": round(t * 1000)} for t in clock]
            driver += [{"op": "fault", **window, "to": settled_ms}]
            report["verdict"] = judge(q, Path(logs), driver)
        steps_back = sum(1 for a, b in itertools.pairwise(clock) if b < a)
        report.update(
            round=fault,
            min_replicas_to_write=min_replicas,
            leaseq_worker_alive=cli_alive,
            leaseq_worker_unfinished=sum(
                1
                for job_id in cli_ids
                if (job := cli_queue.get(job_id)) is None or job.state is not leaseq.State.SUCCEEDED
            ),
            leaseq_worker_outages=outage_lines(cli_log),
            workers=workers,
            faults=1,
            failovers=failovers,
            refused_enqueues=dict(producer.refused),
            clock_steps_back=steps_back,
            first_claim_on_new_primary_s=round_or_none(first[0] - fault_at if first else None),
            promotion_s=round(promoted_at - fault_at, 2),
            seconds=round(drained_at - started, 1),
            enqueue_rates=rates,
        )
        q.close()
        return report
    finally:
        ha.stop()


WHAT = {"kill": "primary SIGKILLed", "failover": "SENTINEL FAILOVER"}
LAG = 1.0
"""Seconds before a failover in which the acknowledged plain writes the replica
had not yet received may be lost (its lag: milliseconds on loopback); the
window then runs on until the old primary replicates the new one."""


def judge(q: leaseq.Queue, logs: Path, driver: list[dict[str, Any]]) -> histories.Verdict:
    """Check the run's history (``driver``: the driver's own records, written to
    ``logs`` first) against the rows and effects the new primary holds."""
    with (logs / "driver.history").open("w") as f:
        f.writelines(json.dumps(r) + "\n" for r in driver)
    records = histories.read(sorted(logs.glob("*.history")))
    rows = {job_id: histories.Row.of(q.get(job_id)) for job_id in histories.ids(records)}
    effects = {k.decode(): int(v) for k, v in q.redis.hgetall(effects_key(q.name)).items()}
    verdict = histories.check(records, rows, effects)
    verdict.counts["failovers"] = 1
    return verdict


def _idle(s: leaseq.Stats) -> bool:
    return s.pending + s.scheduled + s.active == 0


def _until_acked(q: leaseq.Queue, i: int, timeout: float) -> str:
    """Enqueue job ``late-<i>`` (the same id each time) until the server acknowledges it."""
    give_up = time.monotonic() + timeout
    while True:
        try:
            return q.enqueue({"late": i}, id=f"late-{i}")
        except TRANSIENT:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.05)


def round_or_none(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _tick(q: leaseq.Queue, clock: list[float]) -> leaseq.Stats | None:
    """One look at the queue (its clock noted); None while it does not answer."""
    try:
        s = q.stats()
    except TRANSIENT:
        time.sleep(0.02)
        return None
    clock.append(s.server_time)
    time.sleep(0.02)
    return s


def check(
    q: leaseq.Queue,
    backlog: list[str],
    acked: dict[str, list[str]],
    logs: Path,
    fault_at: float,
    promoted_at: float,
) -> dict[str, Any]:
    """Read the surviving rows and the workers' logs; count what the run claims."""
    runs: Counter[str] = Counter()
    acks: Counter[str] = Counter()
    ack_times: dict[str, list[float]] = {}
    for path in logs.glob("worker-*.log"):
        for line in path.read_text().splitlines():
            what, job_id, _attempt, at = line.split()
            (runs if what == "run" else acks)[job_id] += 1
            if what == "ack":
                ack_times.setdefault(job_id, []).append(float(at))
    effects = {k.decode(): int(v) for k, v in q.redis.hgetall(effects_key(q.name)).items()}
    lost: Counter[str] = Counter()
    unfinished: Counter[str] = Counter()
    succeeded: set[str] = set()
    groups = {"backlog": backlog, "plain": acked["plain"], "durable": acked["durable"]}
    for group, ids in groups.items():
        for job_id in ids:
            job = q.get(job_id)
            if job is None:
                lost[group] += 1
            elif job.state is leaseq.State.SUCCEEDED:
                succeeded.add(job_id)
            else:
                unfinished[job.state.value] += 1
    s = q.stats()
    # Completions a worker saw acknowledged that the data does not hold (when
    # the job succeeded, its last acknowledged completion is taken as the one
    # held), by when they were acknowledged: before the fault, during it, after.
    lost_acks: Counter[str] = Counter()
    for job_id, times in ack_times.items():
        job = q.get(job_id)
        held = job is not None and job.state is leaseq.State.SUCCEEDED
        for at in sorted(times)[: len(times) - held]:
            window = "before" if at < fault_at else "during" if at < promoted_at else "after"
            lost_acks[window] += 1
    return {
        "jobs": sum(len(ids) for ids in groups.values()),
        "acked_plain": len(acked["plain"]),
        "acked_durable": len(acked["durable"]),
        "lost_durable": lost["durable"] + lost["backlog"],
        "lost_plain": lost["plain"],
        "unfinished": dict(unfinished),
        "active_after_run": s.active,
        "handler_runs": sum(runs.values()),
        "reruns": sum(n - 1 for n in runs.values() if n > 1),
        "completions_acked_then_lost": sum(lost_acks.values()),
        "acked_then_lost_when": dict(lost_acks),
        "effects_double": sum(1 for n in effects.values() if n > 1),
        "effects_missing": sum(1 for i in succeeded if effects.get(i, 0) == 0),
    }


def ok(report: dict[str, Any]) -> bool:
    """Whether a round proves the claims (plain losses and re-runs are reported, not failed)."""
    return bool(
        report["lost_durable"] == 0
        and report["effects_double"] == 0
        and report["effects_missing"] == 0
        and not report["unfinished"]
        and report["active_after_run"] == 0
        and report["clock_steps_back"] == 0
        and report["first_claim_on_new_primary_s"] is not None
        and report["leaseq_worker_alive"]
        and report["leaseq_worker_unfinished"] == 0
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd")
    w = sub.add_parser("worker", help="(internal) one worker process")
    w.add_argument("--url", required=True)
    w.add_argument("--queue", default=QUEUE)
    w.add_argument("--ttl", type=float, default=1.0)
    w.add_argument("--log", required=True)
    w.add_argument("--history", help="append this worker's history records to this file")
    p.add_argument("--round", choices=["kill", "failover", "both"], default="both")
    p.add_argument("--jobs", type=int, default=2000, help="backlog before the fault")
    p.add_argument("--produce", type=float, default=10.0, help="seconds of producing")
    p.add_argument("--after", type=float, default=3.0, help="producing after promotion, s")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--ttl", type=float, default=1.0, help="lease length, seconds")
    p.add_argument("--rate-jobs", type=int, default=1000, help="enqueues per rate sample")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--min-replicas", type=int, default=0, help="min-replicas-to-write, 0: off")
    args = p.parse_args(argv)
    if args.cmd == "worker":
        work(args.url, args.queue, args.ttl, args.log, args.history)
        return 0
    import tempfile

    good = True
    for name in ("kill", "failover") if args.round == "both" else (args.round,):
        with tempfile.TemporaryDirectory(prefix="leaseq-failover-") as logs:
            report = run(
                name,
                jobs=args.jobs,
                produce=args.produce,
                after=args.after,
                workers=args.workers,
                ttl=args.ttl,
                rate_jobs=args.rate_jobs,
                timeout=args.timeout,
                min_replicas=args.min_replicas,
                logs=logs,
            )
        for key, value in report.items():
            print(f"{key:>30}: {value}")
        print("OK" if ok(report) else "FAILED")
        print()
        good = good and ok(report)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
