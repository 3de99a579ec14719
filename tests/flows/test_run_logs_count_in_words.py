"""A run's log lines count what they read in words that read right for one: "1 cohort", never "1 cohorts".

These are the first lines an on-call engineer reads on a run's page, before the headline. Real parts: the
embedded cluster of the incident scenario (one cohort, one deadline pool), its store, the Prefect test server.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from tests.flows.incident_scenario import incident_cluster, write_policy
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]


@pytest.fixture()
def one_cohort(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddedCluster]:
    with incident_cluster(tmp_path / "cluster") as cluster:
        yield point_at(cluster, monkeypatch, data_dir=tmp_path / "data",
                       policy_file=write_policy(tmp_path / "policy.yaml"))


def _said(caplog: pytest.LogCaptureFixture, prefix: str) -> str:
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith(prefix)]
    return re.sub(r"in \d+\.\d\ds$", "in …", line)


def test_plans_of_one_cohort_and_one_pool_say_so(one_cohort: EmbeddedCluster, prefect_harness: None,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    from flows.deadlines import deadlines
    from flows.rebalance import rebalance

    caplog.set_level("INFO")
    assert rebalance(at=one_cohort.clock.now(), return_state=True).is_completed()
    assert re.fullmatch(r"plan: snapshot \d+, 1 cohort, \d+ GPUs? to move in …", _said(caplog, "plan: snapshot"))
    assert deadlines(at=one_cohort.clock.now(), return_state=True).is_completed()
    assert _said(caplog, "plan: 1 pool") == "plan: 1 pool, 0 extra GPUs needed, 0 deadlines at risk in …"
