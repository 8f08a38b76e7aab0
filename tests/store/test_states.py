"""The job states are declared once: ``leaseq.types.State``, ``FINISHED`` and
``TRANSITIONS``. The Lua side reads them from the generated
``lua/lib/state_kind.lua``; no other Lua file spells a list of states; and the
moves the scripts really make (as the event stream records them) are exactly
the declared transitions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import leaseq
from leaseq.store import states
from leaseq.types import EXPIRING, FINISHED, TRANSITIONS, State
from tests.support.backends import Clock
from tests.support.store import claim_one

LUA = Path(__file__).resolve().parents[2] / "lua"
NAMES = {s.value for s in State}


def code(text: str) -> str:
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


@pytest.mark.parametrize("path", states.LUA_PATHS, ids=str)
def test_the_lua_states_are_generated_from_state(path: Path) -> None:
    on_disk = (LUA / path).read_text(encoding="utf-8")
    assert on_disk == states.lua_sources()[path], (
        f"lua/{path} differs from leaseq.types.State: run python -m leaseq.store.states"
    )


def test_the_generated_lua_lists_every_state_in_order() -> None:
    sources = states.lua_sources()
    kinds = sources[Path("lib") / "state_kind.lua"]
    listed = dict(re.findall(r"^  (\w+) = '(\w+)',$", kinds, re.MULTILINE))
    assert set(listed) == NAMES
    assert {name for name, kind in listed.items() if kind == "finished"} == {
        s.value for s in FINISHED
    }
    indexes = sources[Path("lib") / "state_indexes.lua"]
    rows = re.findall(r"^  \{ '(\w+)', (true|false) \},$", indexes, re.MULTILINE)
    assert [name for name, _ in rows] == [s.value for s in State]
    assert {name for name, flag in rows if flag == "true"} == {s.value for s in EXPIRING}


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(LUA.rglob("*.lua")) if p.relative_to(LUA) not in states.LUA_PATHS],
    ids=lambda p: str(p.relative_to(LUA)),
)
def test_no_other_lua_file_spells_a_list_of_states(path: Path) -> None:
    body = code(path.read_text(encoding="utf-8"))
    for table in re.findall(r"\{[^{}]*\}", body):
        keys = set(re.findall(r"\b(\w+)\s*=", table)) & NAMES
        assert len(keys) < 2, f"{path.name} spells a table of states {sorted(keys)}"
        indexes = set(re.findall(r"\bK\.(\w+)", table)) & NAMES
        assert len(indexes) < 2, f"{path.name} spells a list of state indexes {sorted(indexes)}"
        quoted = set(re.findall(r"'(\w+)'", table)) & NAMES
        assert len(quoted) < 2, f"{path.name} spells a list of state names {sorted(quoted)}"
    # A transition script names the indexes it moves jobs between (local a, b = K.a, K.b);
    # one that names (nearly) every state's is a list to keep in step: state_indexes(K).
    for run in re.findall(r"K\.\w+(?:\s*,\s*K\.\w+)+", body):
        indexes = set(re.findall(r"\bK\.(\w+)", run)) & NAMES
        assert len(indexes) < len(NAMES) - 1, f"{path.name} lists the indexes {sorted(indexes)}"
    for cond in re.findall(r"\b(?:if|elseif)\b(.*?)\bthen\b", body, re.DOTALL):
        compared = set(re.findall(r"~=\s*'(\w+)'", cond)) & NAMES
        assert len(compared) < 3, f"{path.name} compares against a list {sorted(compared)}"


def test_the_state_machine_is_closed() -> None:
    assert set(TRANSITIONS) == set(State)
    for source, targets in TRANSITIONS.items():
        assert targets <= set(State)
        assert source not in targets
    for state in FINISHED:
        assert state.finished
        # Only an operator (retry_dead) moves a job out of a finished state.
        assert TRANSITIONS[state] <= {State.PENDING}
    assert not any(s.finished for s in set(State) - FINISHED)


def _moves(q: leaseq.Queue) -> set[tuple[State, State]]:
    return {
        (e.from_state, e.to_state)
        for e in q.events()
        if e.from_state is not None and e.to_state is not None
    }


def test_every_move_the_scripts_make_is_declared_and_every_declared_one_is_made(
    q: leaseq.Queue, r: Any, clock: Clock
) -> None:
    # One of each transition: claim, complete, fail (retry now, later, dead),
    # release, reap, cancel (pending, scheduled, active), promotion, run_now, retry_dead,
    # and a row that can never run, dead-lettered by claim; a durable sleep that
    # a claim wakes, and one cancelled asleep.
    q.enqueue("sleeps", id="sleeps")
    q.suspend(claim_one(q), "nap", 0.5)
    q.enqueue("sleeps on", id="sleeps-on")
    q.suspend(claim_one(q), "nap", 60.0)
    q.cancel("sleeps-on")
    q.cancel(q.enqueue("cancel me"))
    q.cancel(q.enqueue("cancel me later", delay=60.0))
    q.enqueue("cancel me running")
    q.cancel(claim_one(q).id)
    q.run_now(q.enqueue("run now", delay=60.0))
    q.enqueue_many(["b", "c", "d", "e"])
    q.complete(claim_one(q))
    q.fail(claim_one(q), "again", retry_in=0.0)
    q.release(claim_one(q))
    q.fail(claim_one(q), "later", retry_in=0.5)
    clock.advance(1.0)
    lease = claim_one(q)  # the claim promotes the due job first
    q.fail(lease, "done for", dead=True)
    q.retry_dead(lease.id)
    assert q.claim(ttl=0.01) is not None
    clock.advance(1.0)
    assert q.reap() == (1, 0)
    q.enqueue("never", id="cannot-run", max_attempts=1)
    r.hset(q.keys.job("cannot-run"), "attempts", 1)
    q.claim_many(100)  # cannot-run is dead-lettered, the rest leased
    # Workflows: the parent's completion releases one child to pending and one,
    # delayed, to scheduled; a third child is cancelled while it waits.
    parent = q.enqueue("parent")
    q.enqueue("child", depends_on=[parent])
    q.enqueue("delayed child", depends_on=[parent], delay=60.0)
    q.cancel(q.enqueue("cancelled child", depends_on=[parent]))
    q.complete(claim_one(q))
    made = _moves(q)
    declared = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}
    assert made <= declared, f"moves not in TRANSITIONS: {made - declared}"
    assert made == declared, f"declared but never made here: {declared - made}"
