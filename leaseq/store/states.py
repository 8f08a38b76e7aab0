"""The job states on the Lua side: ``lua/lib/state_kind.lua``, generated from ``State``.

``leaseq.types.State`` (with ``FINISHED``) is the one declaration of the
states. The scripts cannot import it, so this module writes it out as a Lua
library, ``state_kind(state)``: ``'finished'``, ``'unfinished'``, or nil for a
state leaseq never writes (a row damaged by hand). No script spells a list of
state names of its own; tests/store/test_states.py fails when the file and
``State`` differ, or when another Lua file spells a list.

Regenerate after changing ``State``::

    python -m leaseq.store.states
"""

from __future__ import annotations

import sys
from pathlib import Path

from leaseq.types import State

__all__ = ["LUA_PATH", "lua_source", "main"]

LUA_PATH = Path("lib") / "state_kind.lua"
"""Where the library lives, under ``lua/``."""


def lua_source() -> str:
    """The text of ``lua/lib/state_kind.lua`` for the states of ``State``."""
    kinds = "\n".join(
        f"  {s.value} = '{'finished' if s.finished else 'unfinished'}'," for s in State
    )
    return f"""-- state_kind(state): 'finished' for a state no script moves a job out of by itself,
-- 'unfinished' for the others, nil for a state leaseq never writes (a row damaged
-- by hand). The one list of states on the Lua side: generated from leaseq.types.State
-- by `python -m leaseq.store.states`; do not edit by hand (a test compares them).
local STATE_KINDS = {{
{kinds}
}}
local function state_kind(state)
  return STATE_KINDS[state]
end
"""


def main() -> None:
    """Write ``lua/lib/state_kind.lua`` in the source tree (the argument, if any,
    is the ``lua/`` folder)."""
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "lua"
    (root / LUA_PATH).write_text(lua_source(), encoding="utf-8")
    print(f"wrote {root / LUA_PATH}")


if __name__ == "__main__":
    main()
