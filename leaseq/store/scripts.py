"""The Lua scripts in ``lua/``: loading, and each script's shape read from its header.

**Includes.** A script pulls shared code in with a line ``--!include
lib/<name>.lua``; a library file does the same for the libraries it calls, so
each file lists only what it calls itself and ``load_source`` resolves the
closure (as BullMQ's script loader does).

**Shapes.** A script's header (``-- KEYS[i]  <pattern>  <TYPE> ...`` and
``-- ARGV[i]  <name>, ...`` lines, ``KEYS[i..]`` / ``ARGV[i..]`` for a
variadic tail) declares what its own code uses. A library declares the
queue's keys its own code uses the same way without an index (``-- KEYS
leaseq:{<queue>}:unique  HASH ...``), and the key stems it appends ids to
(``-- ARGV  group_prefix, ...``): the loader adds them to the shape of every
script that includes the library, after the script's own and before its
tails, each once, in the order the libraries are expanded. So a key a
library needs is declared once, in the library, not in every caller; every
key still travels in KEYS (Redis Cluster routes by them). The loader puts
the names in the script as two tables, ``K`` (key name -> ``KEYS[i]``) and
``A`` (argument name -> ``ARGV[i]``), with ``TAIL.keys`` and ``TAIL.args``
where the tails start; ``Script.call`` builds the KEYS by the same names
through ``leaseq.store.keys`` and orders the ARGV by name (a stem comes from
``keys`` unless given). So a key or an argument is added in one place, a
header, and used by name on both sides.

**Flags.** Redis 7 reads flags from a first line ``#!lua flags=...``; the
header's ``-- flags:`` line says which. The scripts that drain a queue
(claim, complete, fail, ...) say ``allow-oom`` so that a full server
(``maxmemory`` with ``noeviction``) still lets them run -- they are what frees
memory -- while enqueue and retry, which add work, are refused whole before
they write anything. Older servers and fakeredis's Lua do not know the
shebang, so every script also has a ``plain`` twin without it; the driver
falls back to it on a server that cannot compile the first.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    # Only a type: imported at run time, importlib.abc's warns on 3.12+.
    from importlib.abc import Traversable

    from leaseq.store.keys import QueueKeys

__all__ = [
    "SCRIPTS",
    "Call",
    "KeyName",
    "Needs",
    "Script",
    "libraries",
    "load_source",
    "lua_root",
    "needs",
    "read_script",
    "shape",
    "with_libraries",
]

R_co = TypeVar("R_co", covariant=True)

_INCLUDE = re.compile(r"^--!include (\S+)[ \t]*(?:\n|$)", re.MULTILINE)
_LIB_LINE = re.compile(r"-- (KEYS|ARGV)\s+(\S+)")
"""A library's declaration of a key (or key stem) it uses: no index."""
_STEM = "leaseq:{<queue>}:"
_PARAM_KEYS = {"<state>": ("index", "state")}
"""Header patterns that name a key by a parameter rather than a fixed name."""


@dataclass(frozen=True, slots=True)
class KeyName:
    """One KEYS entry of a header: the ``QueueKeys`` member that builds it, and the
    parameter it takes (``job:<id>`` -> ``job`` with ``id``; None: a fixed key)."""

    member: str
    param: str | None = None

    @property
    def lua(self) -> str:
        """The entry's name in the script's ``K`` table."""
        return self.member


Needs = tuple[tuple[KeyName, ...], tuple[str, ...]]
"""What a library declares: the queue's keys and the key stems (``*_prefix``) it reads."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What a header declares: KEYS and ARGV names in order, their tails, the flags."""

    keys: tuple[KeyName, ...]
    key_tail: bool
    args: tuple[str, ...]
    arg_tail: bool
    flags: str


@dataclass(frozen=True, slots=True)
class Script:
    """One transition's script, ready to run by SHA, with the shape of its header."""

    name: str
    source: str
    sha: str
    shape: Shape
    plain: str = ""
    """The source without the ``#!lua`` line, for servers before Redis 7."""
    plain_sha: str = ""

    @property
    def flags(self) -> str:
        """Redis 7 script flags (``allow-oom``, ``no-writes``); "" = none."""
        return self.shape.flags

    def call(
        self,
        keys: QueueKeys,
        parse: Callable[[Any], R_co],
        *,
        at: Mapping[str, str] | None = None,
        key_tail: Sequence[str] = (),
        arg_tail: Sequence[str | bytes | int] = (),
        **args: str | bytes | int,
    ) -> Call[R_co]:
        """The Call of this script for the queue of ``keys``: KEYS by the header's
        names (``at`` gives the parameters, e.g. ``at={"id": job_id}`` for
        ``job:<id>``), then ``key_tail``; ARGV by name, then ``arg_tail``. An
        argument ending in ``_prefix`` that is not given comes from ``keys``
        (``job_prefix``, ``group_prefix``, ...). A missing or unknown name is a
        TypeError: a bug in the caller, caught by the first test that runs it."""
        shape = self.shape
        fixed, prefixes = _for_queue(keys, self.name)
        key_list = list(fixed)
        if at is not None:
            for i, name in enumerate(shape.keys):
                if name.param is not None:
                    key_list[i] = getattr(keys, name.member)(at[name.param])
        elif "" in key_list:  # a parameter's place, left empty by _for_queue
            raise TypeError(f"{self.name}: the key parameters are missing (at=...)")
        if key_tail:
            if not shape.key_tail:
                raise TypeError(f"{self.name} takes no variadic KEYS")
            key_list += key_tail
        if len(args) != len(shape.args):
            args = {**prefixes, **args}
        try:
            arg_list: list[str | bytes | int] = [args[name] for name in shape.args]
        except KeyError:
            arg_list = []
        if len(arg_list) != len(args):  # a name missing, or one the header does not declare
            unknown = set(args) - set(shape.args)
            missing = [a for a in shape.args if a not in args]
            raise TypeError(f"{self.name}: ARGV names missing {missing}, unknown {sorted(unknown)}")
        if arg_tail:
            if not shape.arg_tail:
                raise TypeError(f"{self.name} takes no variadic ARGV")
            arg_list += arg_tail
        return Call(self, key_list, arg_list, parse)


@dataclass(frozen=True, slots=True)
class Call(Generic[R_co]):
    """One script call: what to send, and how to read what comes back."""

    script: Script
    keys: Sequence[str]
    args: Sequence[str | bytes | int]
    parse: Callable[[Any], R_co]


@functools.lru_cache(maxsize=4096)
def _for_queue(keys: QueueKeys, name: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """What script ``name`` takes from one queue's ``keys``: its fixed KEYS ('' where
    a parameter goes), and the ``*_prefix`` ARGV. One cache lookup per call."""
    shape = SCRIPTS[name].shape
    fixed = tuple("" if k.param is not None else getattr(keys, k.member) for k in shape.keys)
    return fixed, {a: getattr(keys, a) for a in shape.args if a.endswith("_prefix")}


def shape(header: str, name: str) -> Shape:
    """The shape declared by a script's header (its leading comment lines)."""
    keys: list[KeyName] = []
    args: list[str] = []
    key_tail = arg_tail = False
    flags: str | None = None
    for line in header.splitlines():
        if _LIB_LINE.match(line):
            raise RuntimeError(f"lua/{name}.lua: a script numbers its KEYS and ARGV: {line!r}")
        found = re.match(r"-- (KEYS|ARGV)\[(\d+)(\.\.)?\]\s+(\S+)", line)
        if found:
            word, index, tail, first = found.groups()
            if tail:
                if word == "KEYS":
                    key_tail = True
                else:
                    arg_tail = True
                continue
            if word == "KEYS":
                if int(index) != len(keys) + 1:
                    raise RuntimeError(f"lua/{name}.lua: KEYS[{index}] out of order")
                keys.append(_key_name(first, name))
            else:
                if int(index) != len(args) + 1:
                    raise RuntimeError(f"lua/{name}.lua: ARGV[{index}] out of order")
                arg = re.match(r"([a-z_][a-z0-9_]*),", line.split("]", 1)[1].strip())
                if not arg:
                    raise RuntimeError(f"lua/{name}.lua: ARGV[{index}] must open with 'name,'")
                args.append(arg.group(1))
        elif line.startswith("-- flags: "):
            word = line[len("-- flags: ") :].split()[0]
            flags = "" if word == "none" else word
    if flags is None:
        raise RuntimeError(f"lua/{name}.lua: the header has no 'flags:' line")
    return Shape(tuple(keys), key_tail, tuple(args), arg_tail, flags)


def needs(header: str, path: str) -> Needs:
    """The keys and key stems a library's header declares (``-- KEYS  <pattern>``,
    ``-- ARGV  <name>_prefix, ...``): what its own code reads from ``K``.

    Only fixed keys of the queue and stems: a job's key or an argument of the
    call is the script's to declare, as its caller passes it."""
    keys: list[KeyName] = []
    stems: list[str] = []
    for line in header.splitlines():
        if re.match(r"-- (KEYS|ARGV)\[", line):
            raise RuntimeError(f"lua/{path}: a library's keys have no index: {line!r}")
        found = _LIB_LINE.match(line)
        if not found:
            continue
        word, first = found.groups()
        if word == "KEYS":
            key = _key_name(first, path.removesuffix(".lua"))
            if key.param is not None:
                raise RuntimeError(f"lua/{path}: a library declares fixed keys only: {first}")
            keys.append(key)
        else:
            stem = first.rstrip(",")
            if not (first.endswith(",") and stem.endswith("_prefix")):
                raise RuntimeError(f"lua/{path}: a library's ARGV are key stems: 'name_prefix,'")
            stems.append(stem)
    return tuple(keys), tuple(stems)


def with_libraries(own: Shape, libs: Sequence[Needs]) -> Shape:
    """A script's shape with what its libraries need (``needs`` of each, in the
    order they are expanded) appended after its own KEYS and ARGV, each name once."""
    keys = {k.member: k for k in own.keys}  # dicts keep the first place of each name
    args = dict.fromkeys(own.args)
    for lib_keys, lib_stems in libs:
        keys.update((k.member, k) for k in lib_keys if k.member not in keys)
        args.update((a, None) for a in lib_stems if a not in args)
    return Shape(tuple(keys.values()), own.key_tail, tuple(args), own.arg_tail, own.flags)


def _key_name(pattern: str, name: str) -> KeyName:
    if not pattern.startswith(_STEM):
        raise RuntimeError(f"lua/{name}.lua: key {pattern!r} is not under {_STEM}")
    rest = pattern[len(_STEM) :]
    if rest in _PARAM_KEYS:
        return KeyName(*_PARAM_KEYS[rest])
    member, sep, param = rest.partition(":")
    if sep:
        if not (param.startswith("<") and param.endswith(">")):
            raise RuntimeError(f"lua/{name}.lua: key {pattern!r} has no <parameter>")
        return KeyName(member, param[1:-1])
    return KeyName(member)


def header_of(text: str) -> str:
    """The leading comment block of a script (up to its first include or code)."""
    lines = []
    for line in text.splitlines():
        if line.startswith("--!") or not line.startswith("--"):
            break
        lines.append(line)
    return "\n".join(lines)


def prologue(shape: Shape) -> str:
    """The Lua that names a script's KEYS and ARGV (``K``, ``A``) and its tails (``TAIL``).

    ``K`` is what the libraries take as their view of the queue's keys
    (``K.meta``, ``K.groups``, ``K.group_prefix``, ...)."""
    # K holds the key stems of ARGV too (job_prefix, group_prefix, ...): every key
    # a script touches is a K entry, or a K stem followed by an id it was given.
    named = [f"{k.lua} = KEYS[{i}]" for i, k in enumerate(shape.keys, 1)]
    named += [f"{a} = ARGV[{i}]" for i, a in enumerate(shape.args, 1) if a.endswith("_prefix")]
    keys = ", ".join(named)
    args = ", ".join(f"{a} = ARGV[{i}]" for i, a in enumerate(shape.args, 1))
    tail = f"keys = {len(shape.keys) + 1}, args = {len(shape.args) + 1}"
    return (
        "-- KEYS and ARGV by the names of the header (added by leaseq.store.scripts)\n"
        f"local K = {{ {keys} }}\nlocal A = {{ {args} }}\nlocal TAIL = {{ {tail} }}\n"
    )


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
    return _expand(name, root)[0]


def libraries(name: str, root: Traversable | None = None) -> list[str]:
    """The library paths (``lib/<name>.lua``) in ``lua/<name>.lua``'s expansion, in its order."""
    return list(_expand(name, root)[2])


def _expand(name: str, root: Traversable | None = None) -> tuple[str, str, dict[str, str]]:
    """``load_source``'s text, the script's own file, and each library it holds
    (path -> the library's own file), in the order they are expanded."""
    base = root if root is not None else lua_root()
    text = (base / f"{name}.lua").read_text(encoding="utf-8")
    done: dict[str, str] = {}  # path -> the library's file, in dependency order

    def visit(path: str, chain: tuple[str, ...]) -> None:
        if path in chain:
            raise RuntimeError(f"lua/{name}.lua: include cycle {' -> '.join((*chain, path))}")
        if path in done:
            return
        body = _read(base, path, chain[-1])
        for child in _includes(body, path):
            visit(child, (*chain, path))
        done[path] = body

    for path in _includes(text, f"{name}.lua"):
        visit(path, (f"{name}.lua",))
    first = _INCLUDE.search(text)
    if first is None:
        return text, text, done
    libs = "\n".join(_INCLUDE.sub("", body).rstrip("\n") for body in done.values())
    return text[: first.start()] + libs + "\n" + _INCLUDE.sub("", text[first.start() :]), text, done


def read_script(name: str, root: Traversable | None = None) -> tuple[str, Shape]:
    """``lua/<name>.lua`` expanded, and its shape: the KEYS and ARGV of its header,
    then the keys and stems its libraries need (``with_libraries``)."""
    text, own, libs = _expand(name, root)
    needed = [needs(header_of(body), lib) for lib, body in libs.items()]
    return text, with_libraries(shape(header_of(own), name), needed)


def _sha(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _load_all() -> dict[str, Script]:
    scripts = {}
    for path in sorted(lua_root().iterdir(), key=lambda p: p.name):
        if not path.name.endswith(".lua"):
            continue
        name = path.name[: -len(".lua")]
        text, found = read_script(name)
        header = header_of(text)
        plain = header + "\n" + prologue(found) + text[len(header) + 1 :]
        # Every script gets a shebang, flags or not: on Redis 7 a flagged
        # script without allow-oom is refused whole on a full server, before
        # it runs, instead of at whichever write first needs memory.
        flags = found.flags
        source = f"#!lua flags={flags}\n{plain}" if flags else f"#!lua\n{plain}"
        scripts[name] = Script(name, source, _sha(source), found, plain, _sha(plain))
    return scripts


SCRIPTS: dict[str, Script] = _load_all()
