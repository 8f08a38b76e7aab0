"""The job states on the Lua side: two libraries in ``lua/lib/``, generated from ``State``.

``leaseq.types.State`` (with ``FINISHED`` and ``EXPIRING``) is the one
declaration of the states. The scripts cannot import it, so this module writes
it out as Lua:

- ``state_kind(state)``: ``'finished'``, ``'unfinished'``, or nil for a state
  leaseq never writes (a row damaged by hand);
- ``state_indexes(K, skip)``: every state's index key from the script's ``K``
  table, in ``State`` order, as ``{ state = <name>, key = <key>, expiring =
  <bool> }`` (``skip`` names one state to leave out). A script that reads or
  empties every index (stats, drop, delete) loops over it. The library's header
  declares every state's index, so the loader passes them all to each caller
  (``leaseq.store.scripts``): a new state needs no line in any script's header.

No script spells a list of state names of its own; tests/store/test_states.py
fails when the files and ``State`` differ, or when another Lua file spells a
list (a table of names, or of ``K.<state>`` keys).

Regenerate after changing ``State``::

    python -m leaseq.store.states
"""

from __future__ import annotations

import sys
from pathlib import Path

from leaseq.types import State

__all__ = ["LUA_PATHS", "lua_sources", "main"]

LUA_PATHS = (Path("lib") / "state_kind.lua", Path("lib") / "state_indexes.lua")
"""Where the generated libraries live, under ``lua/``."""

_DO_NOT_EDIT = (
    "-- Generated from leaseq.types.State by `python -m leaseq.store.states`; do not edit\n"
    "-- by hand (a test compares them).\n"
)


def _state_kind() -> str:
    kinds = "\n".join(
        f"  {s.value} = '{'finished' if s.finished else 'unfinished'}'," for s in State
    )
    return f"""-- state_kind(state): 'finished' for a state no script moves a job out of by itself,
-- 'unfinished' for the others, nil for a state leaseq never writes (a row damaged
-- by hand).
{_DO_NOT_EDIT}local STATE_KINDS = {{
{kinds}
}}
local function state_kind(state)
  return STATE_KINDS[state]
end
"""


def _state_indexes() -> str:
    rows = "\n".join(f"  {{ '{s.value}', {'true' if s.expiring else 'false'} }}," for s in State)
    keys = "".join(
        f"-- KEYS  leaseq:{{<queue>}}:{s.value}  ZSET  ids in state {s.value}\n" for s in State
    )
    return f"""-- state_indexes(K, skip): every state's index key in K (the caller's KEYS by name),
-- in State order, as {{ state = <name>, key = <key>, expiring = <bool> }}; the state
-- named skip (or nil) is left out. expiring: the index's score is when the row
-- expires (keep_succeeded), so a count of live rows counts scores above now.
-- The library declares every index, so the loader passes them all to its callers;
-- a state missing from K is an error naming it.
{keys}{_DO_NOT_EDIT}local STATE_INDEXES = {{
{rows}
}}
local function state_indexes(K, skip)
  local out = {{}}
  for _, s in ipairs(STATE_INDEXES) do
    if s[1] ~= skip then
      if not K[s[1]] then error('state_indexes: the header declares no index of ' .. s[1]) end
      out[#out + 1] = {{ state = s[1], key = K[s[1]], expiring = s[2] }}
    end
  end
  return out
end
"""


def lua_sources() -> dict[Path, str]:
    """The text of each generated library (by its path under ``lua/``) for ``State``."""
    return dict(zip(LUA_PATHS, (_state_kind(), _state_indexes()), strict=True))


def main() -> None:
    """Write the generated libraries in the source tree (the argument, if any, is
    the ``lua/`` folder)."""
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "lua"
    for path, text in lua_sources().items():
        (root / path).write_text(text, encoding="utf-8")
        print(f"wrote {root / path}")


if __name__ == "__main__":
    main()
