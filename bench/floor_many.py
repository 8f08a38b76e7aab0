"""The floor of ``enqueue_many`` with features on: its writes alone, in one script.

``python -m bench.floor_many [--rounds R]`` runs, turn by turn on one throwaway
redis-server, two stripped scripts that make only the Redis writes of a call of
1,000 jobs and nothing else (no checks, no events, no counters, no wake-up):

- **bare**: per job ``EXISTS`` and the row's ``HSET`` with the fields every row
  has; one ``ZADD`` of the 1,000 ids to ``pending``;
- **all on**: the same, the row also carrying ``group``, ``depends_on`` and
  ``parents_left``, and the ids also added to their group's sorted set (a
  grouped job sits in two: its group's and ``pending``'s mirror, which the
  contract's ``pending`` index needs).

It prints the server time per job of each (``INFO commandstats``, median of R
rounds) and the difference: what those features cost however little Lua runs
around the writes. Beside ``bench.features``' bare ``enqueue_many`` (its wall
time per job), that difference bounds the ratio all-on / bare from above.
Never run by the tests.
"""

from __future__ import annotations

import argparse
import statistics

from bench.server import Server

BATCH = 1000
CALLS = 20

WRITES = r"""
local n, mode, base = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local pending, group = {}, {}
for i = 1, n do
  local key = 'job:' .. base .. i
  redis.call('EXISTS', key)
  if mode == 'all' then
    redis.call('HSET', key, 'state', 'pending', 'attempts', 0, 'max_attempts', 3,
      'payload', '{"i":1}', 'enqueued_at', 1733100000000, 'group', 'g1',
      'depends_on', 'parent', 'parents_left', 0)
    group[#group + 1] = i
    group[#group + 1] = base .. i
  else
    redis.call('HSET', key, 'state', 'pending', 'attempts', 0, 'max_attempts', 3,
      'payload', '{"i":1}', 'enqueued_at', 1733100000000)
  end
  pending[#pending + 1] = i
  pending[#pending + 1] = base .. i
end
redis.call('ZADD', 'pending', unpack(pending))
if mode == 'all' then redis.call('ZADD', 'group:g1', unpack(group)) end
return n
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor_many", description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    got: dict[str, list[float]] = {"bare": [], "all on": []}
    with Server() as server:
        r = server.client()
        sha = r.script_load(WRITES)
        for k in range(args.rounds):
            for side in list(got) if k % 2 == 0 else list(reversed(got)):
                r.flushall()
                r.config_resetstat()
                for call in range(CALLS):
                    r.evalsha(sha, 0, BATCH, "all" if side == "all on" else "bare", f"{call}-")
                usec = r.info("commandstats")["cmdstat_evalsha"]["usec"]
                got[side].append(usec / (BATCH * CALLS))
    for side, values in got.items():
        print(f"{side:<7} writes alone: {statistics.median(values):.2f} µs a job of server time")
    extra = statistics.median(got["all on"]) - statistics.median(got["bare"])
    print(f"all on - bare: {extra:.2f} µs a job")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
