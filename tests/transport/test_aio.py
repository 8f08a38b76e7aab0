"""leaseq.aio.Queue: the shared behaviour suite on redis.asyncio, and what only
the async queue does (blocking claims, NOSCRIPT reload, from_url, an outage,
the operator runs and clock reset driven by the same sans-I/O generators as
the sync queue, ``leaseq.store.paging``).

The suite functions are the sync ones (tests/store/ and friends), run
against ``leaseq.aio.Queue`` through a facade that awaits each call, so both
APIs are held to one definition of every behaviour. The asyncio Worker is
tests/worker/test_aio_worker.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

import leaseq
import leaseq.aio
from tests.observe import test_tracing
from tests.store import (
    test_admin,
    test_bad_input,
    test_budget,
    test_cancel,
    test_clock,
    test_cost_limits,
    test_cost_windows,
    test_damage,
    test_deadlines,
    test_discovery,
    test_edits,
    test_effects,
    test_events,
    test_fencing,
    test_filters,
    test_groups,
    test_history,
    test_invariants,
    test_jobs,
    test_limits,
    test_pause,
    test_ready_list,
    test_results,
    test_retention,
    test_schedules,
    test_scripts,
    test_signals,
    test_states,
    test_unique,
    test_validation,
    test_waits,
    test_workflows,
)
from tests.support import suite
from tests.support.backends import Clock, async_client, run
from tests.worker import test_errors, test_kinds, test_refunds, test_registry, test_worker

ROOT = Path(__file__).resolve().parents[2]


SUITE_MODULES = (
    test_jobs,
    test_fencing,
    test_damage,
    test_edits,
    test_effects,
    test_bad_input,
    test_clock,
    test_validation,
    test_retention,
    test_results,
    test_scripts,
    test_invariants,
    test_worker,
    test_admin,
    test_cancel,
    test_limits,
    test_cost_limits,
    test_cost_windows,
    test_deadlines,
    test_pause,
    test_schedules,
    test_refunds,
    test_history,
    test_registry,
    test_groups,
    test_waits,
    test_budget,
    test_kinds,
    test_discovery,
    test_events,
    test_tracing,
    test_states,
    test_filters,
    test_errors,
    test_unique,
    test_workflows,
    test_signals,
    test_ready_list,
)


# Queue cases of the sync suite that do NOT run here, each with the reason.
# A case missing from both the async run and this list fails
# test_every_sync_queue_case_runs_on_aio_or_is_excluded_with_a_reason.
_THREADED_WORKER = (
    "drives the threaded leaseq.Worker, which needs a sync Queue (its threads "
    "cannot share the facade's event loop); aio.Worker's own cases are below"
)


_THREADS = (
    "races several sync leaseq.Queue clients on real threads; the async races "
    "are test_cluster's and the aio Worker's concurrency cases"
)


_WEB = (
    "the dashboard is a Starlette app over a sync leaseq.Queue (its routes run "
    "in a thread pool); the queue operations it calls are all in this suite"
)


_PARSE_HOOK = (
    "makes sync queue calls from inside a reply's parse to interleave deaths "
    "between pages; the snapshot rule it checks is the one _admin generator "
    "that both transports run"
)


_BLOCKING_WAIT = (
    "blocks on the done stream until a deadline; on the aio suite's frozen fake "
    "clock that deadline never comes. tests/store/test_waits.py runs its aio twins "
    "on a real server"
)


_TASKS = (
    "typed tasks await the queue they are declared on, so on this facade they "
    "would hand back coroutines; most of these cases drive the threaded worker too. "
    "tests/worker/test_tasks.py runs the aio twins (aio.Queue and aio.Worker) on a "
    "real server"
)

_TESTING = (
    "leaseq.testing serves sync queues: drain runs a leaseq.Worker (a test of an "
    "asyncio app drains its sync twin on the same store)"
)


EXCLUDED: dict[str, str] = {
    "store.admin.retry_all_dead_retries_each_job_once_while_they_keep_dying": _PARSE_HOOK,
    "store.fencing.many_concurrent_reapers_move_each_job_once": _THREADS,
    "store.fencing.claims_racing_reapers_never_double_hand_out": _THREADS,
    "worker.thread_worker.run_returns_only_after_its_claimer_stopped": _THREADED_WORKER,
    "worker.thread_worker.async_handlers_that_raise_reuse_their_threads_loop": _THREADED_WORKER,
    "worker.thread_worker.an_outcome_set_as_the_grace_runs_out_is_written_not_released": (
        _THREADED_WORKER
    ),
    "store.pause.a_burst_worker_runs_nothing_on_a_paused_queue": _THREADED_WORKER,
    "store.pause.resume_wakes_a_blocked_claimer_at_once": _THREADS,
    "store.waits.current_job_progress_in_a_worker": _BLOCKING_WAIT,
    "store.waits.wait_many_in_order_with_every_finished_state": _BLOCKING_WAIT,
    "store.waits.wait_times_out_with_none": _BLOCKING_WAIT,
    "store.waits.wait_wakes_when_the_job_finishes": _BLOCKING_WAIT,
    "store.waits.a_big_batch_signals_in_entries_of_at_most_a_hundred_ids": _BLOCKING_WAIT,
    "store.waits.a_job_deleted_while_waited_for_is_gone_at_once": _BLOCKING_WAIT,
    "store.waits.wait_many_of_a_string_is_a_bad_argument": (
        "refused by the one _ops generator both transports run, before any step: "
        "the module's other cases block on the frozen clock, so it is not in the suite"
    ),
    "web.workflows.waiting_jobs_have_a_tab_and_a_job_links_its_parents_and_children": _WEB,
    "web.groups.queue_page_shows_limits_and_job_page_the_group": _WEB,
    "web.http.allowed_hosts_refuses_other_host_headers": _WEB,
    "web.http.scale_api_gives_an_autoscaler_the_backlog_behind_the_auth": _WEB,
    "web.pages.limits_page_lists_every_queue_with_any_limit_and_the_group_rate": _WEB,
    "web.pages.schedules_page_shows_the_kind_of_the_jobs_a_schedule_makes": _WEB,
    "web.workers.workers_page_says_how_long_ago_a_worker_was_seen_on_the_server_clock": _WEB,
    "web.http.job_page_shows_the_jobs_history_from_row_and_stream": _WEB,
    "web.pages.every_page_has_the_navigation_bar_marking_where_you_are": _WEB,
    "web.pages.workers_page_shows_each_workers_current_jobs": _WEB,
    "web.pages.queue_list_has_kind_group_and_progress_columns": _WEB,
    "web.pages.schedules_page_lists_every_queues_schedules": _WEB,
    "web.pages.limits_page_shows_limits_and_per_group_counts": _WEB,
    "web.pages.limits_page_shows_the_cost_in_the_window_next_to_the_claims": _WEB,
    "web.pages.the_dead_tab_counts_jobs_that_missed_their_deadline": _WEB,
    "web.pages.events_page_lists_newest_first_and_filters": _WEB,
    "web.pages.events_page_points_to_the_job_page_when_the_window_has_passed_the_job": _WEB,
    "web.pages.a_schedule_runs_now_from_its_page_when_actions_are_allowed": _WEB,
    "web.workers.overview_counts_workers_online_per_queue": _WEB,
    "web.workers.overview_draws_the_history_charts_and_dead_letter_growth": _WEB,
    "web.workers.workers_page_lists_each_worker_and_drops_the_dead": _WEB,
    "observe.metrics.a_lost_lease_is_counted": _THREADED_WORKER,
    "observe.metrics.an_installed_observer_is_the_default": _THREADED_WORKER,
    "observe.metrics.busy_handlers_are_counted_while_they_run": _THREADED_WORKER,
    "observe.metrics.threaded_worker_records_durations_waits_and_slots": _THREADED_WORKER,
    "web.http.actions_need_the_csrf_token_and_a_same_origin": _WEB,
    "web.http.actions_on_many_ids_report_refusals": _WEB,
    "web.http.auth": _WEB,
    "web.http.destructive_actions_ask_first": _WEB,
    "web.http.ids_that_need_quoting_work_everywhere": _WEB,
    "web.http.job_page_of_a_damaged_row_shows_what_is_stored": _WEB,
    "web.http.job_page_shows_every_field": _WEB,
    "web.http.metrics": _WEB,
    "web.http.mounts_under_any_path": _WEB,
    "web.http.overview_lists_queues_and_counts": _WEB,
    "web.http.queue_pages_through_the_index": _WEB,
    "web.http.read_only_refuses_every_post": _WEB,
    "web.http.run_a_scheduled_job_now": _WEB,
    "web.http.search_by_id_and_bounded_substring": _WEB,
    "web.workers.workers_page_names_every_queue_a_worker_serves": _WEB,
    "worker.tasks.a_call_is_stored_as_readable_json_named_by_kind": _TASKS,
    "worker.tasks.a_job_whose_payload_no_longer_fits_fails_its_attempt": _TASKS,
    "worker.tasks.a_plain_enqueue_of_a_tasks_kind_is_checked_like_the_tasks_own": _TASKS,
    "worker.tasks.arguments_that_do_not_fit_are_refused_and_nothing_is_written": _TASKS,
    "worker.tasks.async_tasks_run_on_the_threaded_worker": _TASKS,
    "worker.tasks.bad_task_declarations_are_refused": _TASKS,
    "worker.tasks.edits_of_a_tasks_jobs_are_checked_against_its_signature": _TASKS,
    "worker.tasks.a_fan_in_task_reads_its_parents_results_from_its_job": _TASKS,
    "worker.tasks.typed_values_round_trip_through_the_worker": _TASKS,
    "worker.tasks.wait_raises_for_a_failed_job_and_on_timeout": _TASKS,
    "worker.testing.a_burst_runs_a_dead_workers_expired_lease": _THREADED_WORKER,
    "worker.testing.drain_ends_dead_jobs_and_wakes_sleepers_but_leaves_signal_waits": _TESTING,
    "worker.testing.drain_runs_delayed_and_retried_jobs_without_waiting": _TESTING,
    "worker.testing.drain_stops_at_its_limit_and_needs_handlers": _TESTING,
    "worker.testing.drain_runs_a_keep_last_successor_after_its_holder": _TESTING,
    "worker.testing.jobs_lists_every_state_in_order_past_a_page": _TESTING,
    "web.http.edit_and_retry_a_dead_job_shows_the_diff_first": _WEB,
    "web.http.a_running_job_can_be_cancelled_and_group_rates_are_shown": _WEB,
    "web.filters.the_filter_is_in_the_url_and_carried_across_tabs": _WEB,
    "web.filters.an_age_filter_counts_by_the_index_and_acts_on_its_matches": _WEB,
    "web.filters.bulk_over_a_filter_needs_actions_allowed_a_token_and_a_filter": _WEB,
    "web.filters.cancel_and_run_now_every_match": _WEB,
}


CASES = suite.cases(*SUITE_MODULES, skip=lambda f: suite.case_name(f) in EXCLUDED, fixtures=None)


@pytest.fixture
def aq(r: Any, loop: asyncio.AbstractEventLoop) -> Iterator[leaseq.aio.Queue]:
    client = async_client(r)
    yield leaseq.aio.Queue(
        "emails",
        redis=client,
        keep_succeeded=60.0,
        backoff=leaseq.Backoff(base=1.0, cap=10.0, jitter=0.0),
    )
    loop.run_until_complete(client.aclose())


def test_the_suite_is_not_empty() -> None:
    assert len(CASES) >= 400


def _collected(tmp_path: Path) -> list[dict[str, Any]]:
    """Every item pytest collects under tests/ (see LEASEQ_LIST_SUITE in conftest)."""
    listing = tmp_path / "items.jsonl"
    env = {**os.environ, "LEASEQ_LIST_SUITE": str(listing)}
    env.pop("LEASEQ_BACKENDS", None)  # list both backends whatever this pass runs
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return [json.loads(line) for line in listing.read_text().splitlines()]


def test_every_sync_queue_case_runs_on_aio_or_is_excluded_with_a_reason(tmp_path: Path) -> None:
    """The sync queue cases (every collected test that uses the ``q`` fixture,
    whichever module holds it) minus EXCLUDED are exactly the aio cases, with
    as many parameter combinations each: a test that stops being re-run here
    (a new module, a new fixture, a filter) fails this instead of vanishing."""
    items = _collected(tmp_path)
    here = __name__
    sync: Counter[str] = Counter()
    on_aio: Counter[str] = Counter()
    for item in items:
        if item["check"] and item["func"] == f"{here}.test_shared_suite_on_aio":
            on_aio[_name(item["check"])] += 1
        elif item["uses_q"] and not item["func"].startswith(f"{here}."):
            sync[_name(item["func"])] += 1
    assert sync, "no sync queue case collected"
    stale = sorted(set(EXCLUDED) - set(sync))
    assert not stale, f"EXCLUDED names cases that do not exist (any more): {stale}"
    both = sorted(set(EXCLUDED) & set(on_aio))
    assert not both, f"excluded but run on aio all the same: {both}"
    wanted = {name: n for name, n in sync.items() if name not in EXCLUDED}
    dropped = sorted(set(wanted) - set(on_aio))
    assert not dropped, f"sync queue cases neither run on aio nor in EXCLUDED: {dropped}"
    assert dict(on_aio) == wanted, {
        name: (wanted.get(name), on_aio[name])
        for name in on_aio
        if wanted.get(name) != on_aio[name]
    }
    assert all(len(reason) > 20 for reason in EXCLUDED.values())


def _name(qualified: str) -> str:
    """'tests.store.test_jobs.test_enqueue_x' -> 'store.jobs.enqueue_x' (suite.case_name's form)."""
    module, _, func = qualified.rpartition(".")
    return suite.case_id(module, func)


@pytest.mark.parametrize(("check", "params"), CASES)
def test_shared_suite_on_aio(
    check: Callable[..., None],
    params: dict[str, Any],
    aq: leaseq.aio.Queue,
    r: Any,
    clock: Clock,
    loop: asyncio.AbstractEventLoop,
    request: pytest.FixtureRequest,
) -> None:
    suite.call(check, params, request, q=suite.SyncFacade(aq, r, loop), r=r, clock=clock)


# -- aio-only behaviour -----------------------------------------------------------------


def test_blocking_claim_wakes_on_enqueue(
    aq: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    async def scenario() -> tuple[leaseq.Lease | None, float]:
        started = loop.time()
        waiter = asyncio.ensure_future(aq.claim(ttl=5.0, block=5.0))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await aq.enqueue({"n": 1})
        lease = await asyncio.wait_for(waiter, 4.0)
        return lease, loop.time() - started

    lease, took = run(loop, scenario())
    assert lease is not None and lease.payload == {"n": 1}
    assert took < 3.0


def test_blocking_claim_times_out_empty(
    aq: leaseq.aio.Queue, loop: asyncio.AbstractEventLoop
) -> None:
    assert run(loop, aq.claim_many(3, ttl=1.0, block=0.05)) == []


def test_noscript_reload(aq: leaseq.aio.Queue, r: Any, loop: asyncio.AbstractEventLoop) -> None:
    run(loop, aq.enqueue({"n": 1}))
    r.script_flush()
    assert run(loop, aq.enqueue({"n": 2}, id="second")) == "second"
    assert run(loop, aq.stats()).pending == 2


def test_queues_and_from_url(redis_server: Any, loop: asyncio.AbstractEventLoop) -> None:
    sync = redis.Redis(port=redis_server.port)
    sync.flushall()

    async def scenario() -> list[str]:
        q = leaseq.aio.Queue.from_url(redis_server.url, "aio-url")
        await q.enqueue({"n": 1})
        names = await leaseq.aio.Queue.queues(q.redis)
        await q.redis.aclose()
        return names

    assert run(loop, scenario()) == ["aio-url"]
    with pytest.raises(leaseq.InvalidArgument):
        leaseq.aio.Queue.from_url("", "x")
    sync.close()


def test_redis_outage_is_server_unavailable(loop: asyncio.AbstractEventLoop) -> None:
    from redis.asyncio.retry import Retry as NoRetry
    from redis.backoff import NoBackoff

    from tests.support.servers import free_port

    client = aioredis.Redis(port=free_port(), retry=NoRetry(NoBackoff(), 0))
    q = leaseq.aio.Queue("x", redis=client)
    with pytest.raises(leaseq.ServerUnavailable):
        run(loop, q.enqueue({"n": 1}))
    run(loop, q.redis.aclose())


def test_aio_retry_all_dead_purge_and_reset_clock(r: Any) -> None:
    async def scenario() -> None:
        q = leaseq.aio.Queue("emails", redis=async_client(r), keep_succeeded=0)
        ids = await q.enqueue_many(range(5), ids=[f"j{i}" for i in range(5)])
        for lease in await q.claim_many(5):
            await q.fail(lease, "boom", dead=True)
        r.set(q.keys.job("not-a-hash"), "x")
        r.zadd(q.keys.dead, {"not-a-hash": 1})
        damaged: list[leaseq.DamagedRow] = []
        assert await q.retry_all_dead(damaged=damaged) == 5
        assert [d.job_id for d in damaged] == ["not-a-hash"]
        assert (await q.stats()).pending == 5
        damaged.clear()
        assert await q.purge("pending") == 5
        assert await q.purge("dead", damaged=damaged) == 0
        assert [d.job_id for d in damaged] == ["not-a-hash"]
        floor, now = await q.reset_clock()
        assert floor is not None and now > 0
        assert len(ids) == 5

    asyncio.run(scenario())
