"""Effects: Redis writes applied in the same script as a completion.

``Queue.complete(lease, effects=[...])`` applies each effect only while the
lease holds, atomically with the job becoming ``succeeded``: the effect
happens exactly once or not at all, however often the job was delivered.
(``once()`` cannot promise that: it sets its marker *before* the effect.)

An effect is a tuple ``(COMMAND, key, *args)`` from a small allow-list of
write commands whose failure modes can be checked before anything is
written, so a bad effect refuses the whole completion instead of leaving it
half done:

========  ==========================================  =================
command   arguments after the key                     key type needed
========  ==========================================  =================
HINCRBY   field, increment (int)                      hash or none
HSET      field, value [, field, value ...]           hash or none
SADD      member [, member ...]                       set or none
ZADD      score (finite number), member [, ...]       zset or none
INCRBY    increment (int)                             string or none
SET       value                                       any (replaced)
XADD      field, value [, field, value ...]           stream or none
========  ==========================================  =================

XADD always uses the id ``*`` (the server picks it). Every key must carry
the queue's hash tag ``{<queue>}`` (Redis Cluster runs a script on one slot)
and must not be one of leaseq's own keys of that queue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from leaseq.errors import InvalidArgument
from leaseq.store.keys import QueueKeys

__all__ = ["ALLOWED", "MAX_EFFECTS", "encode_effects", "hash_tag"]

MAX_EFFECTS = 64
"""Most effects one completion may carry."""

_INT64 = 2**62
"""Bound on an increment, so the server-side overflow check stays simple."""

# command -> (smallest number of args after the key, args come in pairs)
ALLOWED: dict[str, tuple[int, bool]] = {
    "HINCRBY": (2, False),
    "HSET": (2, True),
    "SADD": (1, False),
    "ZADD": (2, True),
    "INCRBY": (1, False),
    "SET": (1, False),
    "XADD": (2, True),
}
_EXACT = {"HINCRBY": 2, "INCRBY": 1, "SET": 1}

Arg = str | bytes | int


def hash_tag(key: str) -> str | None:
    """The hash tag Redis Cluster hashes ``key`` by: the text in the first ``{...}``
    that is not empty, or None when the whole key is hashed."""
    start = key.find("{")
    if start < 0:
        return None
    end = key.find("}", start + 1)
    if end <= start + 1:
        return None
    return key[start + 1 : end]


def _value(arg: object, where: str) -> Arg:
    if isinstance(arg, bool) or not isinstance(arg, (str, bytes, int)):
        raise InvalidArgument(f"{where} must be str, bytes or int, not {arg!r}")
    return arg


def _increment(arg: object, where: str) -> int:
    if isinstance(arg, bool) or not isinstance(arg, int) or not -_INT64 < arg < _INT64:
        raise InvalidArgument(f"{where} must be an integer within +-2**62, not {arg!r}")
    return arg


def _score(arg: object, where: str) -> str:
    if isinstance(arg, bool) or not isinstance(arg, (int, float)) or not math.isfinite(arg):
        raise InvalidArgument(f"{where} must be a finite number, not {arg!r}")
    return repr(float(arg)) if isinstance(arg, float) else str(arg)


def _one(effect: object, n: int, keys: QueueKeys) -> tuple[str, list[Arg]]:
    where = f"effect {n}"
    if isinstance(effect, (str, bytes)) or not isinstance(effect, Sequence) or len(effect) < 2:
        raise InvalidArgument(f"{where} must be a tuple (COMMAND, key, *args), not {effect!r}")
    command, key, *args = effect
    cmd = command.upper() if isinstance(command, str) else None
    if cmd not in ALLOWED:
        allowed = ", ".join(ALLOWED)
        raise InvalidArgument(f"{where}: command {command!r} is not allowed; use one of {allowed}")
    where = f"effect {n} ({cmd})"
    if not isinstance(key, str) or not key:
        raise InvalidArgument(f"{where}: the key must be a non-empty str, not {key!r}")
    if hash_tag(key) != keys.tag:
        raise InvalidArgument(
            f"{where}: key {key!r} must carry the queue's hash tag {{{keys.tag}}} "
            "so that it lives in the queue's cluster slot"
        )
    if key.startswith(keys.stem):
        raise InvalidArgument(
            f"{where}: key {key!r} is under {keys.stem!r}, which is leaseq's own; "
            "use a key of your application's with the same hash tag"
        )
    least, pairs = ALLOWED[cmd]
    exact = _EXACT.get(cmd)
    if len(args) < least or (exact is not None and len(args) != exact) or (pairs and len(args) % 2):
        shape = f"exactly {exact}" if exact else f"{least}+" + (" (in pairs)" if pairs else "")
        raise InvalidArgument(f"{where}: takes {shape} arguments after the key, got {len(args)}")
    out: list[Arg] = []
    for i, arg in enumerate(args):
        at = f"{where} argument {i + 1}"
        if cmd in ("HINCRBY", "INCRBY") and i == len(args) - 1:
            out.append(_increment(arg, at))
        elif cmd == "ZADD" and i % 2 == 0:
            out.append(_score(arg, at))
        else:
            out.append(_value(arg, at))
    return key, [cmd, len(out), *out]


def encode_effects(effects: Sequence[Any] | None, keys: QueueKeys) -> tuple[list[str], list[Arg]]:
    """Check effects and encode them: (their keys, for KEYS) and (per effect:
    command, number of args, args — for ARGV). Raises InvalidArgument before
    anything is sent."""
    if effects is None:
        return [], []
    if isinstance(effects, (str, bytes)) or not isinstance(effects, Sequence):
        raise InvalidArgument(f"effects must be a list of tuples, not {effects!r}")
    if len(effects) > MAX_EFFECTS:
        raise InvalidArgument(f"at most {MAX_EFFECTS} effects per completion, not {len(effects)}")
    out_keys: list[str] = []
    out_args: list[Arg] = []
    for n, effect in enumerate(effects, 1):
        key, args = _one(effect, n, keys)
        out_keys.append(key)
        out_args += args
    return out_keys, out_args
