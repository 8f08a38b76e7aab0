"""Model-based test: random sequences of every transition against a tiny pure-Python model.

A hypothesis state machine drives enqueue (with parents, too), claim, extend,
complete, fail, release, reap, cancel, retry_dead and the clock on fakeredis (time frozen by
freezegun, which fakeredis's TIME follows). The model predicts each reply
exactly — which job a claim hands out, which lease calls are refused — and
after every step the invariants below are checked against what Redis holds:

- each job id is in exactly the one index that matches its row's ``state``
  (an ungrouped pending job of priority 0: the ``ready`` LIST, whose entries,
  the stale ones a cancel leaves too, are exactly the model's, and meta
  ``ready_stale`` counts its stale ones);
- the ``active`` score equals the row's ``lease_until``;
- ``attempts`` never decreases and never exceeds ``max_attempts``;
- a stale token is always refused and changes nothing;
- a job with parents waits until they are settled, then runs (or, under
  ``on_parent_failure="cancel"``, is cancelled with its waiting children) in
  the very call that finishes its last parent;
- with limits, pauses and fair groups on: a claim never takes the
  queue past ``concurrency`` nor a group past ``group_concurrency``, a paused
  queue leases nothing, claims follow the groups' round-robin exactly, and
  the per-group active counts in Redis match the rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import fakeredis
import pytest
from freezegun import freeze_time
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import leaseq

BACKOFF_MS = 2000
FINISHED = ("succeeded", "dead", "cancelled")


KEEP_MS = 3_600_000  # far longer than any run's clock moves, so rows never expire here


QUEUE_MAX_ATTEMPTS = 3


INDEXES = ("waiting", "pending", "scheduled", "active", "succeeded", "dead", "cancelled")


@dataclass
class MJob:
    """What the model believes one row holds."""

    id: str
    priority: int
    attempts: int = 0
    max_attempts: int = QUEUE_MAX_ATTEMPTS
    state: str = "pending"
    seq: int = 0
    run_at: int | None = None
    lease_until: int | None = None
    claimed_at: int | None = None
    group: str | None = None
    history: list[int] = field(default_factory=list)
    waits_on: set[str] = field(default_factory=set)
    """Parents whose outcome it still waits for (their finish settles it)."""
    left: int = 0
    policy: str = "cancel"
    delay_ms: int = 0


class LeaseqModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.freezer = freeze_time("2026-01-01 00:00:00")
        self.frozen = self.freezer.start()
        self.r = fakeredis.FakeRedis(server=fakeredis.FakeServer())
        self.q = leaseq.Queue(
            "model",
            redis=self.r,
            max_attempts=QUEUE_MAX_ATTEMPTS,
            backoff=BACKOFF_MS / 1000,
            keep_succeeded=KEEP_MS / 1000,
        )
        self.now = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms
        self.jobs: dict[str, MJob] = {}
        self.seq = 0
        self.leases: list[leaseq.Lease] = []
        # Global limits: concurrency, (rate, per_ms), claim times in the span
        self.concurrency: int | None = None
        self.rate: tuple[int, int] | None = None
        self.claim_times: list[int] = []
        self.paused = False
        # Fair groups: each group's ready zset (with the stale entries a cancel
        # leaves), the rotation (group -> turn), held groups, the ungrouped turn.
        self.group_cap: int | None = None
        self.gz: dict[str, set[tuple[int, int, str]]] = {}
        self.rotation: dict[str, int] = {}
        self.held: set[str] = set()
        self.gseq = 0
        self.gturn = 0
        # LIST ready: ungrouped jobs of priority 0 in FIFO order, with the stale
        # entries a cancel leaves (lib/unready.lua) until a claim pops them.
        self.ready: list[str] = []

    def teardown(self) -> None:
        self.freezer.stop()

    # -- model helpers --------------------------------------------------------

    def push_pending(self, job: MJob) -> None:
        self.seq += 1
        job.state, job.seq = "pending", self.seq
        if job.group is not None:
            self.gz.setdefault(job.group, set()).add((job.priority, job.seq, job.id))
            self.join(job.group)
        elif job.priority == 0:
            self.ready.append(job.id)

    def join(self, group: str) -> None:
        """ZADD groups NX: a group not held joins the rotation at the back."""
        if group not in self.held:
            self.gseq += 1
            self.rotation.setdefault(group, self.gseq)

    def group_active(self, group: str) -> int:
        return sum(1 for j in self.jobs.values() if j.state == "active" and j.group == group)

    def lease_ends(self, job: MJob) -> None:
        """group_done: call while the job is no longer active."""
        g = job.group
        if g is None or g not in self.held:
            return
        if self.group_cap is not None and self.group_active(g) >= self.group_cap:
            return
        self.held.discard(g)
        if self.gz.get(g):
            self.gseq += 1
            self.rotation.setdefault(g, self.gseq)

    def listed(self, job_id: str) -> bool:
        """Whether an entry of LIST ready is its job's: pending, ungrouped, priority 0
        (any other is stale, dropped when popped: lib/take_ready.lua)."""
        job = self.jobs[job_id]
        return job.state == "pending" and job.group is None and job.priority == 0

    def next_ungrouped(self) -> MJob | None:
        """The ungrouped path (and the rotation's ungrouped turn): LIST ready's head
        first, its stale entries dropped until a live one, then pending's lowest score
        (ungrouped jobs of priority > 0)."""
        while self.ready:
            job_id = self.ready.pop(0)
            if self.listed(job_id):
                return self.jobs[job_id]
        ungrouped = sorted(
            (j.priority, j.seq, j.id)
            for j in self.jobs.values()
            if j.state == "pending" and j.group is None and j.priority > 0
        )
        return self.jobs[ungrouped[0][2]] if ungrouped else None

    def next_job(self) -> MJob | None:
        """Which job claim.lua leases next (rotate_groups, then the ungrouped path)."""
        while self.rotation:
            g = min(self.rotation, key=lambda name: self.rotation[name])
            ungrouped = bool(self.ready) or any(
                j.state == "pending" and j.group is None and j.priority > 0
                for j in self.jobs.values()
            )
            if ungrouped and self.gturn <= self.rotation[g]:
                self.gseq += 1
                self.gturn = self.gseq
                found = self.next_ungrouped()
                if found is not None:
                    return found
                continue  # only stale entries: the turn is spent; the group's comes next
            if self.group_cap is not None and self.group_active(g) >= self.group_cap:
                del self.rotation[g]
                self.held.add(g)
                continue
            ready = self.gz.get(g, set())
            found = None
            if ready:
                entry = min(ready)
                ready.discard(entry)
                if self.jobs[entry[2]].state == "pending":
                    found = self.jobs[entry[2]]
            if not ready:
                del self.rotation[g]
                self.gz.pop(g, None)
            else:
                self.gseq += 1
                self.rotation[g] = self.gseq
            if found is not None:
                return found
        return self.next_ungrouped()

    def dead(self, job: MJob) -> None:
        job.state, job.lease_until, job.run_at = "dead", None, None
        self.settle(job, "dead")

    def settle(self, parent: MJob, how: str) -> None:
        """lib/job_finished.lua: breadth first, each parent's waiting children in id order."""
        work = [(parent, how)]
        while work:
            p, p_how = work.pop(0)
            kids = sorted(
                j.id for j in self.jobs.values() if j.state == "waiting" and p.id in j.waits_on
            )
            for kid in kids:
                child = self.jobs[kid]
                child.waits_on.discard(p.id)
                if p_how == "succeeded" or child.policy == "run":
                    child.left -= 1
                    if child.left <= 0:
                        if child.delay_ms > 0:
                            child.state, child.run_at = "scheduled", self.now + child.delay_ms
                        else:
                            self.push_pending(child)
                else:
                    child.state, child.run_at = "cancelled", None
                    work.append((child, "cancelled"))

    def sweep(self) -> None:
        """What claim (and reap) do first: promote due jobs, reap expired leases."""
        due = sorted((j.run_at, j.id) for j in self.jobs.values() if j.state == "scheduled")
        for run_at, job_id in due:
            if run_at is not None and run_at <= self.now:
                job = self.jobs[job_id]
                job.run_at = None
                self.push_pending(job)
        self.reap_model()

    def reap_model(self) -> tuple[int, int]:
        expired = sorted(
            (j.lease_until, j.id)
            for j in self.jobs.values()
            if j.state == "active" and j.lease_until is not None and j.lease_until <= self.now
        )
        requeued = died = 0
        for _, job_id in expired:
            job = self.jobs[job_id]
            if job.attempts >= job.max_attempts:
                job.state = "reaping"
                self.lease_ends(job)  # reap_expired: group_done, then dead_letter
                self.dead(job)
                died += 1
            else:
                job.lease_until = None
                job.state = "reaped"
                self.lease_ends(job)
                self.push_pending(job)
                requeued += 1
        return requeued, died

    def holds(self, lease: leaseq.Lease) -> bool:
        job = self.jobs[lease.id]
        return job.state == "active" and job.attempts == lease.attempt

    def pick(self, index: int) -> leaseq.Lease:
        return self.leases[index % len(self.leases)]

    def snapshot(self) -> dict[str, Any]:
        return (
            {k: self.r.hgetall(k) for k in sorted(self.r.keys("*job:*"))}
            | {
                name: self.r.zrange(getattr(self.q.keys, name), 0, -1, withscores=True)
                for name in INDEXES
            }
            | {"ready": self.r.lrange(self.q.keys.ready, 0, -1)}
        )

    # -- rules ------------------------------------------------------------------

    @rule(
        priority=st.integers(0, 2),
        delay=st.sampled_from([None, 0.0, 1.5, 5.0]),
        max_attempts=st.one_of(st.none(), st.integers(1, 3)),
        group=st.sampled_from([None, "a", "b"]),
        parents=st.lists(st.integers(0, 1000), max_size=3),
        policy=st.sampled_from(["cancel", "run"]),
    )
    def enqueue(
        self,
        priority: int,
        delay: float | None,
        max_attempts: int | None,
        group: str | None,
        parents: list[int],
        policy: str,
    ) -> None:
        # An id from the step count, not a random one: hypothesis replays
        # a run and needs it to go the same way (sorted(self.jobs) below).
        known = sorted(self.jobs)
        chosen = list(dict.fromkeys(known[i % len(known)] for i in parents)) if known else []
        job_id = self.q.enqueue(
            {"n": len(self.jobs)},
            id=f"j{len(self.jobs):04d}",
            priority=priority,
            delay=delay,
            max_attempts=max_attempts,
            group=group,
            depends_on=chosen or None,
            on_parent_failure=policy,  # type: ignore[typeddict-item]
        )
        assert job_id not in self.jobs
        job = MJob(job_id, priority, max_attempts=max_attempts or QUEUE_MAX_ATTEMPTS, group=group)
        self.jobs[job_id] = job
        job.policy, job.delay_ms = policy, math.ceil((delay or 0) * 1000)
        states = [self.jobs[p].state for p in chosen]
        failed = any(s in ("dead", "cancelled") for s in states)
        job.waits_on = {p for p in chosen if self.jobs[p].state not in FINISHED}
        job.left = len(job.waits_on)
        if failed and policy == "cancel":
            job.state, job.waits_on = "cancelled", set()
        elif job.left > 0:
            job.state = "waiting"
        elif delay:
            job.state, job.run_at = "scheduled", self.now + math.ceil(delay * 1000)
        else:
            self.push_pending(job)

    @precondition(lambda self: self.jobs)
    @rule(index=st.integers(0, 1000))
    def enqueue_existing_id(self, index: int) -> None:
        job_id = sorted(self.jobs)[index % len(self.jobs)]
        before = self.snapshot()
        assert self.q.enqueue({"dup": True}, id=job_id, priority=0) == job_id
        assert self.snapshot() == before

    @rule(ttl=st.sampled_from([0.5, 1.0, 4.0]), n=st.sampled_from([1, 1, 3, 8]))
    def claim(self, ttl: float, n: int) -> None:
        self.sweep()
        if self.paused:
            assert self.q.claim_many(n, ttl=ttl) == []  # a paused queue leases nothing
            return
        if self.rate is not None:  # claim.lua trims the span on every claim
            self.claim_times = [t for t in self.claim_times if t > self.now - self.rate[1]]
        active = sum(1 for j in self.jobs.values() if j.state == "active")
        allowed = n
        if self.concurrency is not None:
            allowed = min(allowed, max(0, self.concurrency - active))
        if self.rate is not None:
            allowed = min(allowed, max(0, self.rate[0] - len(self.claim_times)))
        leases = self.q.claim_many(n, ttl=ttl)
        picked: list[MJob] = []
        for _ in range(allowed):  # a limit holds the rest back
            job = self.next_job()
            if job is None:
                break
            job.attempts += 1
            job.state = "active"
            job.claimed_at = self.now
            job.lease_until = self.now + math.ceil(ttl * 1000)
            picked.append(job)
        assert [lease.id for lease in leases] == [job.id for job in picked]
        for lease, job in zip(leases, picked, strict=True):
            assert lease.attempt == job.attempts
            assert lease.deadline == job.lease_until / 1000
            self.leases.append(lease)
            if self.rate is not None:
                self.claim_times.append(self.now)
        if self.concurrency is not None and picked:
            assert active + len(picked) <= self.concurrency
        if self.group_cap is not None:
            for job in picked:
                assert job.group is None or self.group_active(job.group) <= self.group_cap

    @rule()
    def pause(self) -> None:
        assert self.q.pause() is (not self.paused)
        self.paused = True

    @rule()
    def resume(self) -> None:
        assert self.q.resume() is self.paused
        self.paused = False

    @rule(
        concurrency=st.sampled_from([None, 1, 2]),
        rate=st.sampled_from([None, (1, 5.0), (2, 10.0)]),
        group_cap=st.sampled_from([None, 1, 2]),
    )
    def set_limits(
        self, concurrency: int | None, rate: tuple[int, float] | None, group_cap: int | None
    ) -> None:
        if rate is None:
            self.q.set_limits(concurrency=concurrency, rate=None, group_concurrency=group_cap)
            self.rate, self.claim_times = None, []
        else:
            self.q.set_limits(
                concurrency=concurrency, rate=rate[0], per=rate[1], group_concurrency=group_cap
            )
            self.rate = (rate[0], round(rate[1] * 1000))
        self.concurrency = concurrency
        self.group_cap = group_cap
        for g in sorted(self.held):  # limits.lua lets the groups now below it back
            if group_cap is None or self.group_active(g) < group_cap:
                self.held.discard(g)
                if self.gz.get(g):
                    self.gseq += 1
                    self.rotation.setdefault(g, self.gseq)

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 1000), ttl=st.sampled_from([0.5, 3.0]))
    def extend(self, index: int, ttl: float) -> None:
        lease = self.pick(index)
        if self.holds(lease):
            new = self.q.extend(lease, ttl=ttl)
            job = self.jobs[lease.id]
            job.lease_until = self.now + math.ceil(ttl * 1000)
            assert new.deadline == job.lease_until / 1000
        else:
            with pytest.raises(leaseq.LeaseLost):
                self.q.extend(lease, ttl=ttl)

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 1000))
    def complete(self, index: int) -> None:
        lease = self.pick(index)
        if self.holds(lease):
            self.q.complete(lease, result={"ok": lease.attempt})
            job = self.jobs[lease.id]
            job.state, job.lease_until = "succeeded", None
            self.lease_ends(job)
            self.settle(job, "succeeded")
        else:
            with pytest.raises(leaseq.LeaseLost):
                self.q.complete(lease)

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 1000), retry_in=st.sampled_from([None, 0.0, 1.0]))
    def fail(self, index: int, retry_in: float | None) -> None:
        lease = self.pick(index)
        if not self.holds(lease):
            with pytest.raises(leaseq.LeaseLost):
                self.q.fail(lease, "boom", retry_in=retry_in)
            return
        state = self.q.fail(lease, "boom", retry_in=retry_in)
        job = self.jobs[lease.id]
        job.lease_until = None
        job.state = "failing"
        self.lease_ends(job)
        delay = BACKOFF_MS if retry_in is None else math.ceil(retry_in * 1000)
        if job.attempts >= job.max_attempts:
            self.dead(job)
        elif delay > 0:
            job.state, job.run_at = "scheduled", self.now + delay
        else:
            self.push_pending(job)
        assert state.value == job.state

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 1000))
    def release(self, index: int) -> None:
        lease = self.pick(index)
        if not self.holds(lease):
            with pytest.raises(leaseq.LeaseLost):
                self.q.release(lease)
            return
        self.q.release(lease)
        job = self.jobs[lease.id]
        job.max_attempts += 1
        job.lease_until = None
        job.state = "releasing"
        self.lease_ends(job)
        self.push_pending(job)

    @precondition(lambda self: self.leases)
    @rule(index=st.integers(0, 1000))
    def stale_token_is_refused(self, index: int) -> None:
        stale = [lease for lease in self.leases if not self.holds(lease)]
        if not stale:
            return
        lease = stale[index % len(stale)]
        before = self.snapshot()
        for call in (
            lambda: self.q.complete(lease),
            lambda: self.q.extend(lease, ttl=5.0),
            lambda: self.q.fail(lease, "zombie"),
            lambda: self.q.release(lease),
            lambda: self.q.once(lease, "effect"),
        ):
            with pytest.raises(leaseq.LeaseLost):
                call()
        assert self.snapshot() == before

    @rule()
    def reap(self) -> None:
        expected = self.reap_model()
        assert self.q.reap() == expected

    @rule(seconds=st.sampled_from([0.25, 0.5, 1.0, 2.0, 5.0]))
    def advance(self, seconds: float) -> None:
        self.frozen.tick(seconds)
        self.now += round(seconds * 1000)

    @precondition(lambda self: self.jobs)
    @rule(index=st.integers(0, 1000))
    def retry_dead(self, index: int) -> None:
        job = self.jobs[sorted(self.jobs)[index % len(self.jobs)]]
        if job.state != "dead":
            with pytest.raises(leaseq.JobStateError):
                self.q.retry_dead(job.id)
            return
        assert self.q.retry_dead(job.id) == job.attempts + QUEUE_MAX_ATTEMPTS
        job.max_attempts = job.attempts + QUEUE_MAX_ATTEMPTS
        self.push_pending(job)

    @precondition(lambda self: self.jobs)
    @rule(index=st.integers(0, 1000))
    def cancel(self, index: int) -> None:
        job = self.jobs[sorted(self.jobs)[index % len(self.jobs)]]
        if job.state in ("waiting", "pending", "scheduled", "active"):
            # An active job loses its lease at once (its group slot first).
            was_active = job.state == "active"
            at_head = bool(self.ready) and self.ready[0] == job.id and self.listed(job.id)
            assert self.q.cancel(job.id) is True
            if at_head:  # lib/unready.lua: the list's head leaves at once
                self.ready.pop(0)
            job.state, job.run_at, job.lease_until = "cancelled", None, None
            if was_active:
                self.lease_ends(job)
            self.settle(job, "cancelled")
        elif job.state == "cancelled":
            assert self.q.cancel(job.id) is False
        else:
            with pytest.raises(leaseq.JobStateError):
                self.q.cancel(job.id)

    @rule()
    def unknown_ids_are_not_found(self) -> None:
        with pytest.raises(leaseq.JobNotFound):
            self.q.cancel("no-such-job")
        with pytest.raises(leaseq.JobNotFound):
            self.q.retry_dead("no-such-job")

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def rows_match_model_and_indexes(self) -> None:
        k = self.q.keys
        pipe = self.r.pipeline(transaction=False)
        for name in INDEXES:
            pipe.zrange(getattr(k, name), 0, -1, withscores=True)
        ids = sorted(self.jobs)
        for job_id in ids:
            pipe.hmget(k.job(job_id), "state", "attempts", "max_attempts", "lease_until")
        pipe.lrange(k.ready, 0, -1)
        pipe.hget(k.meta, "ready_stale")
        *replies, listed, stale = pipe.execute()
        # LIST ready holds exactly the model's entries, in order, stale ones too,
        # and meta ready_stale counts the stale ones (stats' pending subtracts it).
        assert [m.decode() for m in listed] == self.ready
        assert int(stale or 0) == sum(1 for job_id in self.ready if not self.listed(job_id))
        where: dict[str, list[str]] = {}
        scores: dict[str, float] = {}
        for name, members in zip(INDEXES, replies[: len(INDEXES)], strict=True):
            for member, score in members:
                job_id = member.decode()
                where.setdefault(job_id, []).append(name)
                if name == "active":
                    scores[job_id] = score
        for job_id in dict.fromkeys(self.ready):  # a live entry indexes its job as pending
            if self.listed(job_id):
                where.setdefault(job_id, []).append("pending")
        assert set(where) <= set(self.jobs), f"index holds unknown ids: {set(where) - set(ids)}"
        for job_id, row in zip(ids, replies[len(INDEXES) :], strict=True):
            job = self.jobs[job_id]
            state, attempts, max_attempts, lease_until = (
                None if v is None else v.decode() for v in row
            )
            assert state == job.state, f"{job_id}: row {state}, model {job.state}"
            assert where.get(job_id) == [job.state], f"{job_id} ({state}) in {where.get(job_id)}"
            assert attempts is not None and max_attempts is not None
            assert int(attempts) == job.attempts
            assert int(max_attempts) == job.max_attempts
            assert int(attempts) <= int(max_attempts)
            job.history.append(int(attempts))
            assert job.history == sorted(job.history), f"{job_id}: attempts went down"
            if state == "active":
                assert lease_until is not None and int(lease_until) == job.lease_until
                assert scores[job_id] == job.lease_until
            else:
                assert lease_until is None

    @invariant()
    def group_bookkeeping_matches(self) -> None:
        k = self.q.keys
        counts = {key.decode(): int(v) for key, v in self.r.hgetall(k.group_active).items()}
        want: dict[str, int] = {}
        for j in self.jobs.values():
            if j.state == "active" and j.group is not None:
                want[j.group] = want.get(j.group, 0) + 1
        assert counts == want
        assert {m.decode() for m in self.r.hkeys(k.group_held)} == self.held
        rotation = [m.decode() for m in self.r.zrange(k.groups, 0, -1)]
        assert rotation == sorted(self.rotation, key=lambda g: self.rotation[g])

    @invariant()
    def stats_agree(self) -> None:
        s = self.q.stats()
        for name in INDEXES:
            want = sum(1 for j in self.jobs.values() if j.state == name)
            assert getattr(s, name) == want, name


LeaseqModel.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


TestLeaseqModel = LeaseqModel.TestCase
