"""Payloads typed on the command line: JSON text, and files of JSON lines, each
line checked before anything is written; an error names the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from leaseq.errors import InvalidArgument, InvalidPayload, PayloadTooLarge

__all__ = ["json_lines", "parse_json"]


def parse_json(text: str, what: str) -> Any:
    def refuse(name: str) -> Any:
        raise InvalidPayload(
            f"{what} holds {name}: JSON has no NaN or Infinity, and leaseq refuses "
            "non-finite numbers; use null or a string"
        )

    try:
        return json.loads(text, parse_constant=refuse)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"bad JSON in {what}: {exc}") from None


def json_lines(stream: Any, check: Any) -> Iterator[Any]:
    """The payloads of a binary stream of UTF-8 JSON lines (blank lines skipped),
    each passed to ``check(payload, "line N")``; an error names the line."""
    for n, raw in enumerate(stream, 1):
        try:
            line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidPayload(
                f"line {n} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                f"column {exc.start + 1}): JSON lines must be UTF-8"
            ) from None
        if line.strip():
            value = parse_json(line, f"line {n}")
            try:
                check(value, f"line {n}")
            except PayloadTooLarge as exc:
                raise InvalidPayload(f"line {n}: {exc}") from None
            yield value
