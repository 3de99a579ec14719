"""What gpuaas reads in Kueue but cannot act on is said, never left out (``gpuaas.kueue_gaps``).

The set-up of a reviewer's walk (``extra.yaml``), through the real reader (the official client over HTTP
against the embedded API server): a ClusterQueue of 14 MIG slices (``nvidia.com/mig-1g.10gb``, the mixed
strategy) and one of 8 ``amd.com/gpu`` in cohort ``amd-pool``, each with a Workload; a LocalQueue
``team-e/ghost-queue`` pointing at ClusterQueue ``ghost-cq``, which does not exist, with a Workload of 32
GPUs due in 3 hours; beside them an ordinary ``nvidia.com/gpu`` cohort ``c``. Cases:

- the snapshot's data quality and the collect's notes (its summary, markdown and text) name both gaps;
- the preflight warns in the same words, and is ok on a cluster without them;
- ``--cohort amd-pool`` says the cohort holds no ``nvidia.com/gpu`` quota, and that it holds ``amd.com/gpu``;
- the deadline plan lists the ghost Workload as missed, because its ClusterQueue does not exist.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.errors import ConfigError
from gpuaas.models import Snapshot, SourceStatus
from gpuaas.operations import collect as collect_op
from gpuaas.operations.deadlines import pool_plans
from gpuaas.operations.rebalance import plan as rebalance_plan
from gpuaas.policy import Policy
from gpuaas.preflight_checks import Verdict
from gpuaas.preflight_gaps import GAPS_CHECK, gap_check, kube_gaps
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import KubeState, read_kube, unmanaged_accelerators
from reports.collect import summary_markdown
from reports.deadlines import deadlines_headline, pool_dicts, pool_rows

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KUEUE = "kueue.x-k8s.io/v1beta2"
UNMANAGED = ("2 ClusterQueues (amd-cq, mig-cq) and 2 Workloads ask for accelerators gpuaas does not manage "
             "(amd.com/gpu, nvidia.com/mig-1g.10gb): not judged, not moved (gpuaas manages nvidia.com/gpu only)")
GHOST = ("team-e/ghost-queue points at ClusterQueue ghost-cq, which does not exist: 1 Workload (32 GPUs, 1 with a "
         "deadline) can never be admitted")


def _queue(name: str, cohort: str, resource: str, quota: int) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": cohort, "namespaceSelector": {}, "resourceGroups": [
                {"coveredResources": [resource], "flavors": [{"name": "f", "resources": [
                    {"name": resource, "nominalQuota": quota}]}]}]}}


def _local(name: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": "team-e"},
            "spec": {"clusterQueue": cluster_queue}}


def _workload(name: str, queue: str, count: int, requests: dict[str, str], **annotations: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": name, "namespace": "team-e", "annotations": annotations},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": count, "template": {"spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}}}]}}


def walked(with_gaps: bool = True) -> list[dict[str, Any]]:
    """The objects of the walk: the ordinary cohort, and with ``with_gaps`` extra.yaml's."""
    due = (NOW + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    plain = [_queue("cq-a", "c", "nvidia.com/gpu", 8),
             {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-e"}},
             _local("a-queue", "cq-a"), _workload("a-wl", "a-queue", 1, {"nvidia.com/gpu": "2"})]
    return plain + ([
        _queue("mig-cq", "child-b", "nvidia.com/mig-1g.10gb", 14), _queue("amd-cq", "amd-pool", "amd.com/gpu", 8),
        _local("mig-queue", "mig-cq"), _local("amd-queue", "amd-cq"), _local("ghost-queue", "ghost-cq"),
        _workload("mig-wl", "mig-queue", 7, {"nvidia.com/mig-1g.10gb": "1"}),
        _workload("amd-wl", "amd-queue", 2, {"amd.com/gpu": "4"}),
        _workload("ghost-wl", "ghost-queue", 4, {"nvidia.com/gpu": "8"},
                  **{"gpuaas.io/deadline": due, "gpuaas.io/expected-runtime": "1h"}),
    ] if with_gaps else [])


def read(objects: list[dict[str, Any]], tmp_path: Path) -> KubeState:
    store = ObjectStore(lambda: NOW)
    for obj in objects:
        store.create(obj)
    with ApiServer(store) as api:
        return read_kube(GpuaasSettings(kubeconfig=api.write_kubeconfig(tmp_path / "kubeconfig")))


def snapshot_of(kube: KubeState) -> Snapshot:
    return build_snapshot(NOW, [30], {"kube": SourceStatus("kube", True)}, kube=kube, prom=None)


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> KubeState:
    return read(walked(), tmp_path_factory.mktemp("walk"))


@pytest.mark.parametrize(("resource", "unmanaged"), [
    ("nvidia.com/gpu", False), ("nvidia.com/mig-1g.10gb", True), ("nvidia.com/gpu.shared", True),
    ("amd.com/gpu", True), ("gpu.intel.com/i915", True), ("habana.ai/gaudi", True),
    ("aws.amazon.com/neuroncore", True), ("google.com/tpu", True), ("cpu", False), ("example.com/foo", False),
], ids=lambda v: str(v))
def test_accelerators_are_known_by_their_extended_resource_names(resource: str, unmanaged: bool) -> None:
    assert unmanaged_accelerators([resource]) == ((resource,) if unmanaged else ())


def test_the_snapshot_and_the_collect_name_what_gpuaas_does_not_manage_or_cannot_place(kube: KubeState) -> None:
    snap = snapshot_of(kube)
    rows = {(r.kind, r.namespace, r.name): (r.field, r.value) for r in snap.data_quality.itertuples()}
    assert rows == {("ClusterQueue", "", "amd-cq"): ("spec.resourceGroups", "amd.com/gpu"),
                    ("ClusterQueue", "", "mig-cq"): ("spec.resourceGroups", "nvidia.com/mig-1g.10gb"),
                    ("Workload", "team-e", "amd-wl"): ("spec.podSets", "amd.com/gpu"),
                    ("Workload", "team-e", "mig-wl"): ("spec.podSets", "nvidia.com/mig-1g.10gb"),
                    ("LocalQueue", "team-e", "ghost-queue"): ("spec.clusterQueue", "ghost-cq")}
    back = Snapshot.from_json(snap.to_json())  # a stored snapshot keeps them
    planned = collect_op.plan(back, Policy(), full_due=False)
    assert planned.summary["notes"] == [UNMANAGED, GHOST]
    markdown = summary_markdown({**planned.summary, "snapshot_id": 1, "unjudged_count": 0}, 0, False)
    assert f"- **Note:** {UNMANAGED}\n" in markdown and f"- **Note:** {GHOST}\n" in markdown


def test_the_collect_prints_its_notes_under_the_backlog(kube: KubeState, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from gpuaas.cli.collect_cmd import SUMMARY_KEYS, print_collect

    monkeypatch.setenv("COLUMNS", "400")
    summary = collect_op.plan(snapshot_of(kube), Policy(), full_due=False).summary
    print_collect({**summary, "unjudged": [], "unjudged_count": 0})
    out = capsys.readouterr().out
    assert f"Note: {UNMANAGED}.\n" in out and f"Note: {GHOST}.\n" in out
    assert "notes" in SUMMARY_KEYS  # --format json carries them


def test_the_preflight_warns_in_the_same_words(kube: KubeState, tmp_path: Path) -> None:
    check = gap_check(kube_gaps(kube, NOW))
    assert (check.name, check.verdict, check.detail) == (GAPS_CHECK, Verdict.warning, f"{UNMANAGED}; {GHOST}")
    plain = gap_check(kube_gaps(read(walked(with_gaps=False), tmp_path), NOW))
    assert plain.verdict is Verdict.ok
    assert plain.detail == ("no quota of or request for an accelerator but nvidia.com/gpu, the one gpuaas manages; "
                            "every LocalQueue's ClusterQueue exists")
    assert gap_check(kube_gaps(None, NOW)).verdict is Verdict.skipped


def test_a_cohort_of_another_accelerator_is_not_said_to_hold_no_gpus(kube: KubeState) -> None:
    snap = snapshot_of(kube)
    with pytest.raises(ConfigError) as refused:
        rebalance_plan(snap, pd.DataFrame(), Policy(), cohort="amd-pool")
    assert str(refused.value) == ("cohort: no cohort 'amd-pool' holds nvidia.com/gpu quota in the cluster; it holds "
                                  "amd.com/gpu, which gpuaas does not manage (those that do: c)")


def test_a_deadline_queued_to_a_missing_cluster_queue_is_missed(kube: KubeState) -> None:
    pools = pool_dicts(pool_plans(snapshot_of(kube)))
    [ghost] = [p for p in pools if p["missing_cluster_queue"]]
    assert (ghost["missing_cluster_queue"], ghost["missed"], ghost["notes"]) == ("ghost-cq", ["team-e/ghost-wl"],
                                                                                 [GHOST])
    assert ghost["unscheduled"] == [{"name": "team-e/ghost-wl", "gpus": 32, "deadline": 10800, "missed_by": None,
                                     "larger_than_pool": False, "no_place": "its ClusterQueue does not exist"}]
    assert pool_rows(ghost, {}) == [["team-e/ghost-wl", "team-e/ghost-wl", 32, "-", "-", "+3h00m",
                                     "missed: ClusterQueue ghost-cq does not exist"]]
    assert deadlines_headline(pools) == ("1 pool planned; 1 Workload with a deadline queued to a ClusterQueue that "
                                         "does not exist. 1 deadline missed. No extra GPUs would save the rest "
                                         "(exact plan).")
