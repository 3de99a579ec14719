"""Malformed Kubernetes objects through the real reader: the official client over HTTP, then our parsers.

Objects are put straight into the embedded API's store (a real API server would have
validated them, but another Kueue version, a conversion webhook or a hand edit can still
serve such shapes) and read back with ``read_kube``. Each is either read with the documented
meaning (no queue, an unknown condition, no podSets) or fails the source with one
``MalformedResponse`` naming the object and what is wrong: never a traceback, never a
half-read cluster that a policy could act on.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.errors import MalformedResponse
from gpuaas.models import WorkloadState
from gpuaas.settings import GpuaasSettings
from gpuaas.sources.kube import read_kube

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _pod_sets(gpus: Any, count: Any = 1) -> list[dict[str, Any]]:
    return [{"name": "main", "count": count, "template": {"spec": {"containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": gpus}}}]}}}]


def _workload(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                           "metadata": {"name": "w", "namespace": "team-a"}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def _read(obj: dict[str, Any], tmp_path: Path) -> Any:
    store = ObjectStore(lambda: NOW)
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    store.create(obj)
    with ApiServer(store) as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        return read_kube(GpuaasSettings(kubeconfig=kubeconfig))


READ_AS_DOCUMENTED = {
    "no podSets: asks for no GPUs": (_workload({"queueName": "q"}), 0.0, "q"),
    "no queue: read, in no queue": (_workload({"podSets": _pod_sets("2")}), 2.0, None),
    "unknown condition type: ignored": (_workload({"queueName": "q", "podSets": _pod_sets("1")}, {"conditions": [
        {"type": "SomethingNew", "status": "True", "reason": "X", "message": "", "lastTransitionTime":
         "2026-03-01T11:00:00Z"}]}), 1.0, "q"),
}


@pytest.mark.parametrize(("obj", "gpus", "queue"), READ_AS_DOCUMENTED.values(), ids=READ_AS_DOCUMENTED.keys())
def test_read_with_the_documented_meaning(obj: dict[str, Any], gpus: float, queue: str | None,
                                          tmp_path: Path) -> None:
    [wl] = _read(obj, tmp_path).workloads
    assert (wl.name, wl.gpus, wl.queue, wl.state) == ("w", gpus, queue, WorkloadState.pending)


MALFORMED = {
    "GPU request not a quantity": (_workload({"queueName": "q", "podSets": _pod_sets("lots")}),
                                   "Workload team-a/w: not a quantity: 'lots'"),
    "GPU request a mapping": (_workload({"queueName": "q", "podSets": _pod_sets({"a": 1})}),
                              "Workload team-a/w: not a quantity"),
}
SCHEMA_REJECTS = {
    "podSets not a list": (_workload({"queueName": "q", "podSets": "main"}),
                           "Workload team-a/w: unexpected shape (AttributeError"),
    "count not a number": (_workload({"queueName": "q", "podSets": _pod_sets("1", count="two")}),
                           "Workload team-a/w: invalid literal for int()"),
    "priority not a number": (_workload({"queueName": "q", "podSets": _pod_sets("1"), "priority": "high"}),
                              "Workload team-a/w: invalid literal for int()"),
    "conditions not a list": (_workload({"queueName": "q", "podSets": _pod_sets("1")}, {"conditions": "Admitted"}),
                              "Workload team-a/w: unexpected shape"),
    "condition without a type": (_workload({"queueName": "q", "podSets": _pod_sets("1")}, {
        "conditions": [{"status": "True"}]}), None),
}


@pytest.mark.parametrize(("obj", "message"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_object_fails_the_source_naming_it(obj: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(MalformedResponse) as caught:
        _read(obj, tmp_path)
    assert caught.value.source == "kube" and message in str(caught.value)
    assert "Traceback" not in str(caught.value) and len(str(caught.value)) < 400


@pytest.mark.parametrize(("obj", "message"), SCHEMA_REJECTS.values(), ids=SCHEMA_REJECTS.keys())
def test_shapes_the_crd_schema_rejects_still_fail_cleanly_in_the_parser(obj: dict[str, Any], message: str | None,
                                                                       tmp_path: Path) -> None:
    """The embedded API validates against Kueue's CRD schema (422); a server that does not (an
    older Kueue, a proxy) could serve these, so the parser is checked on them directly."""
    from gpuaas.cluster.apiserver import ApiError
    from gpuaas.sources import parse_workload as parse
    from gpuaas.sources.kube import DEFAULT_GPU_RESOURCES, _parsed

    with pytest.raises(ApiError) as rejected:
        _read(obj, tmp_path)
    assert rejected.value.status == 422
    if message is None:  # readable: the condition is ignored
        assert _parsed("Workload", "u", lambda o: parse(o, DEFAULT_GPU_RESOURCES), obj).state == WorkloadState.pending
        return
    with pytest.raises(MalformedResponse, match=message.replace("(", r"\(").replace(")", r"\)")):
        _parsed("Workload", "u", lambda o: parse(o, DEFAULT_GPU_RESOURCES), obj)
