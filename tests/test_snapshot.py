"""The pure snapshot joins: workload telemetry (complete vs unknown), queue backlog, tenants,
the summary shape and the JSON round trip. Records are built directly; no I/O."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest

from gpuaas.models import FRAMES, ClusterQueue, PodGpus, QuotaEntry, Snapshot, SourceStatus, Workload, WorkloadState
from gpuaas.policy import Policy, Tenant
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import GPU_COLUMNS, PrometheusReading

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def _wl(name: str, state: WorkloadState, gpus: float, age_min: float, owner: str | None = None) -> Workload:
    return Workload("RayCluster" if owner else "Workload", "team-a", name, f"uid-{name}", "lq-a", "cq-a", 0, None,
                    state, True, gpus, "h100", NOW - timedelta(minutes=age_min), None,
                    "RayCluster" if owner else None, owner, (("gpuaas.io/reclaim", "never"),))


def _gpu(pod: str, gpu: str, coverage: float, activity: float) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(GPU_COLUMNS, "")
    row.update(host="n1", gpu=gpu, uuid=f"GPU-{pod}-{gpu}", namespace="team-a", pod=pod, window_minutes=30.0,
               activity_avg=activity, activity_max=activity, coverage=coverage, signal="x",
               longest_gap_s=15.0, age_s=15.0, fb_used_mib=1.0, power_w=1.0, temperature_c=1.0, xid=float("nan"))
    return row


@pytest.fixture
def snapshot() -> Snapshot:
    kube = KubeState(
        "v1beta2",
        (ClusterQueue("cq-a", "all", (QuotaEntry("h100", "nvidia.com/gpu", 8, usage=6),
                                      QuotaEntry("h100", "cpu", 64, usage=10))),),
        (),
        (_wl("busy", WorkloadState.admitted, 2, 90, "rc-busy"), _wl("gappy", WorkloadState.admitted, 2, 90, "rc-gap"),
         _wl("half-seen", WorkloadState.admitted, 2, 90, "rc-half"), _wl("wait-1", WorkloadState.pending, 4, 30),
         _wl("wait-2", WorkloadState.pending, 1, 50), _wl("done", WorkloadState.finished, 8, 500)),
        (), (), (),
        tuple(PodGpus("team-a", f"{rc}-0", "n1", 2, "RayCluster", rc, "RayCluster", rc)
              for rc in ("rc-busy", "rc-gap", "rc-half")),
        (), 0,
    )
    gpus = pd.DataFrame([_gpu("rc-busy-0", "0", 1.0, 0.5), _gpu("rc-busy-0", "1", 0.97, 0.7),
                         _gpu("rc-gap-0", "2", 0.5, 0.0), _gpu("rc-gap-0", "3", 1.0, 0.0),
                         _gpu("rc-half-0", "4", 1.0, 0.0)])
    serving = pd.DataFrame(columns=["namespace", "pod", "model_name", "window_minutes", "stat", "finished_reason",
                                    "le", "value"])
    prom = PrometheusReading(gpus=gpus, kueue=pd.DataFrame(), serving=serving)
    policy = Policy(tenants=[Tenant(name="research", namespaces=["team-a"])])
    sources = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.2, 12.0)}
    return build_snapshot(NOW, [30], sources, kube=kube, prom=prom, policy=policy)


def test_workload_view(snapshot: Snapshot) -> None:
    wl = snapshot.workloads.set_index("name")
    assert wl.loc["busy", "telemetry"] == "complete"
    assert wl.loc["busy", "activity_avg_30m"] == pytest.approx(0.6)
    assert wl.loc["busy", "activity_max_30m"] == pytest.approx(0.7)
    assert wl.loc["gappy", "telemetry"] == "unknown"  # one GPU covers half the window
    assert wl.loc["half-seen", "telemetry"] == "unknown"  # asks for 2 GPUs, 1 observed
    assert wl.loc["wait-1", "telemetry"] == "n/a" and wl.loc["done", "telemetry"] == "n/a"
    assert pd.isna(wl.loc["busy", "requests_30m"])  # no serving metrics: unknown, not zero
    assert set(wl["tenant"]) == {"research"} and set(wl["cohort"]) == {"all"}
    assert wl.loc["busy", "reclaim"] == "never" and wl.loc["wait-2", "age_seconds"] == 3000


def test_summary(snapshot: Snapshot) -> None:
    assert snapshot.summary() == {
        "queues": [{"name": "cq-a", "cohort": "all", "pending_workloads": 2, "pending_gpus": 5.0,
                    "oldest_pending_seconds": 3000.0, "admitted_gpus": 6.0, "nominal_gpus": 8.0}],
        "sources": {"kube": {"ok": True, "latency_s": 0.1, "staleness_s": 0.0, "error": None, "required": True},
                    "prometheus": {"ok": True, "latency_s": 0.2, "staleness_s": 12.0, "error": None,
                                   "required": True}},
        "workloads": 6,
        "unknown_telemetry": 2,
        "cluster": None,
    }


def test_json_round_trip(snapshot: Snapshot) -> None:
    from dataclasses import replace

    snapshot = replace(snapshot, cluster="uid-of-kube-system")
    back = Snapshot.from_json(snapshot.to_json())
    assert back.cluster == "uid-of-kube-system"
    assert back.collected_at == snapshot.collected_at and back.windows_minutes == (30.0,)
    assert back.summary() == snapshot.summary()
    assert back.workloads["created_at"].tolist() == snapshot.workloads["created_at"].tolist()
    assert back.sources["prometheus"] == snapshot.sources["prometheus"]


def test_every_frame_comes_back_with_its_types_from_either_format(snapshot: Snapshot) -> None:
    """Format 2 writes each frame's data by column; it reads into exactly the frames a format-1
    document (a record per row, what older gpuaas stored) gives, and that still reads."""
    import json

    text = snapshot.to_json()
    doc = json.loads(text)
    assert doc["format"] == 2 and isinstance(doc["frames"]["workloads"]["data"], dict)
    as_records = {**doc, "format": 1, "frames": {
        name: json.loads(getattr(snapshot, name).to_json(orient="table", index=False, date_format="iso"))
        for name in FRAMES}}
    by_column, by_record = Snapshot.from_json(text), Snapshot.from_json(json.dumps(as_records))
    for name in FRAMES:
        pd.testing.assert_frame_equal(getattr(by_column, name), getattr(by_record, name), obj=name)
        assert list(getattr(by_column, name).columns) == list(getattr(snapshot, name).columns)
    assert not by_column.workloads.empty and not by_column.gpus.empty
    assert len(text) < len(json.dumps(as_records))


def test_empty_sources_build() -> None:
    snap = build_snapshot(NOW, [30], {"kube": SourceStatus("kube", False, error="down")}, kube=None, prom=None)
    assert snap.degraded and snap.summary()["workloads"] == 0 and snap.summary()["queues"] == []


def test_deactivated_workload_is_pending_but_not_backlog() -> None:
    """Kueue's Status() says pending for ``spec.active=false``, but its queue manager drops the
    Workload from the queue: the backlog (and ``pending_workloads``) must not count it, or every
    Workload the reclaim flow deactivated would show up as unmet demand."""
    waiting = _wl("waiting", WorkloadState.pending, 4, 30)
    stopped = replace(_wl("stopped", WorkloadState.pending, 8, 120), active=False)
    kube = KubeState("v1beta2", (ClusterQueue("cq-a", None, (QuotaEntry("h100", "nvidia.com/gpu", 8),)),), (),
                     (waiting, stopped), (), (), (), (), (), 0)
    snap = build_snapshot(NOW, [30], {"kube": SourceStatus("kube", True)}, kube=kube, prom=None)
    assert snap.workloads.set_index("name")["state"].to_dict() == {"waiting": "pending", "stopped": "pending"}
    (queue,) = snap.summary()["queues"]
    assert (queue["pending_workloads"], queue["pending_gpus"], queue["oldest_pending_seconds"]) == (1, 4.0, 1800.0)


@pytest.mark.parametrize(
    ("on_workload", "on_owner", "expected"),
    [(None, "never", "never"), ("never", None, "never"), ("allow", "never", "never"), ("never", "allow", "never"),
     ("allow", None, "allow"), (None, None, None)],
    ids=["owner-only", "workload-only", "owner-wins", "workload-wins", "no-opt-out", "nothing"],
)
def test_an_opt_out_on_either_object_wins(on_workload: str | None, on_owner: str | None, expected: str | None) -> None:
    from gpuaas.snapshot_links import inherit_owner_opt_out

    workloads = pd.DataFrame([{"namespace": "a", "owner_kind": "Notebook", "owner_name": "nb", "reclaim": on_workload}])
    owners = pd.DataFrame([{"namespace": "a", "kind": "Notebook", "name": "nb", "reclaim": on_owner}])
    got = inherit_owner_opt_out(workloads, owners).loc[0, "reclaim"]
    assert (None if pd.isna(got) else got) == expected


def test_cohort_objects_travel_in_the_snapshot_and_back() -> None:
    """A Cohort's own quota and its parent reach the pools only through the snapshot (and a stored one)."""
    from gpuaas.models import Cohort
    from gpuaas.policies.deadlines import deadline_problems

    kube = KubeState("v1beta2", (ClusterQueue("cq-a", "research", (QuotaEntry("h100", "nvidia.com/gpu", 4),)),),
                     (), (), (Cohort("research", "org", (QuotaEntry("h100", "nvidia.com/gpu", 2, lending_limit=2),)),
                              Cohort("org", None)), (), (), (), (), 0)
    snap = Snapshot.from_json(build_snapshot(NOW, [30], {"kube": SourceStatus("kube", True)}, kube=kube,
                                             prom=None).to_json())
    cells = snap.cohorts.set_index("cohort")
    assert cells.loc["research", "parent"] == "org" and cells.loc["research", "nominal"] == 2.0
    assert cells.loc["research", "lending_limit"] == 2.0 and pd.isna(cells.loc["org", "flavor"])
    [pool] = deadline_problems(snap)
    assert (pool.cohort, pool.capacity, pool.inexact) == ("org", 6, ())


def test_telemetry_is_unknown_only_where_the_shortest_window_lacks_data() -> None:
    """A workload 45 minutes old is complete for a 30-minute window and not for a 60-minute one: its data is not
    missing, it is young. Its verdicts see ``complete_60m`` false (a 60-minute rule waits), but the snapshot
    does not count it as incomplete telemetry, which would make every run with young workloads degraded.
    A gap inside the last 30 minutes is missing data in every window."""
    young = _wl("young", WorkloadState.admitted, 1, 45, "rc-young")
    gappy = _wl("gappy", WorkloadState.admitted, 1, 90, "rc-gap")
    kube = KubeState("v1beta2", (), (), (young, gappy), (), (), (),
                     tuple(PodGpus("team-a", f"{rc}-0", "n1", 1, "RayCluster", rc, "RayCluster", rc)
                           for rc in ("rc-young", "rc-gap")), (), 0)
    rows = []
    for minutes, young_cover, gap_cover in ((30.0, 1.0, 0.5), (60.0, 0.75, 0.75)):
        rows += [_gpu("rc-young-0", "0", young_cover, 0.0) | {"window_minutes": minutes},
                 _gpu("rc-gap-0", "1", gap_cover, 0.0) | {"window_minutes": minutes}]
    serving = pd.DataFrame(columns=["namespace", "pod", "model_name", "window_minutes", "stat", "finished_reason",
                                    "le", "value"])
    prom = PrometheusReading(gpus=pd.DataFrame(rows), kueue=pd.DataFrame(), serving=serving)
    sources = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.2, 12.0)}
    wl = build_snapshot(NOW, [30, 60], sources, kube=kube, prom=prom, policy=Policy()).workloads.set_index("name")
    assert wl.loc["young", "complete_30m"] and not wl.loc["young", "complete_60m"]
    assert wl.loc["young", "telemetry"] == "complete"
    assert not wl.loc["gappy", "complete_30m"] and wl.loc["gappy", "telemetry"] == "unknown"


def test_each_workload_of_a_deployment_is_judged_on_its_own_pods_telemetry() -> None:
    """Kueue's pod integration makes one Workload per pod of a Deployment; gpuaas reads each as the Deployment's.
    Pod ``dep-1`` reports no GPU and no request: its Workload is unknown (its own pod is unseen), even though pod
    ``dep-0`` reports a quiet GPU, and ``dep-0``'s Workload is judged on ``dep-0`` alone."""
    def per_pod(name: str, pod: str) -> Workload:
        return replace(_wl(name, WorkloadState.admitted, 1, 90), kind="Deployment", owner_kind="Deployment",
                       owner_name="dep", annotations=(), pod=pod)

    kube = KubeState("v1beta2", (), (), (per_pod("w0", "dep-0"), per_pod("w1", "dep-1")), (), (), (),
                     tuple(PodGpus("team-a", f"dep-{i}", "n1", 1, "ReplicaSet", "dep-5f9c7", "Deployment", "dep")
                           for i in range(2)), (), 0)
    serving = pd.DataFrame([("team-a", "dep-0", "m", 30.0, "requests", "", "", 0.0)],
                           columns=["namespace", "pod", "model_name", "window_minutes", "stat", "finished_reason",
                                    "le", "value"])
    prom = PrometheusReading(gpus=pd.DataFrame([_gpu("dep-0", "0", 1.0, 0.0)]), kueue=pd.DataFrame(), serving=serving)
    sources = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.2, 12.0)}
    wl = build_snapshot(NOW, [30], sources, kube=kube, prom=prom, policy=Policy()).workloads.set_index("name")
    assert (wl.loc["w0", "gpus_observed"], wl.loc["w0", "telemetry"], wl.loc["w0", "requests_30m"]) == (
        1.0, "complete", 0.0)
    assert wl.loc["w1", "gpus_observed"] == 0.0 and wl.loc["w1", "telemetry"] == "unknown"
    assert pd.isna(wl.loc["w1", "requests_30m"])


@pytest.mark.parametrize("reading", [-1.0, float("-inf"), float("nan")], ids=["-1", "-inf", "nan"])
def test_a_pod_whose_activity_is_below_zero_or_nan_makes_its_workload_unknown(reading: float) -> None:
    """A RayCluster with two pods, one quiet (0.0) and one whose GPU reads ``reading``: the Workload's activity is
    not the quiet pod's 0 (it would be idle), but unknown, and stays so once stored and read back (the reclaim flow
    decides on the stored snapshot)."""
    kube = KubeState("v1beta2", (), (), (_wl("rc", WorkloadState.admitted, 2, 90, "rc"),), (), (), (),
                     tuple(PodGpus("team-a", f"rc-{i}", "n1", 1, "RayCluster", "rc", "RayCluster", "rc")
                           for i in range(2)), (), 0)
    gpus = pd.DataFrame([_gpu("rc-0", "0", 1.0, 0.0), _gpu("rc-1", "1", 1.0, reading)])
    serving = pd.DataFrame(columns=["namespace", "pod", "model_name", "window_minutes", "stat", "finished_reason",
                                    "le", "value"])
    prom = PrometheusReading(gpus=gpus, kueue=pd.DataFrame(), serving=serving)
    sources = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.2, 12.0)}
    snap = Snapshot.from_json(build_snapshot(NOW, [30], sources, kube=kube, prom=prom, policy=Policy()).to_json())
    row = snap.workloads.set_index("name").loc["rc"]
    assert row["gpus_observed"] == 2.0 and not row["complete_30m"] and row["telemetry"] == "unknown"
    assert not row["activity_max_30m"] >= 0  # NaN or below 0: never read as a quiet GPU


def test_an_opencost_answer_without_any_allocation_while_gpus_are_held_fails_the_source() -> None:
    """OpenCost answered ``{"data": [null]}`` (or ``[]``, ``[{}]``: parsed, no row) while running pods held 2 GPUs:
    it was not pricing, and reclaim must not price what it frees at nothing known. The same answer with no pod
    holding a GPU is no failure, a Workload admitted without a running pod (OpenCost prices pods) included."""
    from gpuaas.settings import GpuaasSettings
    from gpuaas.snapshot import assemble_snapshot
    from gpuaas.sources.opencost import COST_COLUMNS

    settings = GpuaasSettings(opencost_url="http://opencost:9003", nvml="off")
    empty = pd.DataFrame(columns=COST_COLUMNS)
    pod = (PodGpus("team-a", "rc-0", "n1", 2, "RayCluster", "rc", "RayCluster", "rc"),)
    for pods, fails in ((pod, True), ((), False)):
        kube = KubeState("v1beta2", (), (), (_wl("rc", WorkloadState.admitted, 2, 90, "rc"),), (), (), (), pods, (), 0)
        readings = {"kube": (kube, SourceStatus("kube", True)), "opencost": (empty, SourceStatus("opencost", True))}
        status = assemble_snapshot(settings, NOW, [30, 60], readings).sources["opencost"]
        assert status.ok is not fails
        if fails:  # the source, the window (the longest, 60 minutes before NOW) and what was held
            assert status.error is not None and status.error.startswith("OpenCost at http://opencost:9003: ")
            assert "2026-03-10 11:00 – 2026-03-10 12:00 UTC" in status.error and "2 GPUs" in status.error
