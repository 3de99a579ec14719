"""core/v1 Events as a view of the stored events.k8s.io/v1 ones, read the way ``kubectl describe`` reads them.

gpuaas writes its Events through events.k8s.io/v1; ``kubectl describe`` lists them at
``/api/v1/namespaces/{ns}/events`` with a field selector on ``involvedObject.*``. Cases: an Event gpuaas
records, found by the describe selector and converted field for field; a selector naming another object
finds none; every field converted exactly as a real kube-apiserver answered (the deprecated ones of an
older recorder's Event too); get by name and its 404; paging across namespaces; an unsupported field label is a 400; the
view is read-only and RBAC checks the core group.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gpuaas.actions._events import CONTROLLER, EventReason
from gpuaas.actions._kube_writer import KubeWriter
from gpuaas.cluster.apiserver import RBACRules
from gpuaas.settings import GpuaasSettings

from .conftest import Cluster, MakeCluster

NS = "research"


def ray_cluster(c: Cluster, name: str) -> dict[str, Any]:
    """A RayCluster as the API server returns it (with its uid), the object a team describes."""
    body = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name, "namespace": NS},
            "spec": {"rayVersion": "2.9.0"}}
    created: dict[str, Any] = c.custom.create_namespaced_custom_object("ray.io", "v1", NS, "rayclusters", body)
    return created


def describe_selector(obj: dict[str, Any], *, uid: bool = False) -> str:
    """The field selector ``kubectl describe`` sends (its ``GetFieldSelector``; with the uid when it has one)."""
    meta = obj["metadata"]
    parts = [f"involvedObject.name={meta['name']}", f"involvedObject.namespace={meta['namespace']}",
             f"involvedObject.kind={obj['kind']}"]
    return ",".join(parts + ([f"involvedObject.uid=={meta['uid']}"] if uid else []))


def full_event(name: str, regarding: str, namespace: str = NS) -> dict[str, Any]:
    """An events.k8s.io/v1 Event with every field that group accepts on create (the deprecated ones must be unset)."""
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": namespace},
        "eventTime": "2026-03-01T11:59:00.000001Z", "reportingController": "kueue-controller",
        "reportingInstance": "kueue-0", "action": "Preempt", "reason": "Preempted", "type": "Warning",
        "note": "Preempted to accommodate a higher priority Workload",
        "regarding": {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": regarding, "namespace": namespace,
                      "uid": "uid-1"},
        "related": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": f"raycluster-{regarding}",
                    "namespace": namespace},
        "series": {"count": 3, "lastObservedTime": "2026-03-01T12:00:00.000002Z"},
    }


def old_recorder_event(name: str, regarding: str) -> dict[str, Any]:
    """An Event an older recorder wrote through core/v1, as the real server stores it (and events.k8s.io
    shows it): the only kind of Event that has the deprecated fields."""
    return {
        "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": NS},
        "eventTime": None, "reason": "Preempted", "type": "Warning", "note": "old",
        "regarding": {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": regarding, "namespace": NS,
                      "uid": "uid-1"},
        "deprecatedSource": {"component": "kueue", "host": "node-1"}, "deprecatedCount": 4,
        "deprecatedFirstTimestamp": "2026-03-01T11:00:00Z", "deprecatedLastTimestamp": "2026-03-01T12:00:00Z",
    }


# What a real kube-apiserver (v1.35.4) answered at /api/v1 for these two, less metadata.
REAL_CORE_VIEW = {
    "rc.1": {
        "apiVersion": "v1", "kind": "Event", "action": "Preempt", "eventTime": "2026-03-01T11:59:00.000001Z",
        "firstTimestamp": None, "lastTimestamp": None, "source": {},
        "involvedObject": {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "namespace": NS,
                           "uid": "uid-1"},
        "message": "Preempted to accommodate a higher priority Workload", "reason": "Preempted", "type": "Warning",
        "related": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "name": "raycluster-rc",
                    "namespace": NS},
        "reportingComponent": "kueue-controller", "reportingInstance": "kueue-0",
        "series": {"count": 3, "lastObservedTime": "2026-03-01T12:00:00.000002Z"},
    },
    "rc.old": {
        "apiVersion": "v1", "kind": "Event", "count": 4, "eventTime": None, "firstTimestamp": "2026-03-01T11:00:00Z",
        "lastTimestamp": "2026-03-01T12:00:00Z", "source": {"component": "kueue", "host": "node-1"},
        "involvedObject": {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "namespace": NS,
                           "uid": "uid-1"},
        "message": "old", "reason": "Preempted", "type": "Warning", "reportingComponent": "", "reportingInstance": "",
    },
}


def test_describe_finds_the_event_gpuaas_recorded_through_events_k8s_io(cluster: Cluster, tmp_path: Path) -> None:
    sweep, other = ray_cluster(cluster, "ray-hparam-sweep"), ray_cluster(cluster, "ray-other")
    settings = GpuaasSettings(kubeconfig=cluster.server.write_kubeconfig(tmp_path / "kc"))
    writer = KubeWriter(settings, api_client=cluster.api)
    assert writer.record_event(sweep, EventReason.reclaimed, "Stopped by gpuaas: idle for 2h. Audit #7")
    assert writer.unrecorded_events == []
    [stored] = cluster.store.list("Event", NS)
    assert stored["apiVersion"] == "events.k8s.io/v1"  # written through events.k8s.io, read through core below

    for selector in (describe_selector(sweep), describe_selector(sweep, uid=True)):
        listed = cluster.core.list_namespaced_event(NS, field_selector=selector, limit=500)
        [event] = listed.items
        assert event.message == "Stopped by gpuaas: idle for 2h. Audit #7"
        assert (event.reason, event.type, event.action) == ("Reclaimed", "Normal", "Stop")
        involved = event.involved_object
        assert (involved.api_version, involved.kind, involved.name, involved.namespace, involved.uid) == (
            "ray.io/v1", "RayCluster", "ray-hparam-sweep", NS, sweep["metadata"]["uid"])
        # As upstream: source comes from deprecatedSource only (empty here); kubectl shows the controller.
        assert event.source.component is None and event.reporting_component == CONTROLLER
        assert event.count is None and event.first_timestamp is None and event.last_timestamp is None
        assert event.event_time == datetime.fromisoformat(stored["eventTime"])
        assert event.metadata.name == stored["metadata"]["name"]
    assert cluster.core.list_namespaced_event(NS, field_selector=describe_selector(other)).items == []
    wrong_uid = describe_selector(sweep).replace("involvedObject.kind=RayCluster", "involvedObject.uid=other")
    assert cluster.core.list_namespaced_event(NS, field_selector=wrong_uid).items == []
    assert cluster.core.list_namespaced_event("default", field_selector=describe_selector(sweep)).items == []
    assert cluster.server.requests["GET /api/v1/namespaces/{namespace}/events"] == 5


def test_every_field_converts_as_the_real_server_converts_it(cluster: Cluster) -> None:
    # Stored as the real server stores them (the typed client would rewrite the times' "Z" as "+00:00").
    cluster.store.create(full_event("rc.1", "rc"))
    cluster.store.create(old_recorder_event("rc.old", "rc"))
    raw = json.loads(cluster.core.list_namespaced_event(NS, field_selector="involvedObject.name==rc",
                                                        _preload_content=False).data)
    assert (raw["kind"], raw["apiVersion"]) == ("EventList", "v1")
    assert {i["metadata"]["name"]: {k: v for k, v in i.items() if k != "metadata"} for i in raw["items"]} == REAL_CORE_VIEW

    old = cluster.core.read_namespaced_event("rc.old", NS)  # what kubectl describe's columns come from
    assert (old.source.component, old.source.host, old.count) == ("kueue", "node-1", 4)
    assert old.first_timestamp == datetime(2026, 3, 1, 11, tzinfo=UTC)
    assert old.last_timestamp == datetime(2026, 3, 1, 12, tzinfo=UTC)
    new = cluster.core.read_namespaced_event("rc.1", NS)
    assert (new.reporting_component, new.reporting_instance, new.source.component) == ("kueue-controller", "kueue-0", None)
    assert new.series.count == 3 and new.series.last_observed_time.microsecond == 2
    assert (new.related.kind, new.related.name) == ("Workload", "raycluster-rc")
    with pytest.raises(ApiException) as exc:
        cluster.core.read_namespaced_event("missing", NS)
    assert exc.value.status == 404 and json.loads(exc.value.body)["message"] == 'events "missing" not found'


def test_all_namespaces_pages_with_limit_and_continue_and_selects_on_core_labels(cluster: Cluster) -> None:
    events = client.EventsV1Api(cluster.api)
    for i in range(5):
        events.create_namespaced_event(f"ns-{i % 2}", full_event(f"e.{i}", f"rc-{i % 3}", f"ns-{i % 2}"))
    seen, token = [], None
    while True:
        page = cluster.core.list_event_for_all_namespaces(limit=2, _continue=token)
        seen += [f"{e.metadata.namespace}/{e.metadata.name}" for e in page.items]
        if not (token := page.metadata._continue):
            break
    assert seen == ["ns-0/e.0", "ns-0/e.2", "ns-0/e.4", "ns-1/e.1", "ns-1/e.3"]
    assert cluster.server.requests["GET /api/v1/events"] == 3
    selected = cluster.core.list_event_for_all_namespaces(field_selector="involvedObject.name=rc-1,type=Warning")
    assert [e.metadata.name for e in selected.items] == ["e.4", "e.1"]
    # events.k8s.io selects on its own labels over the same objects.
    regarding = events.list_event_for_all_namespaces(field_selector="regarding.name=rc-1")
    assert [e.metadata.name for e in regarding.items] == ["e.4", "e.1"]
    for unsupported in ("regarding.name=rc-1", "note=x"):
        with pytest.raises(ApiException) as exc:
            cluster.core.list_event_for_all_namespaces(field_selector=unsupported)
        assert exc.value.status == 400 and "field label not supported" in json.loads(exc.value.body)["message"]


def test_core_view_is_read_only_and_rbac_checks_the_core_group(make_cluster: MakeCluster) -> None:
    rules = RBACRules([{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "list"]}])
    c = make_cluster(rbac=rules)
    client.EventsV1Api(c.api).create_namespaced_event(NS, full_event("rc.1", "rc"))
    with pytest.raises(ApiException) as exc:
        c.core.list_namespaced_event(NS)
    assert exc.value.status == 403 and 'in API group ""' in json.loads(exc.value.body)["message"]
    with pytest.raises(ApiException) as exc:
        c.core.create_namespaced_event(NS, {"metadata": {"name": "x"}, "involvedObject": {"name": "rc"}})
    assert exc.value.status == 405

