"""The Lua scripts themselves: headers that match the code, the include loader,
portability between Redis's Lua 5.1 and lupa's 5.4, replays and SCRIPT FLUSH.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import leaseq
import leaseq.store.scripts
from leaseq.store import events, history, ready, registry
from leaseq.store.cancel import cancel_call
from leaseq.store.claim import claim_call
from leaseq.store.clock import reset_clock_call
from leaseq.store.durable import record_step_call, signal_call, suspend_call
from leaseq.store.edit import run_now_call, update_call
from leaseq.store.enqueue import enqueue_calls
from leaseq.store.leases import (
    complete_call,
    extend_call,
    fail_call,
    once_call,
    progress_call,
    release_call,
)
from leaseq.store.pause import pause_call, resume_call
from leaseq.store.purge import delete_call, drop_call, purge_page
from leaseq.store.reads import stats_call
from leaseq.store.reap import reap_call
from leaseq.store.retry import retry_call, retry_page
from leaseq.store.scripts import SCRIPTS, libraries, load_source, prologue, read_script
from leaseq.store.wait import hold_calls
from leaseq.store.workflows import flow_calls
from leaseq.types import State
from tests.support.backends import Clock
from tests.support.store import claim_one, index, row, snapshot

LUA = Path(__file__).resolve().parents[2] / "lua"


NAMES = sorted(p.stem for p in LUA.glob("*.lua"))


LIBS = sorted(p.stem for p in (LUA / "lib").glob("*.lua"))


# The header, line by line: each entry is (label, how many lines may carry it).
ORDER = ["summary", "transition", "clock", "flags", "KEYS", "ARGV", "derives", "returns", "errors"]


def header(name: str) -> list[str]:
    """The leading comment block of lua/<name>.lua, continuation lines joined."""
    return header_of_file(LUA / f"{name}.lua")


def header_of_file(path: Path) -> list[str]:
    """The leading comment block of a script or library, continuation lines joined."""
    lines: list[str] = []
    for line in path.read_text().splitlines():
        if line.startswith("--!") or not line.startswith("--"):
            break
        body = line[2:]
        if body.startswith("   ") and lines:  # an indented continuation line
            lines[-1] += " " + body.strip()
        else:
            lines.append(body.strip())
    return lines


def label(line: str, name: str) -> str:
    if re.match(rf"{re.escape(name)}\.lua: \S", line):
        return "summary"
    for word in ("KEYS", "ARGV"):
        if re.match(rf"{word}\[\d+(\.\.)?\]\s+\S", line):
            return word
    found = re.match(r"(transition|clock|flags|derives|returns|errors): \S", line)
    assert found, f"lua/{name}.lua: header line not understood: {line!r}"
    return found.group(1)


def code(source: str) -> str:
    """Lua source without comments (line comments are all leaseq uses)."""
    return "\n".join(line.split("--", 1)[0] for line in source.splitlines())


def test_every_script_is_loaded() -> None:
    assert sorted(SCRIPTS) == NAMES
    assert len(NAMES) >= 11


@pytest.mark.parametrize("name", NAMES)
def test_header_has_every_part_in_order(name: str) -> None:
    labels = [label(line, name) for line in header(name)]
    seen = [lab for i, lab in enumerate(labels) if i == 0 or labels[i - 1] != lab]
    want = [lab for lab in ORDER if lab in labels]
    assert seen == want, f"lua/{name}.lua header out of order: {seen}"
    missing = set(ORDER) - set(labels) - {"ARGV"}
    assert not missing, f"lua/{name}.lua header lacks {sorted(missing)}"
    assert labels.count("summary") == 1
    for single in ("transition", "clock", "flags", "derives", "returns", "errors"):
        assert labels.count(single) == 1, f"lua/{name}.lua: one {single} line"


def _documented(name: str, word: str) -> tuple[list[int], int | None]:
    """Numbers documented for KEYS/ARGV, and where a variadic tail starts."""
    fixed: list[int] = []
    tail = None
    for line in header(name):
        found = re.match(rf"{word}\[(\d+)(\.\.)?\]", line)
        if found:
            if found.group(2):
                tail = int(found.group(1))
            else:
                fixed.append(int(found.group(1)))
    return fixed, tail


def body_of(name: str) -> str:
    """The code of lua/<name>.lua as it runs, libraries included, without the
    prologue the loader adds (its K and A tables)."""
    source = SCRIPTS[name].plain
    return code(
        "\n".join(line for line in source.splitlines() if not line.startswith("local K = {"))
    )


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("word", ["KEYS", "ARGV"])
def test_header_documents_every_key_and_arg_the_body_uses(name: str, word: str) -> None:
    fixed, tail = _documented(name, word)
    assert fixed == list(range(1, len(fixed) + 1)), f"lua/{name}.lua: {word} not numbered 1..n"
    if tail is not None:
        assert tail == len(fixed) + 1
    body = body_of(name)
    # By name only: K.<key> (or a key stem of ARGV), A.<argument>; a tail by TAIL.
    literal = re.findall(rf"\b{word}\[\d+\]", body.split("local TAIL = {", 1)[1])
    assert not literal, f"lua/{name}.lua reads {literal}: use the header's names (K., A.)"
    shape = SCRIPTS[name].shape
    if word == "KEYS":
        declared = {k.member for k in shape.keys} | {a for a in shape.args if a.endswith("_prefix")}
        used = set(re.findall(r"\bK\.(\w+)", body))
        used |= {a for a in declared if a.endswith("_prefix") and f"A.{a}" in body}
        # lib/state_indexes.lua declares and reads every state's index by name
        # (K[state]); a caller that skips one (delete: 'active') still gets it passed.
        if re.search(r"\bstate_indexes\(K\b", body):
            used |= {s.value for s in State}
    else:
        declared = set(shape.args)
        used = set(re.findall(r"\bA\.(\w+)", body))
        used |= {a for a in declared if a.endswith("_prefix") and f"K.{a}" in body}
    undeclared = used - declared
    assert not undeclared, f"lua/{name}.lua (or a library it includes) uses {sorted(undeclared)}"
    unused = declared - used
    assert not unused, f"lua/{name}.lua declares {word} {sorted(unused)} but never reads them"
    if tail is not None:
        field = "keys" if word == "KEYS" else "args"
        assert f"TAIL.{field}" in body, f"lua/{name}.lua never reads its {word} tail"


@pytest.mark.parametrize("name", NAMES)
def test_the_shape_is_read_from_the_headers(name: str) -> None:
    """The headers are the one declaration: the loader's shape is exactly the
    script's KEYS and ARGV, then the keys and stems its libraries declare that
    it does not, in the order the libraries are expanded, each once."""
    shape = SCRIPTS[name].shape
    own = [line for line in header(name) if re.match(r"(KEYS|ARGV)\[\d+\]", line)]
    keys = [_member(line) for line in own if line.startswith("KEYS")]
    args = [line.split()[1].rstrip(",") for line in own if line.startswith("ARGV")]
    for lib in libraries(name):
        for line in header_of_file(LUA / lib):
            if re.match(r"KEYS\s", line) and _member(line) not in keys:
                keys.append(_member(line))
            elif re.match(r"ARGV\s", line) and line.split()[1].rstrip(",") not in args:
                args.append(line.split()[1].rstrip(","))
    assert [k.member for k in shape.keys] == keys
    assert list(shape.args) == args
    for word, tail in (("KEYS", shape.key_tail), ("ARGV", shape.arg_tail)):
        _, documented_tail = _documented(name, word)
        assert (documented_tail is not None) == tail
    flags = next(line for line in header(name) if line.startswith("flags:"))
    assert flags.split()[1] == (shape.flags or "none")


@pytest.mark.parametrize("path", sorted(LUA.rglob("*.lua")), ids=lambda p: p.name)
def test_no_lua_file_derives_a_key_from_another_keys_name(path: Path) -> None:
    """Every key a script touches comes in KEYS, or is a stem from ARGV (built by
    leaseq.store.keys) followed by an id or bucket; none is cut out of another."""
    body = code(path.read_text())
    # The names bound to keys: K entries and the locals assigned from them.
    keys = {"K", "KEYS"}
    for names, values in re.findall(r"local ([\w, ]+) =\s*((?:K\.\w+|KEYS\[\d+\])[^\n]*)", body):
        bound = [n.strip() for n in names.split(",")]
        for n, value in zip(bound, values.split(","), strict=False):
            if re.match(r"\s*(K\.\w+|KEYS\[)", value):
                keys.add(n)
    for first in re.findall(r"string\.sub\(\s*([\w.\[\]]+)", body):
        assert first.split(".")[0].split("[")[0] not in keys, f"{path.name} cuts the key {first}"
    for name in re.findall(r"\bK\.(\w+)\s*\.\.", body):
        assert name.endswith("_prefix"), f"{path.name} appends to the key K.{name}"
    assert not re.search(r"\b(KEYS|ARGV)\[[^\]]*\]\s*\.\.\s*'", body), f"{path.name} builds a key"
    if path.parent.name == "lib":
        signature = re.search(r"local function \w+\(([^)]*)\)", body)
        uses_k = re.search(r"\bK\.", body)
        assert not uses_k or (
            signature and "K" in [a.strip() for a in signature.group(1).split(",")]
        ), f"{path.name} reads the caller's K: take it as an argument"


@pytest.mark.parametrize("path", sorted(LUA.rglob("*.lua")), ids=lambda p: str(p.relative_to(LUA)))
def test_each_file_declares_exactly_the_keys_its_own_code_uses(path: Path) -> None:
    """A header lists the keys and key stems its own file's code reads (``K.<name>``,
    ``A.<stem>_prefix``), no more and no fewer: a script does not repeat a key that
    only its libraries read (the loader adds theirs), and a library declares every
    key it reads, so each of its callers gets it."""
    body = code(path.read_text())
    used = set(re.findall(r"\bK\.(\w+)", body)) | set(re.findall(r"\bA\.(\w+_prefix)\b", body))
    if path.name == "state_indexes.lua":  # reads every state's index by name, K[state]
        used |= {s.value for s in State}
    lines = header_of_file(path)
    keys = {_member(line) for line in lines if re.match(r"KEYS(\[\d+\])?\s", line)}
    args = [line.split()[1].rstrip(",") for line in lines if re.match(r"ARGV(\[\d+\])?\s", line)]
    stems = {a for a in args if a.endswith("_prefix")}
    where = f"lua/{path.relative_to(LUA)}"
    assert not used - keys - stems, f"{where} reads {sorted(used - keys - stems)}, undeclared"
    assert not (keys | stems) - used, f"{where} declares {sorted((keys | stems) - used)}, unread"


@pytest.mark.parametrize("name", NAMES)
def test_clock_line_matches_the_body(name: str) -> None:
    clock = next(line for line in header(name) if line.startswith("clock:"))
    body = code(SCRIPTS[name].source)
    reads_time = "now_ms(" in body
    assert reads_time == ("TIME" in clock), f"lua/{name}.lua: clock line says {clock!r}"
    # The jobs' clock only through now_ms(); a call that bounds its own work by
    # time reads TIME for that alone, through elapsed_us().
    budget = "elapsed_us(" in body
    assert body.count("redis.call('TIME')") <= 1 + budget, "time only through now_ms()"


@pytest.mark.parametrize("path", sorted(LUA.rglob("*.lua")), ids=lambda p: str(p.relative_to(LUA)))
def test_each_file_includes_exactly_what_it_calls_itself(path: Path) -> None:
    """Nested includes: a script or library lists the libraries its own code calls
    or whose constants it reads, no more (what they use comes with them) and no fewer."""
    text = path.read_text()
    listed = re.findall(r"^--!include lib/(\w+)\.lua$", text, re.MULTILINE)
    body = code(text)
    called = [
        lib
        for lib in LIBS
        if lib != path.stem
        and (
            re.search(rf"\b{lib}\(", body)
            or any(re.search(rf"\b{name}\b", body) for name in _constants(lib))
        )
    ]
    assert sorted(listed) == called, f"lua/{path.relative_to(LUA)} includes {listed}"


def _constants(lib: str) -> list[str]:
    """The constants a library defines for its callers (``local NAME = ...`` at its top)."""
    text = code((LUA / "lib" / f"{lib}.lua").read_text())
    return re.findall(r"^local ([A-Z][A-Z0-9_]*) =", text, re.MULTILINE)


@pytest.mark.parametrize("lib", LIBS)
def test_each_lib_file_holds_one_function_of_its_name(lib: str) -> None:
    text = (LUA / "lib" / f"{lib}.lua").read_text()
    body = code(text)
    assert re.findall(r"local function (\w+)", body) == [lib]
    assert not re.search(r"\b(KEYS|ARGV)\[", body), "libs take keys as arguments"
    assert text.startswith(f"-- {lib}("), "a lib opens with its signature"


@pytest.mark.parametrize("name", NAMES)
def test_each_library_is_defined_once_before_its_callers(name: str) -> None:
    source = code(SCRIPTS[name].plain)
    defined = [f for f in re.findall(r"^local function (\w+)", source, re.MULTILINE) if f in LIBS]
    assert len(defined) == len(set(defined)), f"lua/{name}.lua: a library twice"
    for i, lib in enumerate(defined):
        body = source.split(f"local function {lib}(", 1)[1]
        later = [
            other
            for other in defined[i + 1 :]
            if re.search(rf"\b{other}\(", body.split("\nlocal function ", 1)[0])
        ]
        assert not later, f"lua/{name}.lua: {lib} calls {later}, defined after it"


@pytest.mark.parametrize("path", sorted(LUA.rglob("*.lua")), ids=lambda p: p.name)
def test_scripts_are_portable_lua(path: Path) -> None:
    body = code(path.read_text())
    bare = re.sub(r"\(table\.unpack or unpack\)\(", "", body)
    assert not re.search(r"\bunpack\(", bare), "use (table.unpack or unpack)"
    for banned in ("cjson", "cmsgpack", "loadstring", "setfenv", "math.random", "os."):
        assert banned not in body, f"{path.name} uses {banned}"


def test_the_pending_score_rule_is_written_once() -> None:
    """The pending score's constants are named in lua/lib/pending_score.lua and
    spelled nowhere else in Lua; the pages and the ``QueueKeys`` docstrings that
    state the rule give the same powers of two."""
    lib = LUA / "lib" / "pending_score.lua"
    found = re.findall(r"^local (PENDING_\w+) = (\d+)", lib.read_text(), re.MULTILINE)
    const = {name: int(value) for name, value in found}
    assert set(const) == {"PENDING_PRIORITY_FACTOR", "PENDING_SEQ_RESTART", "PENDING_GROUPED"}
    for path in LUA.rglob("*.lua"):
        if path != lib:
            body = code(path.read_text())
            spelled = [name for name, value in const.items() if str(value) in body]
            assert not spelled, f"lua/{path.relative_to(LUA)} spells {spelled}: use the names"
    power = {name: value.bit_length() - 1 for name, value in const.items()}
    assert all(2 ** power[name] == value for name, value in const.items())
    factor, restart = power["PENDING_PRIORITY_FACTOR"], power["PENDING_SEQ_RESTART"]
    docs = LUA.parent / "docs"
    rule = f"priority * 2^{factor} + seq"
    states = (docs / "states.md").read_text()
    assert rule in states and f"passed 2^{restart}" in states and f"wraps at 2^{factor}" in states
    assert rule in (docs / "keys-and-rows.md").read_text()
    assert f"2^{power['PENDING_GROUPED']} + {rule}" in (docs / "flow-control.md").read_text()
    # The state indexes have no property of their own (QueueKeys.index): only the group's.
    doc = leaseq.QueueKeys.group.__doc__
    assert f"priority * 2**{factor} + FIFO sequence" in (doc or "")


def _calls(q: leaseq.Queue) -> dict[str, Any]:
    """One Call per script, for the job id "ID"."""
    core = q._core
    lease = leaseq.Lease(
        id="ID",
        queue="emails",
        attempt=1,
        max_attempts=5,
        payload=None,
        deadline=0.0,
        enqueued_at=0.0,
        worker="w",
    )
    return {
        "enqueue": enqueue_calls(core, ["x"], ["ID"], {})[1][0],
        "enqueue_flow": flow_calls(core, [leaseq.Step("x", id="ID")])[1][0],
        "claim": claim_call(core, 1, 30.0, None),
        "extend": extend_call(core, [lease], 30.0),
        "complete": complete_call(core, [lease], None),
        "fail": fail_call(core, lease, "x", None, False),
        "release": release_call(core, lease),
        "once": once_call(core, lease, "m"),
        "hold_results": hold_calls(core, ["ID"], 1000)[0],
        "progress": progress_call(core, lease, 1),
        "step": record_step_call(core, lease, "s", 1),
        "suspend": suspend_call(core, lease, "s", 1.0),
        "signal": signal_call(core, "k", b"1", 1000, 10),
        "reap": reap_call(core),
        "cancel": cancel_call(core, "ID"),
        "retry": retry_call(core, "ID", None),
        "update": update_call(core, "ID", {}),
        "retry_all": retry_page(core, None, "op"),
        "purge": purge_page(core, "dead"),
        "reset_clock": reset_clock_call(core),
        "stats": stats_call(core, 1.0),
        "ready_page": ready.page_call(core.keys, 0, 10),
        "pause": pause_call(core),
        "resume": resume_call(core),
        "delete": delete_call(core, "ID"),
        "drop": drop_call(core, False),
        "run_now": run_now_call(core, "ID"),
        "register": registry.register(core, "ID", ttl=1.0, concurrency=1, done=0, running=0),
        "workers": registry.list_workers(core),
        "history": history.read(core),
        "events": events.read_settings(core),
        **_schedule_calls(core),
    }


def _schedule_calls(core: Any) -> dict[str, Any]:
    from leaseq.store import schedules as sch
    from leaseq.store.limits import read_limits

    upsert = sch.schedule(core, "ID", {}, every=1.0)
    read = next(upsert)
    tick = sch.tick(core)
    next(tick)
    due = {"next_due": b"0", "version": b"1", "every_ms": b"1000"}
    return {
        "schedules": read,
        "schedule": upsert.send((0, 0, [("ID", {})])),
        "unschedule": sch.unschedule_call(core, "ID"),
        "tick": tick.send((0, 1, [("ID", due)])),
        "limits": read_limits(core),
    }


def _member(line: str) -> str:
    """The ``QueueKeys`` member a KEYS line names (its pattern without the stem;
    ``<state>``, a state's index, is ``QueueKeys.index``)."""
    member = line.split()[1].removeprefix("leaseq:{<queue>}:").split(":")[0]
    return "index" if member == "<state>" else member


def _key_docs_of(path: Path) -> list[tuple[str, str]]:
    """(literal key pattern, Redis type) of each KEYS line of a script's or a
    library's header, in order."""
    out = []
    for line in header_of_file(path):
        found = re.match(
            r"KEYS(?:\[\d+(?:\.\.)?\])?\s+(\S+)\s+(HASH|ZSET|LIST|STRING|SET|STREAM|ANY)\b", line
        )
        if line.startswith("KEYS"):
            assert found, f"lua/{path.name}: KEYS line lacks a pattern and type: {line!r}"
            out.append((found.group(1), found.group(2)))
    return out


def _key_docs(name: str) -> list[tuple[str, str]]:
    """(pattern, type) of each KEYS entry of a script as the loader lays them out:
    its own fixed keys, then its libraries' that it lacks, then its tail's line."""
    own = _key_docs_of(LUA / f"{name}.lua")
    _, tail = _documented(name, "KEYS")
    fixed, last = (own[:-1], own[-1:]) if tail is not None else (own, [])
    for lib in libraries(name):
        fixed += [doc for doc in _key_docs_of(LUA / lib) if doc not in fixed]
    return fixed + last


def test_documented_key_patterns_are_the_keys_python_passes(r: Any) -> None:
    q = leaseq.Queue("emails", redis=r)
    calls = _calls(q)
    assert sorted(calls) == NAMES
    for name, call in calls.items():
        docs = _key_docs(name)
        assert len(call.keys) >= len(docs) - (SCRIPTS[name].shape.key_tail is True)
        for i, key in enumerate(call.keys):
            pattern, _ = docs[min(i, len(docs) - 1)]
            want = pattern.replace("<queue>", "emails").replace("<id>", "ID")
            want = want.replace("<state>", "dead").replace("<name>", "ID")
            assert key == want, f"lua/{name}.lua KEYS[{i + 1}] is {key!r}, header says {pattern}"


def test_documented_key_types_hold_after_a_lifecycle(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("x", id="ID")
    q.enqueue("y", id="later", delay=100.0)
    q.enqueue_many(["p", "q"])
    lease = claim_one(q)
    q.fail(lease, "x", dead=True)
    q.complete(claim_one(q))
    q.cancel(q.enqueue("c"))
    r.rpush(q.keys.wake, "1")
    q.schedule("ID", {}, every=60.0)
    q.set_limits(concurrency=100, rate=100)
    q.claim()
    kinds = {
        "HASH": "hash",
        "ZSET": "zset",
        "LIST": "list",
        "STRING": "string",
        "SET": "set",
        "STREAM": "stream",
    }
    checked = 0
    for path in sorted(LUA.rglob("*.lua")):  # scripts and libraries
        for pattern, kind in _key_docs_of(path):
            key = pattern.replace("<queue>", "emails").replace("<id>", "ID")
            key = key.replace("<state>", "dead").replace("<name>", "ID")
            if kind != "ANY" and r.exists(key):  # ANY: an application key (effects)
                assert r.type(key).decode() == kinds[kind], f"{key} in lua/{path.name}"
                checked += 1
    assert checked >= 30


# -- the loader ------------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return tmp_path


def test_loader_expands_nested_includes_once_each_in_dependency_order(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "s.lua": "-- s\n--!include lib/f.lua\n--!include lib/g.lua\nreturn f() + g()\n",
            "lib/f.lua": "--!include lib/h.lua\nlocal function f() return h() end\n",
            "lib/g.lua": "--!include lib/h.lua\nlocal function g() return h() end\n",
            "lib/h.lua": "local function h() return 1 end\n",
        },
    )
    assert load_source("s", root) == (
        "-- s\n"
        "local function h() return 1 end\n"
        "local function f() return h() end\n"
        "local function g() return h() end\n"
        "return f() + g()\n"
    )


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"s.lua": "--!include lib/nope.lua\n"}, "does not exist"),
        (
            {"s.lua": "--!include lib/f.lua\n--!include lib/f.lua\n", "lib/f.lua": "x\n"},
            "twice",
        ),
        (
            {
                "s.lua": "--!include lib/f.lua\n",
                "lib/f.lua": "--!include lib/g.lua\n",
                "lib/g.lua": "--!include lib/f.lua\n",
            },
            "cycle s.lua -> lib/f.lua -> lib/g.lua -> lib/f.lua",
        ),
        ({"s.lua": "--!include lib/f.lua\n", "lib/f.lua": "--!include lib/f.lua\n"}, "cycle"),
    ],
    ids=["missing", "repeated", "cycle", "self"],
)
def test_loader_refuses_bad_includes(tmp_path: Path, files: dict[str, str], message: str) -> None:
    root = _tree(tmp_path, files)
    with pytest.raises(RuntimeError, match=message):
        load_source("s", root)


_SCRIPT = "-- s.lua: x\n-- flags: none\n-- KEYS[1]  leaseq:{<queue>}:meta  HASH  m\n"


def test_loader_adds_the_keys_libraries_declare_after_the_scripts_own(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "s.lua": _SCRIPT + "-- KEYS[2..]  leaseq:{<queue>}:job:<id>  HASH  rows\n"
            "-- ARGV[1]  n, a number\n--!include lib/f.lua\n--!include lib/g.lua\nreturn 1\n",
            "lib/f.lua": "-- f(K): x\n-- KEYS  leaseq:{<queue>}:unique  HASH  u\n"
            "-- KEYS  leaseq:{<queue>}:meta  HASH  m\n--!include lib/h.lua\n"
            "local function f(K) end\n",
            "lib/g.lua": "-- g(K): x\n-- ARGV  group_prefix, a stem\n"
            "-- KEYS  leaseq:{<queue>}:waiting  ZSET  w\n--!include lib/h.lua\n"
            "local function g(K) end\n",
            "lib/h.lua": "-- h(K): x\n-- KEYS  leaseq:{<queue>}:releasing  LIST  r\n"
            "-- KEYS  leaseq:{<queue>}:unique  HASH  u\n-- ARGV  job_prefix, a stem\n"
            "local function h(K) end\n",
        },
    )
    assert libraries("s", root) == ["lib/h.lua", "lib/f.lua", "lib/g.lua"]
    text, found = read_script("s", root)
    assert text == load_source("s", root)
    # The script's own first, then each library's new ones in expansion order;
    # the variadic tail stays last, after them.
    assert [k.member for k in found.keys] == ["meta", "releasing", "unique", "waiting"]
    assert found.args == ("n", "job_prefix", "group_prefix")
    assert found.key_tail and not found.arg_tail
    assert "local TAIL = { keys = 5, args = 4 }" in prologue(found)
    assert "group_prefix = ARGV[3]" in prologue(found)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        (
            {"lib/f.lua": "-- f(K)\n-- KEYS[1]  leaseq:{<queue>}:meta  HASH  m\n"},
            "a library's keys have no index",
        ),
        (
            {"lib/f.lua": "-- f(K)\n-- KEYS  leaseq:{<queue>}:job:<id>  HASH  row\n"},
            "fixed keys only",
        ),
        ({"lib/f.lua": "-- f(K)\n-- ARGV  lease_ms, ms\n"}, "ARGV are key stems"),
        ({"lib/f.lua": "-- f(K)\n-- KEYS  pending  ZSET  p\n"}, "is not under"),
        ({"s.lua": _SCRIPT + "-- KEYS  leaseq:{<queue>}:wake  LIST  w\n"}, "numbers its KEYS"),
    ],
    ids=["indexed", "parameter", "argument", "stem", "unnumbered"],
)
def test_loader_refuses_bad_library_keys(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    script = {"s.lua": _SCRIPT + "--!include lib/f.lua\n", "lib/f.lua": ""}
    root = _tree(tmp_path, {**script, **files})
    with pytest.raises(RuntimeError, match=message):
        read_script("s", root)


# -- replays and SCRIPT FLUSH --------------------------------------------------------


def twice(q: leaseq.Queue, call: Any) -> tuple[Any, Any]:
    """Run one Call twice, the way a retried command replays after a lost reply."""
    first = q._run(call)
    try:
        second = q._run(call)
    except leaseq.LeaseqError as exc:
        second = exc
    return first, second


def test_replay_enqueue(q: leaseq.Queue, r: Any) -> None:
    call = enqueue_calls(q._core, [{"n": 1}], ["job"], {})[1][0]
    first, second = twice(q, call)
    assert first == [1] and second == [0]
    assert list(index(q, "pending")) == ["job"]
    assert q.stats().totals["enqueued"] == 1
    # Without an id the client still chooses one before sending, so a
    # replayed call finds the row it wrote and creates nothing twice.
    ids, calls = enqueue_calls(q._core, ["x"], None, {})
    a, b = twice(q, calls[0])
    assert a == [1] and b == [0]
    assert ids[0] in index(q, "pending") and len(index(q, "pending")) == 2


def test_replay_claim_leases_another_job(q: leaseq.Queue) -> None:
    q.enqueue_many(["a", "b"], ids=["a", "b"])
    first, second = twice(q, claim_call(q._core, 1, 30.0, None))
    assert [lease.id for lease in first.leases] == ["a"]
    assert [lease.id for lease in second.leases] == ["b"]
    assert row(q, "a")["attempts"] == "1" and row(q, "b")["attempts"] == "1"


def test_replay_extend(q: leaseq.Queue) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q, ttl=5.0)
    (first,), (second,) = twice(q, extend_call(q._core, [lease], 60.0))
    assert isinstance(first, leaseq.Lease) and isinstance(second, leaseq.Lease)
    assert second.deadline >= first.deadline > lease.deadline
    assert row(q, "job")["lease_until"] == str(round(second.deadline * 1000))


def test_replay_complete(q: leaseq.Queue) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    first, second = twice(q, complete_call(q._core, [lease], ["done"]))
    assert first == []
    assert len(second) == 1 and isinstance(second[0], leaseq.AlreadyFinished)
    assert second[0].state == "succeeded"
    assert q.stats().totals["succeeded"] == 1
    assert row(q, "job")["state"] == "succeeded"


@pytest.mark.parametrize("retry_in", [0.0, 30.0])
def test_replay_fail(q: leaseq.Queue, retry_in: float) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    first, second = twice(q, fail_call(q._core, lease, "boom", retry_in, False))
    assert first in (leaseq.State.PENDING, leaseq.State.SCHEDULED)
    assert isinstance(second, leaseq.AlreadyFinished) and second.state == first.value
    assert q.stats().totals["failed"] == 1
    assert row(q, "job")["state"] == first.value and row(q, "job")["attempts"] == "1"


def test_replay_release(q: leaseq.Queue) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    first, second = twice(q, release_call(q._core, lease))
    assert first is None and isinstance(second, leaseq.AlreadyFinished)
    assert row(q, "job")["max_attempts"] == "6"  # refunded once, not twice


def test_replay_once(q: leaseq.Queue) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q)
    assert twice(q, once_call(q._core, lease, "charge")) == (True, False)


def test_replay_reap(q: leaseq.Queue, clock: Clock) -> None:
    q.enqueue("x", id="job")
    lease = claim_one(q, ttl=clock.lease(30.0))
    clock.past(lease.deadline)
    assert twice(q, reap_call(q._core)) == ((1, 0, False), (0, 0, False))
    assert row(q, "job")["state"] == "pending"
    assert q.stats().totals["expired"] == 1


def test_replay_cancel(q: leaseq.Queue) -> None:
    q.enqueue("x", id="job")
    assert twice(q, cancel_call(q._core, "job")) == (True, False)
    assert q.stats().totals["cancelled"] == 1


def test_replay_retry(q: leaseq.Queue) -> None:
    q.enqueue("x", id="job")
    q.fail(claim_one(q), "x", dead=True)
    first, second = twice(q, retry_call(q._core, "job", 2))
    assert first == 3
    assert isinstance(second, leaseq.JobStateError) and second.state == "pending"
    assert row(q, "job")["max_attempts"] == "3"


def test_replay_purge_and_stats(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("x", id="job")
    q.fail(claim_one(q), "x", dead=True)
    first, second = twice(q, purge_page(q._core, "dead"))
    assert (first.done, first.more, second.done, second.more) == (1, False, 0, False)
    before = snapshot(r)
    a, b = twice(q, stats_call(q._core, 10.0))
    assert (a.pending, a.dead, a.totals) == (b.pending, b.dead, b.totals)
    assert snapshot(r) == before


def test_script_flush_between_calls(q: leaseq.Queue, r: Any) -> None:
    q.enqueue("x", id="a")
    r.script_flush()
    q.enqueue("y", id="b")
    r.script_flush()
    lease = claim_one(q)
    r.script_flush()
    q.complete(lease)
    r.script_flush()
    assert q.stats().succeeded == 1
    assert row(q, "a")["state"] == "succeeded" and row(q, "b")["state"] == "pending"


def test_a_batch_of_many_calls_reloads_its_script_and_keeps_its_order(
    q: leaseq.Queue, r: Any
) -> None:
    from leaseq.store.enqueue import ENQUEUE_CHUNK

    n = 8 * ENQUEUE_CHUNK + 5
    r.script_flush()  # the first call meets NOSCRIPT: loaded, sent again
    ids = q.enqueue_many([{"i": i} for i in range(n)])
    # A client never used (on fakeredis: its first call learns that the server
    # cannot compile '#!lua', and it sends the plain twins).
    fresh = leaseq.Queue(q.name, redis=type(r)(connection_pool=r.connection_pool))
    ids += fresh.enqueue_many([{"i": i} for i in range(n, 2 * n)])
    assert q.stats().pending == 2 * n and len(set(ids)) == 2 * n
    claimed: list[str] = []
    while len(claimed) < 2 * n:
        claimed += [lease.id for lease in q.claim_many(1000, ttl=60.0)]
    assert claimed == ids


def test_the_claim_reply_names_its_lease_fields_once(q: leaseq.Queue) -> None:
    """The claim reply is read by name: it carries the field names of a lease
    once (claim.lua's LEASE), then each lease's values in that order."""
    q.enqueue({"n": 1}, id="a", kind="k", timeout=2.0)
    q.enqueue({"n": 2}, id="b")
    call = claim_call(q._core, 2, 30.0, None)
    raw: list[Any] = []
    seen = q._run(
        leaseq.store.scripts.Call(call.script, call.keys, call.args, lambda r: raw.extend(r))
    )
    assert seen is None
    count, cut, width = int(raw[2]), int(raw[3]), int(raw[4])
    names = [n.decode() if isinstance(n, bytes) else n for n in raw[5 : 5 + width]]
    assert count == 2 and cut == 0 and len(set(names)) == width == len(names)
    assert {"id", "attempts", "incarnation", "payload", "timeout_ms"} <= set(names)
    first = dict(zip(names, raw[5 + width : 5 + 2 * width], strict=True))
    assert first["id"] in (b"a", "a") and int(first["attempts"]) == 1
    assert int(first["timeout_ms"]) == 2000 and first["kind"] in (b"k", "k")
