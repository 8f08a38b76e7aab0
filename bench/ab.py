"""Two revisions of leaseq side by side: ``bench.guard`` without huey.

``python -m bench.ab BEFORE [AFTER] [--rounds N] [--jobs N] [--quick]`` is
``python -m bench.guard --no-huey --rev BEFORE [--at AFTER]``: each revision's
own code (``git archive`` into a temp dir; AFTER defaults to the working tree
as it is) measured in its own fresh process, round after round, the order
taking turns, on one throwaway redis-server; the drain, enqueue and memory
figures and the ratio AFTER / BEFORE round by round. See bench/guard.py.

Never run by the tests.
"""

from __future__ import annotations

import argparse

from bench import guard


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab")
    parser.add_argument("before", help="a git revision (commit, branch, tag)")
    parser.add_argument("after", nargs="?", help="a git revision (default: the working tree)")
    args, rest = parser.parse_known_args(argv)
    at = ["--at", args.after] if args.after else []
    return guard.main(["--no-huey", "--rev", args.before, *at, *rest])


if __name__ == "__main__":
    raise SystemExit(main())
