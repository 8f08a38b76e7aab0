"""OpenTelemetry tracing (leaseq.observe.tracing): the traceparent an enqueue stores, and
the span each worker run makes, checked with the SDK's in-memory exporter on
fakeredis and a real server.

The ``q`` cases run on the async queue too (tests/transport/test_aio.py's SUITE_MODULES):
the facade runs each call in a task that copies the caller's context, so the
current span reaches the async enqueue as it does the sync one.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import fakeredis
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import SpanKind, StatusCode

import leaseq
import leaseq.aio
from leaseq.cli.main import main
from leaseq.observe import tracing
from tests.support.backends import async_client
from tests.support.servers import RedisServer

ROOT = Path(__file__).resolve().parents[2]


TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}\Z")


class _ThisTestOnly(Sampler):
    """Records spans only during the test that last called ``exported()``, so
    the rest of the suite (workers running thousands of jobs) pays no SDK span."""

    test = ""

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: Any = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        now = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        if self.test and now == self.test:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)
        return SamplingResult(Decision.DROP)

    def get_description(self) -> str:
        return "tests.observe.test_tracing: this test only"


_sampler = _ThisTestOnly()


_exporter: InMemorySpanExporter | None = None


def exported() -> InMemorySpanExporter:
    """The process's in-memory exporter, emptied, recording for the running test
    only (the SDK takes one global provider per process: the first call sets it)."""
    global _exporter
    if _exporter is None:
        exporter = InMemorySpanExporter()
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider(sampler=_sampler)
            trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _exporter = exporter
    _sampler.test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    _exporter.clear()
    return _exporter


def tracer() -> trace.Tracer:
    return trace.get_tracer("tests.observe.test_tracing")


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def hex_ids(traceparent: str) -> tuple[int, int]:
    _, trace_id, span_id, _ = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


def stored(q: Any, job_id: str) -> str | None:
    raw = q.redis.hget(q.keys.job(job_id), "traceparent")
    return None if raw is None else raw.decode()


# -- enqueue (sync and, through test_aio, async) ----------------------------------------


def test_enqueue_in_a_span_stores_the_traceparent_of_its_send_span(q: leaseq.Queue) -> None:
    spans = exported()
    with tracer().start_as_current_span("request") as outer:
        job_id = q.enqueue({"to": "a@b.c"})
    value = stored(q, job_id)
    assert value is not None and TRACEPARENT.match(value), value
    (send,) = named(spans, f"send {q.name}")
    assert send.kind == SpanKind.PRODUCER
    assert send.parent is not None and send.parent.span_id == outer.get_span_context().span_id
    assert hex_ids(value) == (outer.get_span_context().trace_id, send.context.span_id)
    assert dict(send.attributes or {}) == {
        "messaging.system": "leaseq",
        "messaging.destination.name": q.name,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.message.id": job_id,
    }
    job = q.get(job_id)
    assert job is not None and job.traceparent == value
    lease = q.claim(ttl=5.0)
    assert lease is not None and lease.traceparent == value


def test_no_current_span_writes_no_field_and_makes_no_span(q: leaseq.Queue) -> None:
    spans = exported()
    job_id = q.enqueue({"n": 1})
    ids = q.enqueue_many([{"n": 2}, {"n": 3}])
    for i in (job_id, *ids):
        assert stored(q, i) is None
        job = q.get(i)
        assert job is not None and job.traceparent is None
    lease = q.claim(ttl=5.0)
    assert lease is not None and lease.traceparent is None
    assert not spans.get_finished_spans()


def test_an_invalid_current_span_counts_as_none(q: leaseq.Queue) -> None:
    spans = exported()
    with trace.use_span(trace.INVALID_SPAN):
        job_id = q.enqueue({})
    assert stored(q, job_id) is None
    assert not spans.get_finished_spans()


def test_enqueue_many_in_a_span_stores_one_traceparent_on_every_row(q: leaseq.Queue) -> None:
    spans = exported()
    with tracer().start_as_current_span("batch"):
        ids = q.enqueue_many([{"i": i} for i in range(2500)], delay=0)  # three script calls
    (send,) = named(spans, f"send {q.name}")
    assert (send.attributes or {})["messaging.batch.message_count"] == 2500
    assert "messaging.message.id" not in (send.attributes or {})
    want = f"00-{send.context.trace_id:032x}-{send.context.span_id:016x}-"
    assert {(stored(q, i) or "")[:-2] for i in ids} == {want}
    leases = q.claim_many(1000, ttl=5.0)
    assert len(leases) == 1000 and all(lease.traceparent for lease in leases)


def test_a_delayed_or_deduplicated_enqueue_keeps_its_rule(q: leaseq.Queue) -> None:
    exported()
    with tracer().start_as_current_span("later"):
        later = q.enqueue({}, delay=60.0)
        first = stored(q, later)
        assert q.enqueue({}, id=later) == later  # the id exists: nothing changes
    assert first is not None and stored(q, later) == first
    job = q.get(later)
    assert job is not None and job.state == leaseq.State.SCHEDULED


def test_a_rejected_enqueue_writes_nothing_and_marks_its_span(q: leaseq.Queue) -> None:
    spans = exported()
    with tracer().start_as_current_span("bad"), pytest.raises(leaseq.InvalidPayload):
        q.enqueue_many([{"ok": 1}, {"bad": object()}])
    assert q.stats().pending == 0
    (send,) = named(spans, f"send {q.name}")
    assert send.status.status_code == StatusCode.ERROR
    assert (send.attributes or {})["error.type"] == "InvalidPayload"


def test_a_damaged_stored_traceparent_still_claims(q: leaseq.Queue) -> None:
    job_id = q.enqueue({})
    q.redis.hset(q.keys.job(job_id), "traceparent", "not a traceparent")
    lease = q.claim(ttl=5.0)
    assert lease is not None and lease.traceparent == "not a traceparent"
    q.complete(lease)


@pytest.mark.parametrize("field", ["traceparent", "kind"])
def test_a_stored_text_field_of_non_utf8_bytes_still_claims(q: leaseq.Queue, field: str) -> None:
    # The claim script moves every job of the batch to active before the reply is
    # parsed: one undecodable field must not lose the whole batch's leases.
    ids = q.enqueue_many([{"n": n} for n in range(5)])
    q.redis.hset(q.keys.job(ids[2]), field, b"\xff\xfe junk")
    leases = q.claim_many(5, ttl=5.0)
    assert sorted(lease.id for lease in leases) == sorted(ids)
    for lease in leases:
        q.complete(lease)
    with pytest.raises(leaseq.DamagedRow, match=field):  # get names it, never crashes
        q.get(ids[2])
    damaged: list[Any] = []
    page = q.ls("succeeded", damaged=damaged)
    assert len(page) == 4 and [d.job_id for d in damaged] == [ids[2]]


# -- the sharded queue ---------------------------------------------------------------------


def test_sharded_enqueue_many_stores_the_traceparent_on_every_shard(r: Any) -> None:
    sq = leaseq.ShardedQueue("fan", shards=4, redis=r)
    spans = exported()
    with tracer().start_as_current_span("fan-out"):
        ids = sq.enqueue_many([{"i": i} for i in range(200)])
        one = sq.enqueue({"i": "one"})
    sends = named(spans, "send fan")
    assert len(sends) == 2  # one per call, whatever the shards
    values = set()
    for job_id in [*ids, one]:
        job = sq.get(job_id)
        assert job is not None and job.traceparent is not None
        values.add(job.traceparent)
    assert len(values) == 2


# -- the threaded worker ---------------------------------------------------------------------


@pytest.fixture
def wq(r: Any) -> leaseq.Queue:
    return leaseq.Queue("mail", redis=r, backoff=0.0, max_attempts=2)


def _run(q: leaseq.Queue, handler: Any, **kwargs: Any) -> None:
    leaseq.Worker(q, handler, concurrency=2, ttl=5.0, handle_signals=False, **kwargs).run(
        burst=True
    )


def _inner(lease: leaseq.Lease) -> str:
    with tracer().start_as_current_span("inside the handler"):
        return "done"


def _process_span(spans: InMemorySpanExporter, queue: str) -> ReadableSpan:
    (span,) = named(spans, f"process {queue}")
    return span


def test_the_worker_span_links_to_the_enqueuer_by_default(wq: leaseq.Queue) -> None:
    spans = exported()
    with tracer().start_as_current_span("request"):
        job_id = wq.enqueue({}, kind="mailer")
    (send,) = named(spans, "send mail")
    _run(wq, _inner)
    span = _process_span(spans, "mail")
    assert span.kind == SpanKind.CONSUMER
    assert span.parent is None and span.context.trace_id != send.context.trace_id
    (link,) = span.links
    assert (link.context.trace_id, link.context.span_id) == (
        send.context.trace_id,
        send.context.span_id,
    )
    assert link.context.is_remote
    attrs = dict(span.attributes or {})
    assert attrs == {
        "messaging.system": "leaseq",
        "messaging.destination.name": "mail",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.message.id": job_id,
        "messaging.client.id": wq.worker_id,
        "leaseq.attempt": 1,
        "leaseq.kind": "mailer",
        "leaseq.outcome": "succeeded",
    }
    assert span.status.status_code == StatusCode.UNSET
    (inner,) = named(spans, "inside the handler")
    assert inner.parent is not None and inner.parent.span_id == span.context.span_id


def test_trace_parent_parent_makes_the_worker_span_a_child(wq: leaseq.Queue) -> None:
    spans = exported()
    with tracer().start_as_current_span("request"):
        wq.enqueue({})
    (send,) = named(spans, "send mail")
    _run(wq, _inner, trace_parent="parent")
    span = _process_span(spans, "mail")
    assert not span.links
    assert span.parent is not None and span.parent.span_id == send.context.span_id
    assert span.context.trace_id == send.context.trace_id


def test_a_raising_handler_sets_error_and_each_attempt_has_its_span(wq: leaseq.Queue) -> None:
    spans = exported()
    with tracer().start_as_current_span("request"):
        wq.enqueue({})

    def boom(lease: leaseq.Lease) -> None:
        raise ValueError(f"boom at {lease.attempt}")

    _run(wq, boom)
    runs = sorted(named(spans, "process mail"), key=lambda s: s.start_time or 0)
    assert [(s.attributes or {})["leaseq.attempt"] for s in runs] == [1, 2]
    assert [(s.attributes or {})["leaseq.outcome"] for s in runs] == ["retried", "dead"]
    for s in runs:
        assert s.status.status_code == StatusCode.ERROR
        assert "ValueError: boom at" in (s.status.description or "")
        assert (s.attributes or {})["error.type"] == "ValueError"
        (event,) = [e for e in s.events if e.name == "exception"]
        assert (event.attributes or {})["exception.type"] == "ValueError"
        assert len(s.links) == 1  # every attempt links to the same enqueue


def test_a_run_past_its_timeout_ends_its_span_with_the_timeout(wq: leaseq.Queue) -> None:
    # The attempt is failed by the timeout while the thread still runs; the
    # span ends when the thread returns, with the timeout's outcome, not the
    # handler's late "fine".
    spans = exported()
    with tracer().start_as_current_span("request"):
        wq.enqueue({}, timeout=0.2)

    def slow(lease: leaseq.Lease) -> str:
        time.sleep(0.6)  # the job's work, past its timeout
        return "fine"

    _run(wq, slow)  # returns with the threads still running: their spans end later
    deadline = time.monotonic() + 10.0
    while len(named(spans, "process mail")) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    runs = sorted(named(spans, "process mail"), key=lambda s: s.start_time or 0)
    assert [(s.attributes or {})["leaseq.outcome"] for s in runs] == ["retried", "dead"]
    for s in runs:
        assert s.status.status_code == StatusCode.ERROR
        assert "timed out after 0.2 s" in (s.status.description or "")


def test_retry_and_dead_from_the_handler_are_recorded(wq: leaseq.Queue) -> None:
    spans = exported()
    wq.enqueue({"then": "dead"})

    def handler(lease: leaseq.Lease) -> None:
        raise leaseq.Dead("no such mailbox")

    _run(wq, handler)
    span = _process_span(spans, "mail")
    assert (span.attributes or {})["leaseq.outcome"] == "dead"
    assert span.status.description == "Dead: no such mailbox"


def test_a_job_without_traceparent_gets_a_span_of_its_own(wq: leaseq.Queue) -> None:
    spans = exported()
    wq.enqueue({})
    job_id = wq.enqueue({})
    wq.redis.hset(wq.keys.job(job_id), "traceparent", "00-" + "0" * 32 + "-" + "1" * 16 + "-01")
    _run(wq, lambda lease: None)
    runs = named(spans, "process mail")
    assert len(runs) == 2
    for span in runs:
        assert span.parent is None and not span.links
        assert (span.attributes or {})["leaseq.outcome"] == "succeeded"


def test_a_bad_trace_parent_is_refused(wq: leaseq.Queue) -> None:
    with pytest.raises(leaseq.InvalidArgument, match="trace_parent"):
        leaseq.Worker(wq, lambda lease: None, trace_parent="child")
    with pytest.raises(leaseq.InvalidArgument, match="trace_parent"):
        leaseq.aio.Worker(
            leaseq.aio.Queue("mail", redis=fakeredis.FakeAsyncRedis()), _inner, trace_parent=""
        )


def test_check_traceparent() -> None:
    good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert tracing.check_traceparent(good) == good
    for bad in (
        "",
        good.upper(),
        "01" + good[2:],
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01",
        good + "-extra",
        good[:-1],
    ):
        with pytest.raises(leaseq.InvalidArgument):
            tracing.check_traceparent(bad)


# -- the async worker --------------------------------------------------------------------------


def _aio_scenario(r: Any, handler: Any, trace_parent: str = "link") -> InMemorySpanExporter:
    spans = exported()

    async def scenario() -> None:
        client = async_client(r)
        aq = leaseq.aio.Queue("amail", redis=client, backoff=0.0, max_attempts=2)
        try:
            with tracer().start_as_current_span("request"):
                await aq.enqueue({}, kind="k")
            await leaseq.aio.Worker(aq, handler, ttl=5.0, trace_parent=trace_parent).run(burst=True)
        finally:
            await client.aclose()

    asyncio.run(scenario())
    return spans


async def _async_inner(lease: leaseq.Lease) -> str:
    with tracer().start_as_current_span("inside the handler"):
        await asyncio.sleep(0)
        return "done"


@pytest.mark.parametrize("handler", [_async_inner, _inner], ids=["async-def", "plain-def"])
def test_aio_worker_links_by_default_and_nests_the_handlers_spans(r: Any, handler: Any) -> None:
    spans = _aio_scenario(r, handler)
    (send,) = named(spans, "send amail")
    span = _process_span(spans, "amail")
    assert span.kind == SpanKind.CONSUMER and span.parent is None
    (link,) = span.links
    assert link.context.span_id == send.context.span_id
    attrs = dict(span.attributes or {})
    assert attrs["leaseq.outcome"] == "succeeded" and attrs["leaseq.kind"] == "k"
    assert attrs["messaging.destination.name"] == "amail"
    (inner,) = named(spans, "inside the handler")
    assert inner.parent is not None and inner.parent.span_id == span.context.span_id


def test_aio_worker_parent_mode_and_errors(r: Any) -> None:
    async def boom(lease: leaseq.Lease) -> None:
        raise RuntimeError("down")

    spans = _aio_scenario(r, boom, trace_parent="parent")
    (send,) = named(spans, "send amail")
    runs = sorted(named(spans, "process amail"), key=lambda s: s.start_time or 0)
    assert [(s.attributes or {})["leaseq.outcome"] for s in runs] == ["retried", "dead"]
    for s in runs:
        assert s.parent is not None and s.parent.span_id == send.context.span_id
        assert not s.links
        assert s.status.status_code == StatusCode.ERROR
        assert (s.attributes or {})["error.type"] == "RuntimeError"


def test_aio_worker_span_of_a_cancelled_timeout(r: Any) -> None:
    async def slow(lease: leaseq.Lease) -> None:
        await asyncio.sleep(30)  # cancelled at its timeout

    spans = exported()

    async def scenario() -> None:
        client = async_client(r)
        aq = leaseq.aio.Queue("amail", redis=client, backoff=0.0, max_attempts=1)
        try:
            with tracer().start_as_current_span("request"):
                await aq.enqueue({}, timeout=0.1)
            await leaseq.aio.Worker(aq, slow, ttl=5.0).run(burst=True)
        finally:
            await client.aclose()

    asyncio.run(scenario())
    (span,) = named(spans, "process amail")
    assert (span.attributes or {})["leaseq.outcome"] == "dead"
    assert span.status.status_code == StatusCode.ERROR
    assert "timed out after 0.1 s" in (span.status.description or "")


# -- the real server: a big batch, the CLI ----------------------------------------------------


def test_enqueue_many_of_10000_jobs_in_a_span(redis_server: RedisServer) -> None:
    import redis

    client = redis.Redis(port=redis_server.port)
    client.flushall()
    q = leaseq.Queue("big", redis=client)
    spans = exported()
    with tracer().start_as_current_span("import"):
        ids = q.enqueue_many([{"i": i} for i in range(10_000)])
    (send,) = named(spans, "send big")
    assert (send.attributes or {})["messaging.batch.message_count"] == 10_000
    seen: set[str | None] = set()
    got = 0
    while leases := q.claim_many(1000, ttl=60.0):
        got += len(leases)
        seen.update(lease.traceparent for lease in leases)
        assert all(isinstance(lease.payload["i"], int) for lease in leases)
    assert got == len(ids) == 10_000
    (value,) = seen
    assert value is not None and hex_ids(value)[1] == send.context.span_id
    client.close()


def test_cli_show_prints_it_and_worker_takes_trace_parent(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    import redis

    client = redis.Redis(port=redis_server.port)
    client.flushall()
    q = leaseq.Queue("clit", redis=client)
    spans = exported()
    with tracer().start_as_current_span("request"):
        job_id = q.enqueue({})
    value = stored(q, job_id)

    def run(*args: str) -> int:
        try:
            main(["--url", redis_server.url, *args])
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    assert run("show", "clit", job_id) == 0
    out = capsys.readouterr().out
    assert "traceparent" in out and str(value) in out
    assert (
        run("worker", "clit", "tests.support.handlers:echo", "--burst", "--trace-parent", "bogus")
        != 0
    )
    assert "bogus" in capsys.readouterr().err
    assert (
        run("worker", "clit", "tests.support.handlers:echo", "--burst", "--trace-parent", "parent")
        == 0
    )
    (send,) = named(spans, "send clit")
    span = _process_span(spans, "clit")
    assert span.parent is not None and span.parent.span_id == send.context.span_id
    client.close()


# -- without opentelemetry -------------------------------------------------------------------


def test_leaseq_works_with_opentelemetry_not_installed() -> None:
    """A subprocess where ``import opentelemetry`` fails: enqueue in what would be a
    span, claim, run both workers; nothing is stored and nothing breaks."""
    code = textwrap.dedent(
        """
        import asyncio, sys
        sys.modules["opentelemetry"] = None  # import opentelemetry -> ImportError
        import fakeredis, leaseq, leaseq.aio
        from leaseq.observe import tracing
        assert not tracing.available()
        server = fakeredis.FakeServer()
        q = leaseq.Queue("plain", redis=fakeredis.FakeRedis(server=server))
        ids = [q.enqueue({"n": 1}), *q.enqueue_many([{"n": 2}, {"n": 3}])]
        lease = q.claim(ttl=5.0)
        assert lease is not None and lease.traceparent is None
        q.release(lease)
        w = leaseq.Worker(q, lambda lease: "ok", handle_signals=False, trace_parent="parent")
        assert w._tracer is None
        w.run(burst=True)
        assert all(q.get(i).state == leaseq.State.SUCCEEDED for i in ids)
        assert all(q.get(i).traceparent is None for i in ids)

        async def aio():
            aq = leaseq.aio.Queue("plain2", redis=fakeredis.FakeAsyncRedis(server=server))
            await aq.enqueue({})
            async def handler(lease):
                return 1
            assert await leaseq.aio.Worker(aq, handler, ttl=5.0).run(burst=True) == 1
        asyncio.run(aio())
        assert "opentelemetry.trace" not in sys.modules
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_no_tracer_provider_means_no_span_work_until_one_is_set() -> None:
    """A subprocess with the API but no provider: a linking worker makes no span per
    job (the API's would be invalid), a parent-mode one keeps the enqueuer's context
    current; once an SDK provider is set, spans start within a second."""
    code = textwrap.dedent(
        """
        import time
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        import leaseq
        from leaseq.observe.tracing import JobTracer
        parent = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
        lease = leaseq.Lease(id="j", queue="q", attempt=1, max_attempts=3, payload=None,
                             deadline=0.0, enqueued_at=0.0, worker="w", traceparent=parent)
        link = JobTracer.make("q", "w", "link")
        assert link is not None and link.start(lease) is None
        child = JobTracer.make("q", "w", "parent").start(lease)
        assert child is not None  # the enqueuer's trace stays current in the handler
        assert format(trace.get_current_span().get_span_context().trace_id, "032x") == "a" * 32
        child.finish(None, None, lost=False)
        trace.set_tracer_provider(TracerProvider())
        give_up = time.monotonic() + 5.0
        while (span := link.start(lease)) is None:
            assert time.monotonic() < give_up, "no span after the provider was set"
            time.sleep(0.01)
        assert span._span.is_recording()
        span.finish(None, None, lost=False)
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


def test_outcome_names() -> None:
    from leaseq.work.outcomes import RELEASE, Outcome

    lease = leaseq.Lease(
        id="j",
        queue="q",
        attempt=1,
        max_attempts=2,
        payload={},
        deadline=0.0,
        enqueued_at=0.0,
        worker="w",
    )
    last = leaseq.Lease(
        id="j",
        queue="q",
        attempt=2,
        max_attempts=2,
        payload={},
        deadline=0.0,
        enqueued_at=0.0,
        worker="w",
    )
    name = tracing.outcome_name
    assert name(Outcome("complete"), lease, False) == "succeeded"
    assert name(Outcome("retry"), lease, False) == "retried"
    assert name(Outcome("retry"), last, False) == "dead"  # fail dead-letters at max_attempts
    assert name(Outcome("dead"), lease, False) == "dead"
    assert name(RELEASE, lease, False) == name(None, lease, False) == "released"
    assert name(Outcome("complete"), lease, True) == "lost"
    # A sleep (current_job().sleep) ends the attempt at its last one too: not dead.
    assert name(Outcome("suspend", retry_in=1.0, error="nap"), last, False) == "suspended"


def test_the_dashboards_job_page_shows_the_traceparent(wq: leaseq.Queue, r: Any) -> None:
    from starlette.testclient import TestClient

    from leaseq.web import create_app

    exported()
    with tracer().start_as_current_span("request"):
        job_id = wq.enqueue({})
    value = stored(wq, job_id)
    html = TestClient(create_app(r)).get(f"/queues/mail/jobs/{job_id}").text
    assert 'data-field="traceparent"' in html and f"{value}" in html
