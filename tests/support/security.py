"""The least-privilege ACL user of the security tests (no tests in here): its
password and the commands it may send, which are all leaseq sends; and a
self-signed certificate for the TLS tests.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PASSWORD = "s3cret-Pa55word"


# What leaseq sends: scripts (by SHA, loaded on NOSCRIPT), the commands the
# scripts call, and the few it sends itself (blocking claim, reads, SCAN).
COMMANDS = [
    "evalsha", "script|load",
    "time", "exists", "del", "pexpire",
    "hget", "hmget", "hgetall", "hset", "hsetnx", "hdel", "hincrby",
    "zadd", "zrem", "zpopmin", "zrange", "zrangebyscore", "zcard", "zcount",
    "rpush", "lpush", "llen", "lrange", "blpop", "lpop",
    "sadd", "srem", "smembers", "spop", "pttl", "persist",
    "xadd", "xrevrange", "xread",
    "scan", "ping", "hello", "config|get",
]  # fmt: skip


def _leaks(text: str) -> bool:
    return PASSWORD in text


def self_signed(where: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with ``openssl`` in ``where``
    (the test is skipped where there is no openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key
