"""The least-privilege ACL user of the security tests (no tests in here): its
password and the commands it may send, which are all leaseq sends.
"""

from __future__ import annotations

PASSWORD = "s3cret-Pa55word"


# What leaseq sends: scripts (by SHA, loaded on NOSCRIPT), the commands the
# scripts call, and the few it sends itself (blocking claim, reads, SCAN).
COMMANDS = [
    "evalsha", "script|load",
    "time", "exists", "del", "pexpire",
    "hget", "hmget", "hgetall", "hset", "hsetnx", "hdel", "hincrby",
    "zadd", "zrem", "zpopmin", "zrange", "zrangebyscore", "zcard", "zcount",
    "rpush", "llen", "blpop",
    "sadd", "srem", "smembers", "spop", "lpop", "pttl", "persist",
    "xadd", "xrevrange", "xread",
    "scan", "ping", "hello", "config|get",
]  # fmt: skip


def _leaks(text: str) -> bool:
    return PASSWORD in text
