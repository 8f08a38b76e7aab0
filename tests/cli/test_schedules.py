"""The schedule commands: ``schedule``, ``schedules`` (also one whose stored
definition will not read), ``unschedule`` and ``limits``; in-process on
memory:// and on a real server.
"""

from __future__ import annotations

import json

import pytest

from tests.support.cli import Cli, _one_line_error
from tests.support.store import HUGE


def test_schedule_list_and_unschedule(cli: Cli) -> None:
    code, out, _ = cli("schedule", "mail", "beat", '{"a": 1}', "--every", "30")
    assert code == 0 and "scheduled beat on mail: every 30 s" in out
    code, out, _ = cli(
        "schedule", "mail", "nightly", "{}", "--cron", "0 3 * * *", "--tz", "Europe/Paris"
    )
    assert code == 0 and "cron 0 3 * * * Europe/Paris" in out
    code, out, _ = cli("schedules")
    assert code == 0 and "beat" in out and "nightly" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    code, out, _ = cli("schedules", "mail", "--json")
    doc = json.loads(out)
    assert sorted(s["name"] for s in doc["mail"]) == ["beat", "nightly"]
    assert next(s for s in doc["mail"] if s["name"] == "beat")["payload"] == {"a": 1}
    assert cli.queue().schedules()[0].name in ("beat", "nightly")
    code, out, _ = cli("unschedule", "mail", "beat")
    assert code == 0 and "removed" in out
    assert [s.name for s in cli.queue().schedules()] == ["nightly"]


def test_bad_schedule_commands_print_one_line(cli: Cli) -> None:
    _one_line_error(*cli("unschedule", "mail", "nope"), "no schedule named 'nope'")
    _one_line_error(*cli("schedule", "mail", "x", "{}", "--cron", "bad"), "cron")
    _one_line_error(*cli("schedule", "mail", "x", "{}"), "exactly one")
    _one_line_error(*cli("schedule", "mail", "x", "{nope", "--every", "1"), "JSON")
    _one_line_error(*cli("schedule", "mail", "x", "{}", "--every", "1", "--tz", "UTC"), "tz")
    assert cli.queue().schedules() == []
    code, out, _ = cli("schedules", "mail")
    assert code == 0 and "no schedules on mail" in out


def test_limits_command(cli: Cli) -> None:
    code, out, _ = cli("limits", "mail")
    assert code == 0 and "concurrency none; rate none" in out
    code, out, _ = cli("limits", "mail", "--concurrency", "4", "--rate", "50", "--per", "2")
    assert code == 0 and "concurrency 4 (0 active now)" in out and "50 per 2 s" in out
    got = cli.queue().limits()
    assert (got.concurrency, got.rate, got.per) == (4, 50, 2.0)
    code, out, _ = cli("limits", "mail", "--json")
    assert json.loads(out)["concurrency"] == 4
    cli.queue().enqueue({})
    code, out, _ = cli("stats", "mail", "--json")
    body = json.loads(out)["mail"]
    assert (body["concurrency_limit"], body["rate_limit"], body["rate_per"]) == (4, 50, 2.0)
    code, out, _ = cli("limits", "mail", "--concurrency", "0")
    assert code == 0 and cli.queue().limits().concurrency is None
    code, out, _ = cli("limits", "mail", "--clear")
    assert code == 0 and "concurrency none; rate none" in out
    _one_line_error(*cli("limits", "mail", "--per", "2"), "--per goes with --rate")
    _one_line_error(*cli("limits", "mail", "--clear", "--rate", "3"), "--clear")


def test_cost_limits_command(cli: Cli) -> None:
    code, out, _ = cli("limits", "mail", "--cost-rate", "90000", "--cost-per", "60")
    assert code == 0 and "cost 90000 per 60 s (0 in the last 60 s)" in out
    q = cli.queue()
    q.enqueue_many(["a", "b"], cost=2.5)
    q.claim_many(2, ttl=30.0)
    code, out, _ = cli("limits", "mail")
    assert "cost 90000 per 60 s (5 in the last 60 s)" in out
    code, out, _ = cli("stats", "mail", "--json")
    body = json.loads(out)["mail"]
    assert (body["cost_limit"], body["cost_per"], body["recent_cost"]) == (90000, 60, 5)
    code, out, _ = cli("limits", "mail", "--group", "vip", "--cost-rate", "10", "--cost-per", "1")
    assert code == 0 and "group vip: cost 10 per 1 s" in out
    code, out, _ = cli("limits", "mail", "--group-cost-rate", "7")
    assert code == 0 and "group cost 7 per 1 s" in out
    _one_line_error(*cli("limits", "mail", "--cost-per", "2"), "--cost-per goes with --cost-rate")
    _one_line_error(*cli("limits", "mail", "--cost-rate", "nan"), "cost_rate")
    code, out, _ = cli("limits", "mail", "--clear")
    assert code == 0 and "cost none" in out and "group cost none" in out
    assert q.limits().groups["vip"].cost_rate == 10  # a group's own stay: --group to clear


def test_group_limits_in_limits_stats_and_show(cli: Cli) -> None:
    code, out, _ = cli("limits", "mail", "--group-concurrency", "1")
    assert code == 0 and "group concurrency 1 (busiest group 0 active" in out
    q = cli.queue()
    a, _b = q.enqueue_many([{}, {}], group="tenant-1")
    lease = q.claim()
    assert lease is not None and lease.id == a
    code, out, _ = cli("limits", "mail")
    assert "group concurrency 1 (busiest group 1 active, 0 groups held)" in out
    assert q.claim() is None  # the group is at its limit: held
    body = json.loads(cli("stats", "mail", "--json")[1])["mail"]
    assert (body["group_concurrency_limit"], body["groups_held"], body["pending"]) == (1, 1, 1)
    code, out, _ = cli("show", "mail", a)
    assert code == 0 and "tenant-1" in out
    code, out, _ = cli("limits", "mail", "--clear")
    assert code == 0 and "group concurrency none" in out
    assert q.limits().group_concurrency is None and q.claim() is not None


def test_schedules_lists_one_whose_definition_will_not_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    cli = Cli(capsys)
    q = cli.queue()
    q.schedule("hourly", {"n": 1}, every=3600.0)
    q.schedule("broken", {"n": 2}, every=60.0)
    q.redis.hset(q.keys.schedule("broken"), "every_ms", "abc")
    q.redis.hset(q.keys.schedule("broken"), "last_fired", HUGE)
    code, out, err = cli("schedules", "mail")
    assert code == 0, err
    assert "hourly" in out and "broken" in out and "unreadable" in out


def test_schedule_takes_every_job_option_and_schedules_shows_the_kind(cli: Cli) -> None:
    code, out, err = cli(
        "schedule", "mail", "digest", "{}", "--every", "60", "--kind", "send_digest",
        "--group", "tenant-7", "--priority", "3", "--max-attempts", "2", "--timeout", "9",
        "--unique", "digest",
    )  # fmt: skip
    assert code == 0, err
    (s,) = cli.queue().schedules()
    assert (s.kind, s.group, s.priority, s.max_attempts, s.timeout, s.unique_key) == (
        "send_digest", "tenant-7", 3, 2, 9.0, "digest",
    )  # fmt: skip
    code, out, _ = cli("schedules", "mail")
    assert code == 0 and "send_digest" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    _one_line_error(*cli("schedule", "mail", "x", "{}", "--every", "1", "--kind", "a b"), "kind")


def test_enqueue_with_a_group_and_a_unique_key(cli: Cli) -> None:
    code, first, _ = cli("enqueue", "mail", "{}", "--group", "tenant-7", "--unique", "k")
    assert code == 0
    code, again, _ = cli("enqueue", "mail", '{"n": 2}', "--unique", "k")
    assert code == 0 and again.strip() == first.strip()  # the holder's id
    job = cli.queue().get(first.strip())
    assert job is not None and job.group == "tenant-7" and job.unique_key == "k"
    _one_line_error(*cli("enqueue", "mail", "{}", "--unique", "a b"), "unique key")


def test_group_rates_and_one_groups_own_limits(cli: Cli) -> None:
    code, out, err = cli("limits", "mail", "--group-rate", "10", "--group-per", "60")
    assert code == 0, err
    assert "group rate 10 per 60 s" in " ".join(out.split())
    code, out, err = cli(
        "limits", "mail", "--group", "tenant-42", "--concurrency", "4", "--rate", "100"
    )
    assert code == 0, err
    text = " ".join(out.split())
    assert "group tenant-42: concurrency 4, rate 100 per 1 s" in text
    got = cli.queue().limits()
    assert got.group_rate == 10 and got.groups["tenant-42"].concurrency == 4
    _one_line_error(*cli("limits", "mail", "--group", "x", "--group-rate", "1"), "--group NAME")
    _one_line_error(*cli("limits", "mail", "--group-per", "5"), "--group-per")
    code, out, _ = cli("limits", "mail", "--json")
    assert json.loads(out)["groups"]["tenant-42"]["rate"] == 100
