"""leaseq against huey, side by side: ``bench.guard`` without the revision.

``python -m bench.vs_huey [--jobs N] [--rounds R] [--quick]`` (needs ``pip
install huey``) is ``python -m bench.guard --no-rev``: the drain (one worker
process each, with its defaults, an ``INCR`` per job), single enqueue against
the ``LPUSH`` floor, and Redis bytes per job, medians of alternating rounds
and the ratios leaseq / huey. See bench/guard.py. Never run by the tests.
"""

from __future__ import annotations

import sys

from bench import guard


def main(argv: list[str] | None = None) -> int:
    return guard.main(["--no-rev", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
