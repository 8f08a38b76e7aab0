"""Payload and result encoding: msgspec JSON (default) or msgpack. Never pickle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec

from .errors import InvalidArgument, InvalidPayload, PayloadTooLarge

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
        return data

    def decode_payload(self, data: bytes | str) -> Any:
        """Decode a payload into the queue's payload type (raises msgspec errors)."""
        return self._decode(data)

    def decode_any(self, data: bytes | str) -> Any:
        """Decode a stored result (no type applied)."""
        return self._any(data)
