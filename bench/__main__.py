"""``python -m bench``: every figure in one run; see bench/run.py."""

from bench.run import main

raise SystemExit(main())
