"""``leaseq worker``: runs a module:function handler, serves every shard of a
sharded queue, says what and where when the handler module fails to
import, and stops at once on credentials the server refuses.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import leaseq
from tests.support.cli import SECRET, Cli, _clean, _one_line_error, run_leaseq_without_url
from tests.support.servers import RedisServer


def test_worker_burst_drains(cli: Cli) -> None:
    q = cli.queue()
    ids = q.enqueue_many([{"i": i} for i in range(20)])
    code, _, err = cli("worker", "mail", "tests.support.handlers:echo", "--burst", "-c", "3")
    assert code == 0, err
    assert [q.get(i).result for i in ids] == [{"i": i} for i in range(20)]  # type: ignore[union-attr]


def test_enqueue_and_worker_serve_every_shard(memory_cli: Cli) -> None:
    client = memory_cli.queue().redis
    sharded = leaseq.ShardedQueue("hot", shards=3, redis=client)
    sharded.enqueue_many([{"i": i} for i in range(9)])
    code, _, err = memory_cli("enqueue", "hot", '{"i": 9}', "--id", "extra")
    assert code == 0, err
    assert sharded.get("extra") is not None and sharded.stats().pending == 10
    assert "hot" not in leaseq.Queue.queues(client)  # no plain queue hiding the shards
    code, _, err = memory_cli("worker", "hot", "tests.support.handlers:echo", "--burst", "-c", "2")
    assert code == 0, err
    assert sharded.stats().succeeded == 10 and sharded.stats().pending == 0


@pytest.mark.parametrize(
    ("source", "kind", "line"),
    [
        ("x = 1\ndef handler(lease):\n    return (\n", "SyntaxError", None),
        ("import os\nimport no_such_dependency_xyz\n", "ModuleNotFoundError", 2),
        (
            "def handler(lease):\n    pass\n\nraise RuntimeError('config missing')\n",
            "RuntimeError",
            4,
        ),
        ("from os import no_such_name\n", "ImportError", 1),
    ],
)
def test_handler_module_errors_say_what_and_where(
    memory_cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    kind: str,
    line: Any,
) -> None:
    name = f"user_mod_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = memory_cli("worker", "q", f"{name}:handler", "--burst")
    _one_line_error(code, out, err, kind, str(path), f"handler module {name!r}")
    assert "internal error" not in err
    if line is not None:
        assert f"{path}:{line}" in err
    with pytest.raises(leaseq.HandlerImportError) as info:
        from leaseq.handler import load_handler

        load_handler(f"{name}:handler")
    assert info.value.filename == str(path) and info.value.error == kind


def test_missing_handler_module_is_not_blamed_on_its_code(memory_cli: Cli) -> None:
    _one_line_error(*memory_cli("worker", "q", "no_such_module_abc:fn"), "no module named")


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("redis://:wrong-{secret}@127.0.0.1:{port}/0", "WRONGPASS"),
        ("redis://127.0.0.1:{port}/0", "needs a password"),
        ("redis://limited:{secret}@127.0.0.1:{port}/0", "NOPERM"),
    ],
)
def test_worker_with_bad_credentials_stops_at_once(
    locked: RedisServer, url: str, needle: str
) -> None:
    url = url.format(secret=SECRET, port=locked.port)
    done = run_leaseq_without_url(
        "--url", url, "worker", "q", "tests.support.handlers:echo", "--burst", timeout=30
    )
    assert done.returncode != 0
    assert done.stderr.startswith("leaseq: error: ") and done.stderr.count("\n") == 1
    hint = "docs/reliability.md" if needle == "NOPERM" else "USER:PASSWORD@ before the host"
    assert needle in done.stderr and hint in done.stderr
    assert "unavailable" not in done.stderr
    _clean(done)


def test_worker_without_burst_also_stops_on_bad_credentials(locked: RedisServer) -> None:
    url = f"redis://:nope@127.0.0.1:{locked.port}/0"
    done = run_leaseq_without_url(
        "--url", url, "worker", "q", "tests.support.handlers:echo", timeout=30
    )
    assert done.returncode != 0 and "WRONGPASS" in done.stderr and "Traceback" not in done.stderr
