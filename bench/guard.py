"""The guard: leaseq here, leaseq at a previous revision, and huey, side by side.

``python -m bench.guard [--rev REV] [--quick]`` measures, round after round,
each side in a fresh process on a throwaway redis-server of its own. In a
round every side's process runs at once, and they take turns step by step (a
token passed on a fourth server: a block of 500 enqueues, one enqueue_many
call, one drain), so a noisy neighbour on this shared machine hits every side
alike; the ring's start and direction change each round. The figures:

- **drain**: one worker process with its defaults (``leaseq worker Q
  peer_tasks:handler --burst``; ``huey_consumer peer_tasks.huey -w 1``) running
  N jobs that each do one Redis ``INCR`` (bench/peer_tasks.py); jobs/s from the
  first completion to the last, timed from outside by polling the counter;
- **enqueue**: N single enqueues from one client, unpipelined, and the same
  client's bare ``LPUSH`` on the same connection (the round-trip floor),
  taking turns in blocks of 500: jobs/s of the median block, and the median
  block's enqueue wall / ``LPUSH`` wall (a neighbour's burst spoils a block,
  not the figure);
- **drain_p99**, **drain_hold**: during that drain, the p99 of another
  client's ``PING`` sent every millisecond from a separate process, and the
  longest call the server's ``SLOWLOG`` saw (bench/probe.py, loaded by path
  like the tasks): how good a neighbour the queue is on a shared server;
- **enqueue_many**: N jobs in calls of 1,000, jobs/s of the median call
  (leaseq only);
- **Redis bytes per job**: the ``used_memory`` delta over the N pending jobs
  enqueued one by one, over N enqueued in batches (leaseq only), and once the
  drain is done (``keep_succeeded_count`` at its default), per job.

The revision side runs that revision's own code: ``git archive`` of REV into a
temp dir, and the measuring process and its worker with that tree first on
PYTHONPATH (the measuring code is this file, the same for every side). REV
defaults to the newest git tag reachable from HEAD (the previous release: tag
each release, ``git tag v0.2.0``), and with no tag to ``HEAD~1``; at the end of
an issue pass ``--rev`` the commit it started from. ``--at REV`` measures a
revision instead of the working tree (``bench.ab`` is that without huey).

It prints, in markdown, the date, the machine (cores, load, server and client
versions) and each side's revision, then a table: each side's median, the
ratios this/rev and this/huey (taken round by round, median and range), and
the targets with met / not met. Absolute rates
do not travel between machines: read the ratios. Never run by the tests.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import redis

if TYPE_CHECKING:  # the measuring process imports nothing from bench
    from bench.revisions import Scratch

ROOT_BENCH = Path(__file__).resolve().parent
QUEUE = "guard"
FLOOR = "guard:floor"
BATCH = 1_000
BLOCK = 500
"""Single enqueues and ``LPUSH``es take turns in blocks of this many."""
TURN_TIMEOUT = 600
"""Seconds a side waits for its turn before it gives up."""


class Figure(NamedTuple):
    key: str
    label: str
    digits: int = 0
    vs_huey: bool = True
    """False where huey's figure is about nothing (it keeps no finished job)."""


FIGURES = (
    Figure("drain", "drain, 1 worker, an INCR a job (jobs/s)"),
    Figure("enqueue", "enqueue, 1 client, one call each (jobs/s)"),
    Figure("lpush", "bare LPUSH, same connection (calls/s)"),
    Figure("enqueue_per_lpush", "enqueue wall / LPUSH wall", 2),
    Figure("drain_p99", "another client's PING p99 during the drain (ms)", 2),
    Figure("drain_hold", "longest call during the drain, SLOWLOG (ms)", 2),
    Figure("enqueue_many", "enqueue_many, batches of 1,000 (jobs/s)"),
    Figure("bytes_single", "Redis bytes / pending job, one by one"),
    Figure("bytes_batch", "Redis bytes / pending job, in batches"),
    Figure("bytes_finished", "Redis bytes / finished job, default keep", vs_huey=False),
)


class Target(NamedTuple):
    text: str
    met: Callable[[float, float | None], bool | None]
    """(this side's median, this/huey median or None) -> met, or None: unknown."""


TARGETS = {
    "drain": Target(">= 4x huey", lambda _, vs_huey: None if vs_huey is None else vs_huey >= 4),
    "drain_p99": Target("<= 1 ms, <= huey's", lambda this, vs: this <= 1 and (vs or 0) <= 1),
    "drain_hold": Target("<= 2 ms", lambda this, _: this <= 2),
    "enqueue_per_lpush": Target("<= 1.2", lambda this, _: this <= 1.2),
    "enqueue_many": Target(">= 200,000/s", lambda this, _: this >= 200_000),
    "bytes_single": Target("<= 226", lambda this, _: this <= 226),
    "bytes_batch": Target("<= 226", lambda this, _: this <= 226),
}


# --- the measuring process (one per side and round; stdlib and redis only) ---


def used(r: Any) -> int:
    return int(r.info("memory")["used_memory"])


class Turns:
    """Lock-step with the other sides of a round: each step waits for this
    side's token on the coordinating server and then passes it on, so the sides
    take turns step by step (a block of 500 enqueues is ~50 ms) and a
    neighbour's load hits them alike. Every side takes the same steps."""

    def __init__(self, url: str | None, me: str, following: str) -> None:
        # A turn may wait out the other sides' drains: longer than redis-py's
        # default socket timeout.
        self.r = redis.Redis.from_url(url, socket_timeout=TURN_TIMEOUT + 10) if url else None
        self.mine, self.next = f"guard:turn:{me}", f"guard:turn:{following}"

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        if self.r is None:
            yield
            return
        if self.r.blpop([self.mine], timeout=TURN_TIMEOUT) is None:
            raise RuntimeError(f"no turn in {TURN_TIMEOUT} s: another side failed or hangs")
        yield
        self.r.rpush(self.next, 1)


def singles(
    r: Any, jobs: int, one: Callable[[int], object], push: Callable[[], object], turn: Turns
) -> dict[str, float]:
    """``jobs`` calls of ``one(i)`` and as many of ``push()``, in alternate blocks
    (a turn each); rates from the median block (a burst spoils a block, not the figure)."""
    t_one: list[float] = []
    t_push: list[float] = []
    for start in range(0, jobs, BLOCK):
        with turn():
            t0 = time.perf_counter()
            for i in range(start, start + BLOCK):
                one(i)
            t1 = time.perf_counter()
            for _ in range(BLOCK):
                push()
            t_one.append(t1 - t0)
            t_push.append(time.perf_counter() - t1)
    return {
        "enqueue": BLOCK / statistics.median(t_one),
        "lpush": BLOCK / statistics.median(t_push),
        "enqueue_per_lpush": statistics.median([a / b for a, b in zip(t_one, t_push, strict=True)]),
    }


def drain(
    r: Any,
    jobs: int,
    command: list[str],
    counter: str,
    exits: bool,
    *,
    env: dict[str, str] | None = None,
    cpu: list[float] | None = None,
) -> float:
    """Start ``command`` on ``jobs`` queued jobs whose handlers INCR ``counter``;
    jobs/s from the first completion to the last. ``exits``: the command
    returns by itself when done (waited for, so that its last writes land);
    otherwise it is stopped. ``env``: the command's environment (None: this
    one's); ``cpu``: wait for it to exit by itself and append the CPU seconds
    it and the children it waited for used."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env)
        first: tuple[float, int] | None = None
        give_up = time.monotonic() + 600
        try:
            while True:
                done = int(r.get(counter) or 0)
                now = time.perf_counter()
                if done and first is None:
                    first = (now, done)
                if done >= jobs:
                    break
                if time.monotonic() > give_up or proc.poll() is not None:
                    err.seek(0)
                    tail = err.read()[-1500:].decode(errors="replace")
                    raise RuntimeError(f"{command}: {done} of {jobs} jobs done\n{tail}")
                time.sleep(0.01)
            if cpu is not None:
                _, status, usage = os.wait4(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)
                cpu.append(usage.ru_utime + usage.ru_stime)
            elif exits:
                proc.wait(60)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    assert first is not None
    return (jobs - first[1]) / max(now - first[0], 1e-9)


def peer_drain(
    r: Any, url: str, jobs: int, command: list[str], cpu: list[float] | None = None
) -> float:
    """``drain`` of a command run from the checkout with bench.peer_tasks (and its
    siblings) importable and pointed at ``url``: bench.vs_peers, bench.drain_profile."""
    from bench.peer_tasks import COUNTER
    from bench.revisions import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT), "BENCH_REDIS_URL": url}
    return drain(r, jobs, command, COUNTER, exits=False, env=env, cpu=cpu)


def measure(
    kind: str,
    url: str,
    jobs: int,
    tasks: str,
    coord: str | None = None,
    me: str = "",
    to: str = "",
) -> dict[str, float]:
    """One side's figures on its own server ``url``, run in a fresh process whose
    cwd is the side's tree; with ``coord``, in turns with the other sides (the
    token comes to ``me`` and goes on to ``to``). Every kind takes the same
    steps: set up, the single blocks, set up again, the batch calls, the drain."""
    os.environ["BENCH_REDIS_URL"] = url  # read by the tasks module at import
    peer = importlib.import_module(tasks)
    r = redis.Redis.from_url(url)
    return (_huey if kind == "huey" else _leaseq)(r, url, jobs, peer, Turns(coord, me, to))


@contextlib.contextmanager
def neighbour(r: Any, url: str, out: dict[str, float]) -> Iterator[None]:
    """Another client's p99 and the longest call while the block runs, into ``out``."""
    probe = importlib.import_module("guard_probe")  # bench/probe.py, by path (main)
    held: list[Any] = []
    seen: list[Any] = []
    with probe.watching(r, held), probe.probing(url, seen):
        yield
    out["drain_p99"] = seen[0].p99 if seen else float("nan")
    out["drain_hold"] = held[0].longest_us / 1000


def _leaseq(r: Any, url: str, jobs: int, peer: Any, turn: Turns) -> dict[str, float]:
    import leaseq

    where = Path(leaseq.__file__).resolve()
    if Path.cwd().resolve() not in where.parents:
        raise RuntimeError(f"leaseq imported from {where}, not from {Path.cwd()}")
    q = leaseq.Queue(QUEUE, redis=r)
    warm = leaseq.Queue(f"{QUEUE}-warm", redis=r)  # scripts loaded, connection open
    payloads = [{"i": i} for i in range(jobs)]
    with turn():
        r.flushall()
        warm.enqueue({"i": -1})
        base = used(r)
    out = singles(r, jobs, lambda i: q.enqueue({"i": i}), lambda: r.lpush(FLOOR, b"x"), turn)
    with turn():
        r.delete(FLOOR)
        out["bytes_single"] = (used(r) - base) / jobs
        r.flushall()
        warm.enqueue({"i": -1})
        base = used(r)
    calls = []
    for i in range(0, jobs, BATCH):
        with turn():
            start = time.perf_counter()
            q.enqueue_many(payloads[i : i + BATCH])
            calls.append(time.perf_counter() - start)
    out["enqueue_many"] = BATCH / statistics.median(calls)
    with turn():
        out["bytes_batch"] = (used(r) - base) / jobs
        worker = [sys.executable, "-m", "leaseq.cli", "--url", url, "worker", QUEUE]
        worker += [f"{peer.__name__}:handler", "--burst"]
        with neighbour(r, url, out):
            out["drain"] = drain(r, jobs, worker, peer.COUNTER, exits=True)
        out["bytes_finished"] = (used(r) - base) / jobs
    return out


def _huey(r: Any, url: str, jobs: int, peer: Any, turn: Turns) -> dict[str, float]:
    huey = peer.huey
    with turn():
        r.flushall()
        peer.incr()  # connection open, script loaded
        huey.flush()
        base = used(r)
    push = huey.storage.conn.lpush
    out = singles(r, jobs, lambda i: peer.incr(), lambda: push(FLOOR, b"x"), turn)
    with turn():
        r.delete(FLOOR)
        out["bytes_single"] = (used(r) - base) / jobs
    for _ in range(0, jobs, BATCH):
        with turn():
            pass  # huey has no batch enqueue; the turns keep the sides in step
    with turn():
        consumer = [sys.executable, "-m", "huey.bin.huey_consumer", f"{peer.__name__}.huey"]
        with neighbour(r, url, out):
            out["drain"] = drain(r, jobs, [*consumer, "-w", "1"], peer.COUNTER, exits=False)
        out["bytes_finished"] = (used(r) - base) / jobs
    return out


# --- the run: sides, rounds, the table ---


def default_rev() -> str:
    from bench.revisions import newest_tag

    return newest_tag() or "HEAD~1"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.guard",
        description="leaseq here vs a previous revision vs huey: drain, enqueue, memory.",
    )
    parser.add_argument(
        "--rev", help="the revision to compare with (default: the newest tag, else HEAD~1)"
    )
    parser.add_argument("--at", help="measure this revision instead of the working tree")
    parser.add_argument("--no-rev", action="store_true", help="leave the revision side out")
    parser.add_argument("--no-huey", action="store_true", help="leave huey out")
    parser.add_argument(
        "--jobs",
        type=int,
        help="jobs a figure, a multiple of 1,000 (default 20,000; --quick 5,000)",
    )
    parser.add_argument("--rounds", type=int, help="rounds (default 5; --quick 3)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of about a minute")
    args = parser.parse_args(argv)
    if args.jobs is None:
        args.jobs = 5_000 if args.quick else 20_000
    if args.rounds is None:
        args.rounds = 3 if args.quick else 5
    if args.jobs < BATCH or args.jobs % BATCH or args.rounds < 1:
        parser.error(f"--jobs takes a multiple of {BATCH:,}, --rounds 1 or more")
    if args.no_rev and args.rev:
        parser.error("--rev and --no-rev: pick one")
    return args


class Side(NamedTuple):
    title: str
    kind: str  # "leaseq" or "huey"
    tree: Path


def sides_of(args: argparse.Namespace, scratch: Scratch) -> tuple[dict[str, Side], list[str]]:
    """The sides to measure (this, rev, huey; exported trees under ``scratch``)
    and a line naming each."""
    from bench.revisions import ROOT, describe, git

    if args.at:
        at = describe(args.at)
        sides = {"this": Side(f"at {at.split()[0]}", "leaseq", scratch.export(args.at, "at"))}
        notes = [f"at: {at}"]
    else:
        dirty = git("status", "--porcelain", "--untracked-files=no")
        sides = {"this": Side("this tree", "leaseq", ROOT)}
        notes = [f"this tree: {describe('HEAD')}{' + uncommitted changes' if dirty else ''}"]
    if not args.no_rev:
        rev = args.rev or default_rev()
        was = describe(rev)
        sides["rev"] = Side(f"rev {was.split()[0]}", "leaseq", scratch.export(rev, "rev"))
        notes.append(f"rev: {rev} = {was}")
    if not args.no_huey:
        import huey

        sides["huey"] = Side("huey", "huey", ROOT)
        notes.append(f"huey {huey.__version__}, its consumer with -w 1")
    return sides, notes


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from bench.revisions import Scratch, gather
    from bench.server import Server, machine

    if not args.no_huey and importlib.util.find_spec("huey") is None:
        raise SystemExit("bench.guard needs huey (pip install -e '.[bench]') or --no-huey")
    started = time.monotonic()
    with Scratch("leaseq-guard-") as scratch, contextlib.ExitStack() as stack:
        tasks = scratch.module("guard_peer_tasks", (ROOT_BENCH / "peer_tasks.py").read_text())
        scratch.module("guard_probe", (ROOT_BENCH / "probe.py").read_text())
        sides, notes = sides_of(args, scratch)
        coord_server = stack.enter_context(Server())  # holds only the turn tokens
        coord = coord_server.client()
        servers = {name: stack.enter_context(Server()) for name in sides}
        load = os.getloadavg()[0]

        def one_round(order: list[str], jobs: int) -> dict[str, dict[str, float]]:
            """Every side at once, each on its own server, in turns (``Turns``)."""
            coord.flushall()
            children = []
            for i, name in enumerate(order):
                side, to = sides[name], order[(i + 1) % len(order)]
                margs = [side.kind, servers[name].url, jobs, tasks, coord_server.url, name, to]
                children.append(scratch.start(side.tree, __file__, "measure", margs))
            coord.rpush(f"guard:turn:{order[0]}", 1)
            return dict(zip(order, gather(children), strict=True))

        names = list(sides)
        one_round(names, BATCH)  # a warm-up: scripts cached, bytecode written
        got: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for k in range(args.rounds):
            order = names[k % len(names) :] + names[: k % len(names)]
            results = one_round(order[::-1] if k % 2 else order, args.jobs)
            for name in names:
                got[name].append(results[name])
            drains = "  ".join(f"{n} {got[n][-1]['drain']:,.0f}" for n in names)
            print(f"guard: round {k + 1}/{args.rounds} done (drain jobs/s: {drains})",
                  file=sys.stderr, flush=True)  # fmt: skip
        box = machine(coord)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(["python -m bench.guard", *(sys.argv[1:] if argv is None else argv)])
    print(f"**leaseq guard**, {when}: `{command}`\n")
    print(f"- machine: {box}; load average {load:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    for note in notes:
        print(f"- {note}")
    print(
        f"- {args.jobs:,} jobs a figure, median of {args.rounds} rounds; in each, every side "
        f"at once on its own redis-server, taking turns step by step; ratios taken round "
        f"by round: median [min, max]; "
        f"{time.monotonic() - started:.0f} s\n"
    )
    print(table(sides, got))
    return 0


def table(sides: dict[str, Side], got: dict[str, list[dict[str, float]]]) -> str:
    """The markdown table: medians per side, ratios to this side, targets."""
    others = [n for n in ("rev", "huey") if n in sides]
    head = ["figure", *(sides[n].title for n in sides), *(f"this/{n}" for n in others)]
    rows = [[*head, "target", "met"], ["---"] + ["---:"] * (len(head) - 1) + ["---", "---"]]
    met_count = total = 0
    for fig in FIGURES:
        medians = {n: _median(got[n], fig.key) for n in sides}
        if medians["this"] is None:
            continue
        ratios = {
            n: _ratios(got["this"], got[n], fig.key) if n != "huey" or fig.vs_huey else []
            for n in others
        }
        row = [fig.label, *(_number(medians[n], fig.digits) for n in sides)]
        row += [_ratio_text(ratios[n]) for n in others]
        target = TARGETS.get(fig.key)
        met = None
        if target is not None:
            vs_huey = ratios.get("huey")
            met = target.met(medians["this"], statistics.median(vs_huey) if vs_huey else None)
            total += 1
            met_count += bool(met)
        row += [target.text if target else "", {True: "met", False: "**not met**"}.get(met, "")]
        rows.append(row)
    lines = ["| " + " | ".join(row) + " |" for row in rows]
    lines.append(f"\ntargets met: {met_count} of {total}")
    return "\n".join(lines)


def _median(rounds: list[dict[str, float]], key: str) -> float | None:
    values = [r[key] for r in rounds if key in r]
    return statistics.median(values) if values else None


def _ratios(this: list[dict[str, float]], other: list[dict[str, float]], key: str) -> list[float]:
    return [a[key] / b[key] for a, b in zip(this, other, strict=True) if key in a and b.get(key)]


def _number(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _ratio_text(ratios: list[float]) -> str:
    if not ratios:
        return "—"
    return f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"


if __name__ == "__main__":
    raise SystemExit(main())
