"""``python -m bench [--quick] [--only NAME ...]``: leaseq vs the processing-list
baseline and the raw EVALSHA ceiling, in one run on a redis-server it starts.

Prints a markdown table (medians of 3) and writes bench/out/inflight.png.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import redis

from bench import figures
from bench.server import Server, machine

OUT = Path(__file__).resolve().parent / "out"
STEPS = ("ceiling", "enqueue", "bulk", "loop", "pair", "inflight", "memory", "drain")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, about a minute")
    parser.add_argument("--only", nargs="+", choices=STEPS, help="run only these figures")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    args = parser.parse_args(argv)
    size = figures.QUICK if args.quick else figures.Size()
    steps = args.only or list(STEPS)
    results: dict[str, Any] = {}
    started = time.monotonic()
    with Server() as server:
        r = server.client()
        for step in steps:
            t0 = time.monotonic()
            print(f"bench: {step} ...", file=sys.stderr, flush=True)
            results[step] = _measure(step, r, server, size)
            print(f"bench: {step} done in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        box = machine(r)
    print(_header(box, args.quick))
    print(table(results))
    if "inflight" in results:
        print()
        print(inflight_table(results["inflight"]))
        if not args.no_plot:
            path = plot(results["inflight"])
            if path:
                print(f"\nplot: {path}")
    if "memory" in results:
        m = results["memory"]
        print(
            f"\nmemory: job row {m['row_bytes']} B ({m['row_encoding']}), "
            f"pending index {m['pending_entry_bytes']:.0f} B/entry; "
            f"drained queue (keep_succeeded=0) keeps: {', '.join(m['drained_keys']) or 'nothing'}"
        )
    print(f"\n(total {time.monotonic() - started:.0f} s)")
    return 0


def _measure(step: str, r: redis.Redis, server: Server, size: figures.Size) -> Any:
    if step == "ceiling":
        return figures.ceilings(r, size)
    if step == "enqueue":
        return figures.enqueue_one(r, size)
    if step == "bulk":
        return figures.enqueue_many(r, size)
    if step == "loop":
        return figures.batch_loop(r, size)
    if step == "pair":
        return figures.single_pair(r, size)
    if step == "inflight":
        return figures.in_flight_scan(r, size)
    if step == "memory":
        return figures.memory(r, size)
    from bench import drain

    return drain.measure(r, server, size)


def _header(box: str, quick: bool) -> str:
    return f"{box}; medians of 3{' (--quick sizes)' if quick else ''}\n"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def table(res: dict[str, Any]) -> str:
    """The markdown table: one row per figure, leaseq | baseline | ceiling | target."""
    rows = ["| figure | leaseq | baseline (list + LREM) | raw ceiling | target | met |"]
    rows.append("| --- | ---: | ---: | ---: | --- | --- |")
    ceil = res.get("ceiling", {})
    one = ceil.get("evalsha")

    def add(name: str, lq: str, base: str, raw: str, target: str, ok: bool | None) -> None:
        mark = "" if ok is None else ("yes" if ok else "**no**")
        rows.append(f"| {name} | {lq} | {base} | {raw} | {target} | {mark} |")

    if one:
        add("EVALSHA trivial script, calls/s", "", "", _n(one), "", None)
        add("EVALSHA pipelined 32 deep, calls/s", "", "", _n(ceil["evalsha_pipe32"]), "", None)
    if "enqueue" in res:
        e = res["enqueue"]
        ratio = e["ceiling"] / e["leaseq"]
        add(
            "enqueue one by one, jobs/s",
            _n(e["leaseq"]),
            _n(e["baseline"]),
            _n(e["ceiling"]),
            f"within 1.5x of EVALSHA (x{ratio:.2f})",
            ratio <= 1.5,
        )
    if "bulk" in res:
        b = res["bulk"]
        add(
            "enqueue_many, jobs/s",
            _n(b["leaseq"]),
            _n(b["baseline"]),
            "",
            ">= 100,000",
            b["leaseq"] >= 100_000,
        )
    if "loop" in res:
        lo = res["loop"]
        add(
            "claim_many(500) + complete_many loop, jobs/s",
            _n(lo["leaseq"]),
            _n(lo["baseline"]),
            "",
            ">= 50,000",
            lo["leaseq"] >= 50_000,
        )
    if "pair" in res:
        p = res["pair"]
        ratio = p["ceiling"] / p["leaseq"]
        add(
            "claim + complete, unpipelined, pairs/s",
            _n(p["leaseq"]),
            _n(p["baseline"]),
            _n(p["ceiling"]),
            f"within 1.5x of 2 EVALSHA (x{ratio:.2f})",
            ratio <= 1.5,
        )
    if "inflight" in res:
        lq, base = res["inflight"]["leaseq"], res["inflight"]["baseline"]
        top = max(k for k in lq if k != "empty")
        lr, br = lq[top] / lq["empty"], base[top] / base["empty"]
        add(
            f"claim + complete with {top:,} in flight vs empty, wall cost ratio",
            f"x{lr:.2f} ({lq[top]:.0f} vs {lq['empty']:.0f} µs)",
            f"x{br:.1f} ({base[top]:.0f} vs {base['empty']:.0f} µs)",
            "",
            "<= 1.3x",
            lr <= 1.3,
        )
        lq, base = res["inflight"]["leaseq_server"], res["inflight"]["baseline_server"]
        lr, br = lq[top] / lq["empty"], base[top] / base["empty"]
        add(
            "the same, server µs per pair (commandstats)",
            f"x{lr:.2f} ({lq[top]:.0f} vs {lq['empty']:.0f} µs)",
            f"x{br:.1f} ({base[top]:.0f} vs {base['empty']:.0f} µs)",
            "",
            "<= 1.3x",
            lr <= 1.3,
        )
    if "memory" in res:
        m = res["memory"]
        add(
            'Redis bytes per pending job {"i": n}',
            f"{m['leaseq']:.0f}",
            f"{m['baseline']:.0f}",
            "",
            "<= 200",
            m["leaseq"] <= 200,
        )
        add(
            "drained queue, keep_succeeded=0: keys left",
            ", ".join(m["drained_keys"]) or "none",
            "",
            "",
            "fixed keys only",
            set(m["drained_keys"]) <= {"meta"},
        )
    if res.get("drain"):
        d = res["drain"]
        add(
            f"one `leaseq worker` process draining {d['jobs']:,} no-op jobs, jobs/s",
            f"{_n(d['leaseq'])} ({_n(d['with_start'])} with process start)",
            "",
            "",
            ">= 10,000",
            d["leaseq"] >= 10_000,
        )
    return "\n".join(rows)


def inflight_table(scan: dict[str, dict[Any, float]]) -> str:
    """µs per claim+complete pair at each in-flight count."""
    points = list(scan["leaseq"])
    head = "| µs per claim + complete | " + " | ".join(_label(k) for k in points) + " |"
    rows = [head, "| --- |" + " ---: |" * len(points)]
    names = (
        ("leaseq", "leaseq, wall"),
        ("baseline", "baseline LMOVE + LREM, wall"),
        ("leaseq_server", "leaseq, server (commandstats)"),
        ("baseline_server", "baseline, server (commandstats)"),
    )
    for who, name in names:
        rows.append(f"| {name} | " + " | ".join(f"{scan[who][k]:.0f}" for k in points) + " |")
    return "\n".join(rows)


def _label(k: Any) -> str:
    return "empty queue" if k == "empty" else f"{k:,} in flight"


def plot(scan: dict[str, dict[Any, float]]) -> Path | None:
    """bench/out/inflight.png: µs per pair against in-flight count (log-log-ish)."""
    try:
        import matplotlib
        import matplotlib.ticker

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "bench: matplotlib is not installed (pip install leaseq[bench]); no plot",
            file=sys.stderr,
        )
        return None
    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    lines = (
        ("leaseq", "leaseq claim + complete, wall", "C0", "-"),
        ("baseline", "LMOVE + LREM baseline, wall", "C1", "-"),
        ("leaseq_server", "leaseq, server time", "C0", "--"),
        ("baseline_server", "baseline, server time", "C1", "--"),
    )
    for who, label, color, style in lines:
        if who not in scan:
            continue
        ks = [k for k in scan[who] if k != "empty"]
        ax.plot(ks, [scan[who][k] for k in ks], style, color=color, marker="o", label=label)
    ticks = sorted({k for who in scan for k in scan[who] if k != "empty"})
    ax.set_xscale("symlog", linthresh=max(1, min((k for k in ticks if k), default=1)))
    ax.set_xticks(ticks, [f"{k:,}" for k in ticks])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_yscale("log")
    ax.set_xlabel("jobs in flight (with the pending backlog behind them)")
    ax.set_ylabel("µs per claim + complete pair")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = OUT / "inflight.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
