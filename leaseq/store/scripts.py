"""Loading the Lua scripts in ``lua/``: include expansion, SHA, key counts.

A script pulls shared code in with a line ``--!include lib/<name>.lua``; a
library file does the same for the libraries it calls, so each file lists
only what it calls itself and ``load_source`` resolves the closure (as
BullMQ's script loader does).

Redis 7 reads flags from a first line ``#!lua flags=...``: the scripts that
drain a queue (claim, complete, fail, ...) say ``allow-oom`` so that a full
server (``maxmemory`` with ``noeviction``) still lets them run -- they are
what frees memory -- while enqueue and retry, which add work, are refused
whole before they write anything. Older servers and fakeredis's Lua do not
know the shebang, so every script also has a ``plain`` twin without it; the
runner (``_redis``) falls back to it on a server that cannot compile the
first. The shebang is added here, from ``_SHAPES``, not written in the files.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

__all__ = ["SCRIPTS", "Script", "lua_root", "load_source"]

_INCLUDE = re.compile(r"^--!include (\S+)[ \t]*(?:\n|$)", re.MULTILINE)


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
    flags: str = ""
    """Redis 7 script flags (``allow-oom``, ``no-writes``); "" = none."""
    plain: str = ""
    """The source without the ``#!lua`` line, for servers before Redis 7."""
    plain_sha: str = ""


def lua_root() -> Traversable:
    """Where the scripts are: inside the installed wheel, else the source tree."""
    packaged = resources.files("leaseq") / "lua"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "lua"


def _read(base: Traversable, path: str, by: str) -> str:
    node = base
    for part in path.split("/"):
        node = node / part
    if not node.is_file():
        raise RuntimeError(f"lua/{by} includes {path}, which does not exist")
    return node.read_text(encoding="utf-8")


def _includes(text: str, where: str) -> list[str]:
    """The paths ``text`` includes, in order; a repeated one is an error."""
    found = _INCLUDE.findall(text)
    for path in found:
        if found.count(path) > 1:
            raise RuntimeError(f"lua/{where} includes {path} twice")
    return found


def load_source(name: str, root: Traversable | None = None) -> str:
    """The text of ``lua/<name>.lua`` with its includes expanded.

    A file (script or library) includes what it calls itself; the closure is
    resolved here once: each library appears once, after everything it
    includes (a Lua ``local function`` must be defined before the functions
    that call it), in place of the script's first ``--!include`` line. A
    missing file, a repeated include or a cycle is an error at import time,
    not at the first call in production.
    """
    base = root if root is not None else lua_root()
    text = (base / f"{name}.lua").read_text(encoding="utf-8")
    done: dict[str, str] = {}  # path -> body without its include lines, in dependency order

    def visit(path: str, chain: tuple[str, ...]) -> None:
        if path in chain:
            raise RuntimeError(f"lua/{name}.lua: include cycle {' -> '.join((*chain, path))}")
        if path in done:
            return
        body = _read(base, path, chain[-1])
        for child in _includes(body, path):
            visit(child, (*chain, path))
        done[path] = _INCLUDE.sub("", body).rstrip("\n")

    for path in _includes(text, f"{name}.lua"):
        visit(path, (f"{name}.lua",))
    libraries = "\n".join(done.values())
    first = _INCLUDE.search(text)
    if first is None:
        return text
    return text[: first.start()] + libraries + "\n" + _INCLUDE.sub("", text[first.start() :])


_DRAIN = "allow-oom"
"""Runs on a full server: it frees memory, or writes only a few bytes."""

# name -> (fixed KEYS count, job keys follow one per item, Redis 7 flags)
_SHAPES: dict[str, tuple[int, bool, str]] = {
    "enqueue": (5, False, ""),
    "claim": (10, False, _DRAIN),
    "extend": (2, True, _DRAIN),
    "complete": (6, True, _DRAIN),
    "fail": (9, False, _DRAIN),
    "release": (6, False, _DRAIN),
    "reap": (7, False, _DRAIN),
    "once": (1, False, _DRAIN),
    "progress": (1, False, _DRAIN),
    "cancel": (7, False, _DRAIN),
    "retry": (6, False, ""),
    "retry_all": (5, False, ""),
    "purge": (4, False, _DRAIN),
    "reset_clock": (1, False, _DRAIN),
    "stats": (9, False, "no-writes"),
    "schedules": (2, False, ""),
    "schedule": (3, False, ""),
    "unschedule": (2, False, _DRAIN),
    "tick": (5, False, ""),
    "limits": (5, False, _DRAIN),
    "pause": (1, False, _DRAIN),
    "resume": (4, False, _DRAIN),
    "delete": (9, False, _DRAIN),
    "drop": (10, False, _DRAIN),
    "run_now": (6, False, _DRAIN),
    "register": (3, False, _DRAIN),
    "workers": (2, False, _DRAIN),
    "history": (1, False, "no-writes"),
    "events": (2, False, _DRAIN),
}


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _load_all() -> dict[str, Script]:
    scripts = {}
    for name, (keys, variadic, flags) in _SHAPES.items():
        plain = load_source(name)
        # Every script gets a shebang, flags or not: on Redis 7 a flagged
        # script without allow-oom is refused whole on a full server, before
        # it runs, instead of at whichever write first needs memory.
        source = f"#!lua flags={flags}\n{plain}" if flags else f"#!lua\n{plain}"
        scripts[name] = Script(
            name, source, _sha(source), keys, variadic, flags, plain, _sha(plain)
        )
    return scripts


SCRIPTS: dict[str, Script] = _load_all()
