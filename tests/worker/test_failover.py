"""Failover under load, the Sentinel rows of the fault matrix in their quick
form (``python -m bench.faults --quick --only sentinel-kill --only
sentinel-failover``, a short ``python -m bench.failover`` round each): a
primary, a replica and three Sentinels on loopback; three worker processes
completing jobs with ``effects=`` through a ``redis+sentinel://`` URL; a
producer enqueueing plain and ``durable=1``; then the primary is SIGKILLed
(or handed over with ``SENTINEL FAILOVER``, the old one left running).

What must hold: no acknowledged ``durable=1`` enqueue is lost, no effect is
applied twice, nothing is left unfinished or active, the queue's clock
never steps back, and the workers reach the new primary by themselves — a
real ``leaseq worker`` process among them, with its outage backoff. The
run's history (``bench.histories``) must pass its checker too: no token
handed out twice, no stale completion, and the plain writes lost (what
asynchronous replication costs: counted, docs/reliability.md has the
figures) all acknowledged inside the fault's window — from 1 s before it
until the old primary replicates the new one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import failover, faults

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("fault", ["kill", "failover"])
def test_failover_loses_no_durable_enqueue_and_applies_no_effect_twice(
    fault: str, tmp_path: Path
) -> None:
    verdict, report = faults.sentinel(fault, tmp_path, 400)
    print(report, verdict)
    assert report["acked_durable"] > 0 and report["acked_plain"] > 0, report
    assert report["failovers"] >= 1, report
    assert report["handler_runs"] >= report["jobs"] - report["lost_plain"], report
    assert report["lost_durable"] == 0, report
    assert report["effects_double"] == 0 and report["effects_missing"] == 0, report
    assert report["unfinished"] == {} and report["active_after_run"] == 0, report
    assert report["clock_steps_back"] == 0, report
    assert report["first_claim_on_new_primary_s"] is not None, report
    # A real `leaseq worker` on the same URL rode the failover out: alive, all done.
    assert report["leaseq_worker_alive"] and report["leaseq_worker_unfinished"] == 0, report
    assert failover.ok(report)
    # The history: every lease and acknowledged write checked, and what the
    # failover lost placed inside its window (the checker flags any outside it).
    assert verdict.ok, verdict.violations
    assert verdict.counts["lease"] > 0 and verdict.counts["complete"] > 0
    assert verdict.counts["lost_unkept"] == report["lost_plain"]
    (note,) = verdict.notes
    assert note.startswith(failover.WHAT[fault] + ": lost "), note
