"""The cluster faults of the fault matrix, quick form (``python -m bench.faults
--quick --only cluster-kill --only cluster-failover``): a sharded queue on
three masters with a replica each, sync and asyncio workers, a master
SIGKILLed mid-drain after working a while without its replica (its replica
promoted), and a ``CLUSTER FAILOVER``; each run's history must pass its
checker: no token handed out twice, no stale or double completion, no effect
twice, no acknowledged ``durable=1`` enqueue lost (a plain one only inside
the kill's window), nothing unfinished, no shard's clock stepping back, no
job's lease times stepping back.

The checker is shown to catch the failover's own failure: the same kill run
with one fence for every claim (the token is then the attempt alone, as
before fences) reports the equal tokens the promoted replica handed out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import cluster_faults, faults, histories
from tests.support.servers import cli_exe, server_exe

pytestmark = pytest.mark.slow

CLUSTER = ["cluster-kill", "cluster-failover"]


@pytest.fixture(autouse=True)
def _redis_cluster_tools() -> None:
    try:
        server_exe()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    if cli_exe() is None:
        pytest.skip("redis-cli is needed to make a cluster")


def test_the_cluster_faults_pass_their_checker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only = [arg for name in CLUSTER for arg in ("--only", name)]
    assert faults.main(["--quick", *only, "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = faults.read_table(out)
    assert set(rows) == set(CLUSTER)
    for name, row in rows.items():
        enqueues, leases, completions = (
            int(row[k].replace(",", "")) for k in ("enqueues", "leases", "completions")
        )
        assert row["violations"] == "none", (name, row)
        assert row["faults"] == "1 failover" and leases > enqueues // 2
        assert completions > enqueues // 2
        records = histories.read(sorted((tmp_path / name).glob("*.history")))
        # Both kinds of worker drained the queue, before and after the fault.
        workers = {r["worker"].split("-")[0] for r in records if r["op"] == "lease"}
        assert workers == {"sync", "aio"}, name
    # The killed master took claims with it: the new master handed those jobs out
    # again at the same attempt, and fencing kept their first holders out.
    assert int(rows["cluster-kill"]["reissued"]) >= 1
    # What it lost was plain writes acknowledged inside the kill's window (the
    # checker flags any outside it); the manual failover has none and lost nothing.
    assert "`cluster-kill`: master cut off 0.5 s, SIGKILLed: lost " in out
    assert rows["cluster-failover"]["lost where allowed"] == "0"


def test_claims_that_share_one_fence_are_caught_handing_out_equal_tokens(
    tmp_path: Path,
) -> None:
    verdict = cluster_faults.run("kill", tmp_path, 100, fixed_fence=True)
    assert verdict.counts["attempt_reissued"] >= 1
    assert verdict.violations.get("token_twice"), verdict.violations
