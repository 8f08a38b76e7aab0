"""Helpers shared by the test modules (no tests in here).

- ``servers``: redis-server processes on free loopback ports, ``wait_until``;
- ``backends``: the two backends of the behaviour suite (``Clock``, clients on
  the same store as ``r``);
- ``store``: reading what Redis holds, the way an operator with redis-cli would;
- ``suite``: the behaviour suite collected for re-runs on other transports;
- ``drivers``: the threaded and the asyncio worker behind one synchronous
  interface, for the one worker suite (the ``driver`` fixture);
- ``cluster``: a throwaway 3-master Redis Cluster;
- ``handlers``: handlers that worker processes run (``tests.support.handlers:fn``);
- ``cli``, ``workers``, ``security``, ``web``: helpers of the CLI, worker-process,
  ACL and dashboard tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: the directory that holds tests/, leaseq/ and lua/."""


LEASEQ = str(Path(sys.executable).parent / "leaseq")
"""The ``leaseq`` console script of the running interpreter."""
