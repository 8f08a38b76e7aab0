"""Fixtures of the CLI tests: a real server that wants a password."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.support.cli import SECRET
from tests.support.servers import RedisServer


@pytest.fixture(scope="module")
def locked() -> Iterator[RedisServer]:
    """A server with a password (set once it is up: start() pings without one)."""
    server = RedisServer()
    admin = redis.Redis(port=server.port)
    admin.execute_command("ACL", "SETUSER", "limited", "on", f">{SECRET}", "~other:*", "+@all")
    admin.config_set("requirepass", SECRET)
    admin.close()
    yield server
    server.stop()
