"""Deadline annotations into the snapshot: parsed values, the owner's annotation, Kueue's maximum
execution time as the fallback, and every malformed value reported per workload (never a crash,
never a guess) — read from the embedded API with the official client, then joined.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.models import Snapshot
from gpuaas.settings import GpuaasSettings
from gpuaas.snapshot import build_snapshot
from gpuaas.sources._kube_deadlines import parse_duration, parse_rfc3339
from gpuaas.sources.kube import read_kube
from tests.sources.test_kube import _pod_spec, cluster_queue, workload

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "seconds"), [("45m", 2700), ("1h30m", 5400), ("90s", 90), ("2.5h", 9000)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["45", "45 minutes", "-5m", "0m", "m", "", "1h 30m"])
def test_malformed_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_rfc3339_needs_a_zone() -> None:
    assert parse_rfc3339("2026-03-10T18:00:00Z") == datetime(2026, 3, 10, 18, tzinfo=UTC)
    assert parse_rfc3339("2026-03-10T19:00:00+01:00") == datetime(2026, 3, 10, 18, tzinfo=UTC)
    for bad in ("2026-03-10T18:00:00", "2026-03-10", "tomorrow", "2026-13-10T18:00:00Z"):
        with pytest.raises(ValueError):
            parse_rfc3339(bad)


def annotated(name: str, annotations: dict[str, str], **kw: Any) -> dict[str, Any]:
    obj = workload(name, "team-a", {"QuotaReserved": "False"}, **kw)
    obj["metadata"]["annotations"] = annotations
    return obj


@pytest.fixture
def snapshot(tmp_path: Path) -> Iterator[Snapshot]:
    store = ObjectStore()
    store.create(cluster_queue("cq-a", "all", "8"))
    store.create(annotated("wl-ok", {"gpuaas.io/deadline": "2026-03-10T18:00:00Z",
                                     "gpuaas.io/expected-runtime": "45m"}))
    store.create(annotated("wl-bad-deadline", {"gpuaas.io/deadline": "tomorrow 6pm",
                                               "gpuaas.io/expected-runtime": "45m"}))
    store.create(annotated("wl-bad-runtime", {"gpuaas.io/deadline": "2026-03-10T18:00:00Z",
                                              "gpuaas.io/expected-runtime": "forty minutes"}))
    exec_bound = annotated("wl-max-exec", {"gpuaas.io/deadline": "2026-03-10T15:00:00+00:00"})
    exec_bound["spec"]["maximumExecutionTimeSeconds"] = 3600
    store.create(exec_bound)
    labelled = annotated("wl-exec-label", {"gpuaas.io/deadline": "2026-03-10T15:00:00Z"})
    labelled["metadata"]["labels"] = {"kueue.x-k8s.io/max-exec-time-seconds": "1800"}
    store.create(labelled)
    store.create(annotated("wl-no-runtime", {"gpuaas.io/deadline": "2026-03-10T18:00:00Z"}))
    store.create(annotated("wl-on-owner", {}, owner=("RayCluster", "rc-1")))
    store.create({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {
        "name": "rc-1", "namespace": "team-a", "annotations": {"gpuaas.io/deadline": "2026-03-11T00:00:00Z",
                                                             "gpuaas.io/expected-runtime": "2h"}},
        "spec": {"suspend": True, "headGroupSpec": {"template": {"spec": _pod_spec("0")}},
                 "workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "template": {"spec": _pod_spec("2")}}]}})
    store.create(annotated("wl-none", {}))
    api = ApiServer(store)
    api.start()
    try:
        kube = read_kube(GpuaasSettings(kubeconfig=api.write_kubeconfig(tmp_path / "kc")))
        yield build_snapshot(NOW, [30.0], {}, kube=kube, prom=None)
    finally:
        api.stop()


def test_deadline_columns_from_workload_owner_and_max_exec_time(snapshot: Snapshot) -> None:
    wl = snapshot.workloads.set_index("name")
    assert wl.loc["wl-ok", "deadline_at"] == pd.Timestamp("2026-03-10T18:00:00Z")
    assert wl.loc["wl-ok", "runtime_seconds"] == 2700 and wl.loc["wl-ok", "runtime_source"] == "expected-runtime"
    assert wl.loc["wl-max-exec", "runtime_seconds"] == 3600 and wl.loc["wl-max-exec", "runtime_source"] == "max-exec-time"
    assert wl.loc["wl-exec-label", "runtime_seconds"] == 1800
    assert wl.loc["wl-on-owner", "deadline_at"] == pd.Timestamp("2026-03-11T00:00:00Z")  # from the RayCluster
    assert wl.loc["wl-on-owner", "runtime_seconds"] == 7200
    assert pd.isna(wl.loc["wl-none", "deadline_at"]) and pd.isna(wl.loc["wl-none", "runtime_seconds"])
    assert pd.isna(wl.loc["wl-bad-deadline", "deadline_at"])  # never guessed
    assert wl.loc["wl-bad-deadline", "runtime_seconds"] == 2700  # the good value is kept


def test_malformed_values_are_reported_per_workload_with_the_value(snapshot: Snapshot) -> None:
    rows = {(r.namespace, r.name): r for r in snapshot.data_quality.itertuples()}
    assert set(rows) == {("team-a", "wl-bad-deadline"), ("team-a", "wl-bad-runtime"), ("team-a", "wl-no-runtime")}
    bad = rows[("team-a", "wl-bad-deadline")]
    assert (bad.field, bad.value) == ("gpuaas.io/deadline", "tomorrow 6pm") and "RFC 3339" in bad.problem
    assert rows[("team-a", "wl-bad-runtime")].value == "forty minutes"
    assert "cannot be planned" in rows[("team-a", "wl-no-runtime")].problem


def test_deadline_columns_survive_the_stored_json(snapshot: Snapshot) -> None:
    back = Snapshot.from_json(snapshot.to_json())
    assert len(back.data_quality) == 3
    wl = back.workloads.set_index("name")
    assert wl.loc["wl-ok", "deadline_at"] == pd.Timestamp("2026-03-10T18:00:00Z")
    assert wl.loc["wl-max-exec", "runtime_source"] == "max-exec-time"
