"""The fault matrix's faults on one redis-server (``python -m bench.faults``
runs them; see there for the list). Each is one ``bench.chaos`` run on its
own server (loopback, stopped by its PID at the end): worker processes
complete each job with a fenced effect and log every lease and every
completion acknowledged or refused; the driver logs every enqueue
acknowledged, the queue's clock and each fault with its window; the
checker (``bench.histories``) then reads it all against the rows the run
left. Each returns the checker's ``Verdict``, with the run's counts
(``kills``, ``stalls``, ``server_crashes``, ``cuts``, ...) added.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import redis

import leaseq
from bench import chaos, histories
from bench.chaos import now_ms
from bench.server import Server
from tests.support.proxy import Proxy

ROOT = Path(__file__).resolve().parent.parent
EVERYSEC_WINDOW = 2.0
"""Seconds before a crash in which ``appendfsync everysec`` may lose acknowledged
writes: one fsync a second, and Redis postpones a write for up to 2 s while a
slow fsync is still running (docs/reliability.md, "What each persistence
setting gives")."""
POWER_CUT = 1.0
"""The second crash of ``redis-kill-everysec`` cuts the AOF back to the length
it had this many seconds before the kill: what a power cut leaves of
``everysec`` at worst while its fsyncs keep up (a process kill alone leaves
the kernel the whole file)."""


def rows(r: redis.Redis, queue: str, ids: list[str]) -> dict[str, histories.Row | None]:
    """Every job's row as the run left it (state, attempts, fence)."""
    q = leaseq.Queue(queue, redis=r)
    return {job_id: histories.Row.of(q.get(job_id)) for job_id in ids}


def judge(server: Server, where: Path, counts: dict[str, int]) -> histories.Verdict:
    """Read the history of a run and check it against what the server holds;
    ``counts``: the run's own (its faults), added to the verdict's."""
    records = histories.read(sorted(where.glob("*.history")))
    client = server.client()
    _, effects_key = chaos.app_keys(chaos.QUEUE)
    effects = {k.decode(): int(v) for k, v in client.hgetall(effects_key).items()}
    verdict = histories.check(records, rows(client, chaos.QUEUE, histories.ids(records)), effects)
    verdict.counts.update(counts)
    client.close()
    return verdict


def history(where: Path, name: str) -> Any:
    """A history file of the run, line-buffered (each record on disk at once)."""
    return (where / f"{name}.history").open("a", buffering=1)


# -- workers killed or stalled ----------------------------------------------------------


def worker_kill(where: Path, jobs: int) -> histories.Verdict:
    with Server() as server:
        report = chaos.drive(server.url, jobs=jobs, workers=4, kill_every=0.2, mode="effects",
                             ttl=0.4, timeout=120.0, acks=str(where))  # fmt: skip
        return judge(server, where, {"kills": report["kills"]})


def worker_stall(where: Path, jobs: int) -> histories.Verdict:
    with Server() as server:
        # Jobs that take up to 0.2 s: a stalled worker wakes while the next
        # holder of its job still works on it, and tries to complete it first.
        report = chaos.drive(server.url, jobs=jobs // 4, workers=4, kill_every=0.3,
                             mode="effects", ttl=0.3, timeout=120.0, acks=str(where),
                             stall=0.5, work=0.2)  # fmt: skip
        return judge(server, where, {"stalls": report["kills"]})


# -- the server SIGKILLed ---------------------------------------------------------------


class Crashes:
    """The ``during`` of a crash run: a producer enqueueing one job a tick across
    the crashes (its enqueues ride the outages out: ``enqueue_retry``), the
    crashes at ``at`` seconds, and their ``fault`` records. ``window``: seconds
    before a crash whose acknowledged writes it may lose (0: none, and every
    enqueue is ``kept``); ``cut``: the crashes that also cut the AOF back
    ``POWER_CUT`` seconds (a power cut)."""

    def __init__(
        self, server: Server, where: Path, at: list[float], window: float, cut: set[int]
    ) -> None:
        self.server, self.at, self.window, self.cut = server, at, window, cut
        self.producer = leaseq.Queue(
            chaos.QUEUE, redis=server.client(), max_attempts=chaos.MAX_ATTEMPTS
        )
        self.log = history(where, "producer")
        self.sizes: list[tuple[int, int]] = []
        """(when, the AOF's length then), read each tick: where a power cut goes back to."""
        self.done = 0

    def __call__(self, elapsed: float) -> bool:
        last = self.at[-1] + 1.0
        if elapsed < last:  # late enqueues, across the crashes
            job_id = self.producer.enqueue({"i": -1}, id=f"late-{int(elapsed * 1000)}")
            record = {"op": "enqueue", "id": job_id, "kept": not self.window, "at": now_ms()}
            self.log.write(json.dumps(record) + "\n")
        if self.cut:
            self.sizes.append((now_ms(), self.server.aof_size()))
        if self.done < len(self.at) and elapsed > self.at[self.done]:
            self.crash()
        return elapsed < last or self.done < len(self.at)

    def crash(self) -> None:
        cut = self.done in self.cut
        at = now_ms()
        size = None
        if cut:  # the AOF's length POWER_CUT s ago (the oldest sample if none is that old)
            before = [n for t, n in self.sizes if t <= at - POWER_CUT * 1000]
            size = before[-1] if before else self.sizes[0][1]
        self.server.crash(cut_aof_to=size)
        self.done += 1
        what = f"SIGKILL {self.done}" + (f", AOF cut back {POWER_CUT:g} s" if cut else "")
        record: dict[str, Any] = {"op": "fault", "what": what, "at": at}
        if self.window:
            record.update({"from": at - round(self.window * 1000), "to": now_ms()})
        self.log.write(json.dumps(record) + "\n")

    def close(self) -> None:
        self.log.close()
        self.producer.redis.close()


def redis_kill(where: Path, jobs: int) -> histories.Verdict:
    """SIGKILL twice, ``appendfsync always``: nothing acknowledged may be lost."""
    with Server("--appendonly", "yes", "--appendfsync", "always") as server:
        during = Crashes(server, where, [1.0, 2.0], window=0.0, cut=set())
        try:
            report = chaos.drive(server.url, jobs=jobs, workers=3, kill_every=0.4,
                                 mode="effects", ttl=0.4, timeout=120.0, during=during,
                                 acks=str(where))  # fmt: skip
        finally:
            during.close()
        return judge(server, where, {"kills": report["kills"], "server_crashes": during.done})


def redis_kill_everysec(where: Path, jobs: int) -> histories.Verdict:
    """SIGKILL twice, ``appendfsync everysec``: the first a process kill (the kernel
    keeps the AOF), the second with a power cut (the AOF cut back ``POWER_CUT``
    seconds). Writes that are not ``kept`` may be lost within
    ``EVERYSEC_WINDOW`` seconds before a crash, and only there."""
    with Server("--appendonly", "yes", "--appendfsync", "everysec") as server:
        # The crashes are more than a window apart, and the first more than a
        # window after the backlog: what they may lose does not overlap.
        during = Crashes(server, where, [2.5, 5.0], window=EVERYSEC_WINDOW, cut={1})
        try:
            report = chaos.drive(server.url, jobs=jobs, workers=3, kill_every=3600.0,
                                 mode="effects", ttl=0.4, timeout=120.0, during=during,
                                 acks=str(where), worker_args=["--unkept"])  # fmt: skip
        finally:
            during.close()
        return judge(server, where, {"kills": report["kills"], "server_crashes": during.done})


# -- a worker cut off from Redis --------------------------------------------------------


PARTITION = ("stall", "drop", "drop_replies")
"""One round of the partition: each mode of the proxy (``tests/support/proxy.py``)."""
TTL, WORK = 0.5, 0.3
"""The run's leases, and how long each of the producer's jobs takes, in seconds:
a job another worker took over stays its for ``WORK``."""
LONGEST = {"stall": 2.5, "drop": 2.5, "drop_replies": 0.5}
"""The longest each mode lasts, in seconds. A stall or a cut ends sooner, once
the lease has passed and another worker holds the job: the late write then
lands while the job is someone else's (fencing must refuse it)."""
SHORTEST = TTL + 0.05
COUNTED = {"stall": "link_stalls", "drop": "cuts", "drop_replies": "reply_drops"}


class Partitions:
    """The ``during`` of the partition run: once the cut-off worker holds a lease
    (its history's last record is one), the proxy's next mode (see ``LONGEST``),
    then 0.3 s of link, ``rounds`` times over ``PARTITION``; and a producer
    that keeps a few jobs waiting until then (``produce``)."""

    def __init__(self, server: Server, where: Path, proxy: Proxy, rounds: int) -> None:
        self.proxy, self.log = proxy, where / "worker-cut-off.history"
        self.todo = list(PARTITION) * rounds
        self.since = self.until = 0.0
        self.held: tuple[str, int] | None = None
        """The job and attempt the cut-off worker held when the link went."""
        self.counts: dict[str, int] = {}
        self.producer = leaseq.Queue(chaos.QUEUE, redis=server.client())
        self.acked = history(where, "producer")
        self.enqueued = 0

    def produce(self) -> None:
        """One more job while fewer than 3 wait: a short queue, so a job reaped
        from the cut-off worker is soon another worker's."""
        if self.producer.stats().pending >= 3:
            return
        job_id = self.producer.enqueue({"i": -1, "work": WORK}, id=f"late-{self.enqueued}")
        self.acked.write(json.dumps({"op": "enqueue", "id": job_id, "kept": True, "at": now_ms()}))
        self.acked.write("\n")
        self.enqueued += 1

    def holding(self) -> tuple[str, int] | None:
        """The job and attempt the cut-off worker holds now (its last record a lease)."""
        try:
            lines = self.log.read_text().splitlines()
        except FileNotFoundError:
            return None
        last = json.loads(lines[-1]) if lines and lines[-1].endswith("}") else {}
        return (last["id"], last["attempt"]) if last.get("op") == "lease" else None

    def taken(self) -> bool:
        """Whether another worker holds the job the cut-off worker held."""
        job = self.producer.get(self.held[0]) if self.held else None
        return job is not None and job.state.value == "active" and job.attempts > self.held[1]

    def __call__(self, elapsed: float) -> bool:
        if self.todo:
            self.produce()
        mode = self.proxy.mode
        if mode != "pass":
            early = mode != "drop_replies" and elapsed - self.since > SHORTEST and self.taken()
            if elapsed >= self.until or early:
                self.proxy.set("pass")
                self.until = elapsed + 0.3
        elif self.todo and elapsed >= self.until:
            self.held = self.holding()
            # Not holding for 2 s: cut it anyway (once it has worked at all).
            worked = self.log.exists() and self.log.stat().st_size > 0
            if self.held is not None or (elapsed > self.until + 2 and worked):
                self.cut(self.todo.pop(0), elapsed)
        return bool(self.todo) or self.proxy.mode != "pass"

    def cut(self, mode: str, elapsed: float) -> None:
        self.proxy.set(mode)
        held = f"{self.held[0]} attempt {self.held[1]}" if self.held else "nothing"
        fault = {"op": "fault", "what": f"{mode}, the worker holding {held}", "at": now_ms()}
        self.acked.write(json.dumps(fault) + "\n")
        self.since, self.until = elapsed, elapsed + LONGEST[mode]
        self.counts[COUNTED[mode]] = self.counts.get(COUNTED[mode], 0) + 1

    def close(self) -> None:
        self.acked.close()
        self.producer.redis.close()


def partition(where: Path, jobs: int) -> histories.Verdict:
    """Two workers on the server, a third through a proxy that stalls its link
    past the lease, cuts it, and drops the server's replies (the command ran);
    it sends a completion or failure that got no answer again for up to 3 s.
    Every late write of the cut-off worker must be refused (fencing), or
    answered as done already (a call sent again): nothing lost, nothing twice."""
    with Server() as server:
        proxy = Proxy(server.port)
        during = Partitions(server, where, proxy, rounds=2 if jobs <= 400 else 6)
        url = proxy.url("socket_timeout=1.0&socket_connect_timeout=1.0")
        cmd = [sys.executable, "-m", "bench.chaos", "worker", "--url", url, "--mode", "effects"]
        cmd += ["--ttl", str(TTL), "--seed", "99", "--history", str(during.log)]
        cmd += ["--retry-for", "3"]
        cut_off = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        try:
            chaos.drive(server.url, jobs=jobs // 20, workers=2, kill_every=3600.0, mode="effects",
                        ttl=TTL, timeout=120.0, during=during, acks=str(where),
                        work=WORK)  # fmt: skip
            alive = cut_off.poll() is None
        finally:
            cut_off.kill()
            cut_off.wait()
            proxy.close()
            during.close()
        if not alive:
            raise AssertionError(f"the cut-off worker ended ({cut_off.returncode}): see stderr")
        verdict = judge(server, where, during.counts)
        mine = histories.read([during.log])
        verdict.counts["cut_off_leases"] = sum(r["op"] == "lease" for r in mine)
        verdict.counts["cut_off_refused"] = sum(r["op"] == "refused" for r in mine)
        return verdict


# -- a server out of memory -------------------------------------------------------------


PAD = 8000
"""Bytes of padding in each job of the memory runs: a few hundred jobs fill them."""


class Filler(threading.Thread):
    """Enqueues padded jobs one a call, as fast as the server takes them, logging
    each acknowledged (``kept``) and, on a full server, each refused (``ServerFull``:
    not acknowledged, so nothing may be there); stops ``more`` seconds after
    the first refusal, or after ``most`` jobs."""

    def __init__(self, server: Server, where: Path, most: int, more: float) -> None:
        super().__init__(daemon=True)
        self.q = leaseq.Queue(chaos.QUEUE, redis=server.client(), max_attempts=chaos.MAX_ATTEMPTS)
        self.log, self.most, self.more = history(where, "producer"), most, more
        self.first_refusal: str | None = None
        self.full_ms: int | None = None
        """When the server first refused an enqueue (wall clock, ms)."""
        self.warned: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._fill()
        except BaseException as exc:  # handed to the driver, which raises it
            self.error = exc
        finally:
            self.log.close()

    def _fill(self) -> None:
        full_at = None
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for i in range(self.most):
                if full_at is not None and time.monotonic() - full_at > self.more:
                    break
                job_id = f"pad-{i}"
                try:
                    self.q.enqueue({"i": i, "pad": "x" * PAD}, id=job_id)
                except leaseq.ServerFull as exc:
                    full_at = full_at or time.monotonic()
                    self.full_ms = self.full_ms or now_ms()
                    self.first_refusal = self.first_refusal or str(exc)
                    record = {"op": "enqueue_refused", "id": job_id, "error": type(exc).__name__}
                else:
                    record = {"op": "enqueue", "id": job_id, "kept": True, "at": now_ms()}
                self.log.write(json.dumps(record) + "\n")
                if full_at is not None:
                    time.sleep(0.01)
        self.warned = [str(w.message) for w in seen]


def memory_run(server: Server, where: Path, jobs: int, most: int) -> histories.Verdict:
    """Workers and a ``Filler`` on ``server``, whose ``maxmemory`` is set, once the
    workers are up, to what it uses then plus room for about ``jobs // 2``
    padded jobs; the filler offers up to ``most``."""
    client = server.client()
    state: dict[str, Any] = {}

    def during(elapsed: float) -> bool:
        if "filler" not in state:
            if client.scard(chaos.working_key(chaos.QUEUE)) < 3 and elapsed < 10:
                return True  # the workers' first writes go in before the server is full
            room = (jobs // 2) * (PAD + 500)
            client.config_set("maxmemory", int(client.info("memory")["used_memory"]) + room)
            state["filler"] = Filler(server, where, most, more=1.5)
            state["filler"].start()
        return bool(state["filler"].is_alive())

    try:
        report = chaos.drive(server.url, jobs=jobs // 8, workers=3, kill_every=3600.0,
                             mode="effects", ttl=1.0, timeout=60.0, during=during,
                             acks=str(where), worker_args=["--no-deliveries"])  # fmt: skip
        filler: Filler = state["filler"]
        filler.join()
        if filler.error is not None:
            raise filler.error
        stats = client.info("stats")
        verdict = judge(server, where, {"kills": report["kills"]})
        verdict.counts["evicted_keys"] = int(stats.get("evicted_keys", 0))
        if filler.full_ms is not None:  # the drain went on while the server was full
            done = histories.read(sorted(where.glob("worker-*.history")))
            verdict.counts["completed_while_full"] = sum(
                r["op"] == "complete" and r["at"] >= filler.full_ms for r in done
            )
        if filler.first_refusal:
            verdict.notes.append(f"the producer was told: {filler.first_refusal}")
        verdict.notes += [f"the producer was warned: {w}" for w in filler.warned[:1]]
        return verdict
    finally:
        client.close()


def full_server(where: Path, jobs: int) -> histories.Verdict:
    """``maxmemory`` and ``noeviction``: the producer gets ``ServerFull`` (nothing
    written), the workers drain on (their scripts run on a full server), no
    acknowledged enqueue is lost."""
    with Server("--maxmemory-policy", "noeviction") as server:
        verdict = memory_run(server, where, jobs, most=jobs * 10)
        verdict.counts["server_full"] = 1
        if not verdict.counts["enqueue_refused"]:
            verdict.violations["never_full"] = ["the server took every enqueue"]
        n = verdict.counts["completed_while_full"]
        verdict.notes.append(f"{n:,} completions acknowledged once the server refused enqueues")
        return verdict


def evicting_server(where: Path, jobs: int) -> histories.Verdict:
    """``maxmemory-policy allkeys-lru``: a full server deletes keys to make room
    (job rows among them). What is lost is counted, as a "don't do this" row;
    ``leaseq doctor`` run on the server first, its eviction verdict noted."""
    with Server("--maxmemory-policy", "allkeys-lru") as server:
        said = doctor(server.url)
        (where / "doctor.txt").write_text(said)
        line = next((x.strip() for x in said.splitlines() if " eviction " in x), "")
        verdict = memory_run(server, where, jobs, most=jobs)
        said_line = " ".join(line.split()) or "nothing about eviction"
        verdict.notes.insert(0, f"`leaseq doctor` said: {said_line}")
        if not line.startswith("BAD"):
            verdict.violations["doctor_silent"] = [said]
        return verdict


def doctor(url: str) -> str:
    """What ``leaseq doctor`` prints for the server at ``url`` (it exits 1 on a
    'bad' verdict)."""
    cmd = [sys.executable, "-m", "leaseq.cli", "--url", url, "doctor"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr
