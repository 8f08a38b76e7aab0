"""Loading the Lua scripts in ``lua/``: include expansion, SHA, key counts.

A script pulls shared code in with a line ``--!include lib/<name>.lua``.
Includes are one level deep (a library file includes nothing), and a
missing, nested or repeated include is an error at import time, not at
the first call in production.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

__all__ = ["SCRIPTS", "Script", "lua_root", "load_source"]

_INCLUDE = re.compile(r"^--!include (\S+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Script:
    """One transition's script, ready to run by SHA."""

    name: str
    source: str
    sha: str
    keys: int
    """How many KEYS the caller passes (the fixed ones, for variadic scripts)."""
    variadic_keys: bool = False
    """True when job keys follow the fixed ones, one per item."""


def lua_root() -> Traversable:
    """Where the scripts are: inside the installed wheel, else the source tree."""
    packaged = resources.files("leaseq") / "lua"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "lua"


def load_source(name: str, root: Traversable | None = None) -> str:
    """The text of ``lua/<name>.lua`` with its includes expanded."""
    base = root if root is not None else lua_root()
    text = (base / f"{name}.lua").read_text(encoding="utf-8")
    seen: set[str] = set()

    def expand(match: re.Match[str]) -> str:
        path = match.group(1)
        if path in seen:
            raise RuntimeError(f"lua/{name}.lua includes {path} twice")
        seen.add(path)
        node = base
        for part in path.split("/"):
            node = node / part
        if not node.is_file():
            raise RuntimeError(f"lua/{name}.lua includes {path}, which does not exist")
        body = node.read_text(encoding="utf-8")
        if _INCLUDE.search(body):
            raise RuntimeError(f"{path} includes another file; includes are one level deep")
        return body.rstrip("\n")

    return _INCLUDE.sub(expand, text)


# name -> (fixed KEYS count, job keys follow one per item)
_SHAPES: dict[str, tuple[int, bool]] = {
    "enqueue": (4, False),
    "claim": (8, False),
    "extend": (2, True),
    "complete": (4, True),
    "fail": (7, False),
    "release": (5, False),
    "reap": (5, False),
    "once": (1, False),
    "cancel": (5, False),
    "retry": (5, False),
    "purge": (1, False),
    "stats": (9, False),
    "schedules": (2, False),
    "schedule": (3, False),
    "unschedule": (2, False),
    "tick": (4, False),
    "limits": (5, False),
    "pause": (1, False),
    "resume": (4, False),
    "delete": (6, False),
    "drop": (8, False),
    "run_now": (5, False),
}


def _load_all() -> dict[str, Script]:
    scripts = {}
    for name, (keys, variadic) in _SHAPES.items():
        source = load_source(name)
        sha = hashlib.sha1(source.encode("utf-8")).hexdigest()
        scripts[name] = Script(name, source, sha, keys, variadic)
    return scripts


SCRIPTS: dict[str, Script] = _load_all()
