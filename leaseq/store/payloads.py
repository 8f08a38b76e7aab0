"""Payload and result encoding: msgspec JSON (default) or msgpack. Never pickle.

The rules (README "Payload rules", docs/keys-and-rows.md): payloads and results are
data. NaN and +/-Infinity are refused (msgspec's JSON would store them as
``null``; msgpack would keep them, so both serializers refuse alike). Other
Python types are converted the msgspec way and come back as what the stored
text holds: tuples, sets and frozensets as lists; in JSON, bytes as base64
text, datetimes, UUIDs and Decimals as strings, non-string dict keys as
strings. A queue with a ``payload_type`` decodes payloads back into it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from leaseq.errors import InvalidArgument, InvalidPayload, PayloadTooLarge

__all__ = ["Codec", "SerializerName"]

SerializerName = Literal["json", "msgpack"]


class Codec:
    """Encoders and decoders built once per queue and reused for every job."""

    __slots__ = ("_any", "_decode", "_encode", "limit", "name", "payload_type")

    _encode: Callable[[Any], bytes]
    _decode: Callable[[Any], Any]
    _any: Callable[[Any], Any]

    def __init__(self, name: str, payload_type: Any, limit: int) -> None:
        if name == "json":
            self._encode = msgspec.json.Encoder().encode
            self._decode = msgspec.json.Decoder(payload_type or Any).decode
            self._any = msgspec.json.Decoder().decode
        elif name == "msgpack":
            self._encode = msgspec.msgpack.Encoder().encode
            self._decode = msgspec.msgpack.Decoder(payload_type or Any).decode
            self._any = msgspec.msgpack.Decoder().decode
        else:
            raise InvalidArgument(f"serializer must be 'json' or 'msgpack', not {name!r}")
        self.name = name
        self.payload_type = payload_type
        self.limit = limit

    def encode(self, value: Any, what: str = "payload") -> bytes:
        """Encode and size-check; raises InvalidPayload / PayloadTooLarge, writes nothing."""
        if self.payload_type is not None and what == "payload":
            try:
                msgspec.convert(msgspec.to_builtins(value), self.payload_type)
            except (msgspec.ValidationError, TypeError, RecursionError) as exc:
                raise InvalidPayload(
                    f"{what} does not match {self.payload_type!r}: {exc}"
                ) from None
        try:
            data = self._encode(value)
        except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError) as exc:
            raise InvalidPayload(f"{what} cannot be encoded as {self.name}: {exc}") from None
        if len(data) > self.limit:
            raise PayloadTooLarge(len(data), self.limit)
        if self._maybe_non_finite(data):
            where = _non_finite(value)
            if where is not None:
                raise InvalidPayload(
                    f"{what} holds a non-finite number ({where}); JSON has no NaN or "
                    "Infinity, and leaseq refuses them on every serializer: use null or a string"
                )
        return data

    def _maybe_non_finite(self, data: bytes) -> bool:
        # A cheap test on the encoded bytes, so the walk over the value runs
        # only when a non-finite float could be there: msgspec's JSON writes
        # one as null; msgpack writes every float after a 0xca/0xcb marker.
        if self.name == "json":
            return b"null" in data
        return b"\xcb" in data or b"\xca" in data

    def decode_payload(self, data: bytes | str) -> Any:
        """Decode a payload into the queue's payload type (raises msgspec errors)."""
        return self._decode(data)

    def decode_any(self, data: bytes | str) -> Any:
        """Decode a stored result (no type applied)."""
        return self._any(data)


def _non_finite(value: Any) -> str | None:
    """Where in ``value`` a NaN or infinite float sits (``$.a[2]``), or None."""
    try:
        plain = msgspec.to_builtins(value, builtin_types=(bytes, bytearray, memoryview))
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
        return None  # encoding just succeeded; nothing more to learn here
    stack: list[tuple[Any, str]] = [(plain, "$")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{path} = {item!r}"
        elif isinstance(item, dict):
            stack.extend((v, f"{path}.{k}") for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return None
