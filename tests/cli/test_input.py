"""Bad input on the command line is one clear error line (no traceback) and
writes nothing: bad JSON, NaN, a line of --file that is not UTF-8 or too
large, a bad URL or db number, a bad --ttl.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import leaseq
from tests.support.cli import Cli, _one_line_error
from tests.support.servers import free_port


def test_bad_json_line_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"i": 1}\n{"i": \n')
    _one_line_error(*cli("enqueue", "mail", "--file", str(lines)), "bad JSON in line 2")
    assert leaseq.Queue.queues(cli.queue().redis) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("enqueue", "mail", "{nope"), "bad JSON in payload"),
        (("enqueue", "bad name!", "{}"), "invalid queue name"),
        (("enqueue", "mail", "{}", "--priority", "-1"), "priority"),
        (("enqueue", "mail"), "either a JSON PAYLOAD or --file"),
        (("show", "mail", "nope"), "no job 'nope'"),
        (("show", "mail", "bad{id}"), "invalid job id"),
        (("stats", "ghost"), "no queue named 'ghost'"),
        (("ls", "mail", "--state", "weird"), "weird"),
        (("retry", "mail", "nope"), "no job 'nope'"),
        (("worker", "mail", "no_such_module:fn"), "cannot import"),
        (("worker", "mail", "tests.support.handlers"), "module:function"),
        (("frobnicate",), "No such command"),
    ],
)
def test_bad_input_is_one_clear_line(cli: Cli, args: tuple[str, ...], needle: str) -> None:
    if args[0] in ("show", "retry"):
        cli("enqueue", "mail", "{}")
    _one_line_error(*cli(*args), needle)


def test_nan_in_cli_json_is_refused(memory_cli: Cli, tmp_path: Path) -> None:
    for text in ('{"x": NaN}', "[Infinity]", '{"y": -Infinity}'):
        _one_line_error(*memory_cli("enqueue", "mail", text), "NaN or Infinity")
    lines = tmp_path / "jobs.jsonl"
    lines.write_text('{"i": 1}\n{"i": NaN}\n')
    _one_line_error(*memory_cli("enqueue", "mail", "--file", str(lines)), "line 2")
    assert leaseq.Queue.queues(memory_cli.queue().redis) == []


def test_non_utf8_line_is_named_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_bytes(b'{"i": 1}\n{"i": 2}\n{"s": "caf\xe9"}\n{"i": 4}\n')
    _one_line_error(*cli("enqueue", "mail", "--file", str(lines)), "line 3", "UTF-8", "0xe9")
    assert leaseq.Queue.queues(cli.queue().redis) == []


def test_too_large_line_is_named_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    # A bad line past the first batch of 1000: still nothing written.
    lines = tmp_path / "jobs.jsonl"
    body = [json.dumps({"i": i}) for i in range(1500)]
    body[1200] = json.dumps({"big": "x" * 2_000_000})
    lines.write_text("\n".join(body) + "\n")
    _one_line_error(*cli("enqueue", "mail", "--file", str(lines)), "line 1201", "bytes")
    assert leaseq.Queue.queues(cli.queue().redis) == []


def test_utf8_file_with_a_bom_and_text(cli: Cli, tmp_path: Path) -> None:
    lines = tmp_path / "jobs.jsonl"
    lines.write_bytes('\ufeff{"s": "café ☕"}\n{"i": 2}\n'.encode())
    code, out, _ = cli("enqueue", "mail", "--file", str(lines))
    assert code == 0 and "enqueued 2 job(s)" in out
    assert {"s": "café ☕"} in [j.payload for j in cli.queue().ls("pending")]


def test_empty_url_is_an_error_not_localhost(
    memory_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_cli.url = ""
    _one_line_error(*memory_cli("stats"), "--url is empty")
    monkeypatch.setenv("LEASEQ_URL", " ")
    from leaseq.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["stats"])
    assert info.value.code != 0
    err = memory_cli.capsys.readouterr().err
    assert "LEASEQ_URL is set but empty" in err and err.count("\n") == 1


@pytest.mark.parametrize("path", ["/abc", "/0x", "/1/2"])
def test_url_with_a_bad_db_is_refused(memory_cli: Cli, path: str) -> None:
    memory_cli.url = f"redis://127.0.0.1:{free_port()}{path}"
    _one_line_error(*memory_cli("stats"), "db number")


def test_ttl_zero_and_negative_get_one_rule(memory_cli: Cli) -> None:
    memory_cli.url = f"redis://127.0.0.1:{free_port()}/0"  # checked before any server is asked
    errors = []
    for ttl in ("0", "-1", "-0.5", "nan"):
        code, out, err = memory_cli(
            "worker", "q", "tests.support.handlers:echo", "--burst", "--ttl", ttl
        )
        _one_line_error(code, out, err, "ttl must be finite and greater than 0")
        errors.append(err.split(", not")[0])
    assert len(set(errors)) == 1
