"""The Kubernetes reader's lists under a throttling or compacting API server, through the fault proxy in front of
the embedded API server (real HTTP, the official client), at a page size of 2 so that every list has pages.

Covers: a 429 (``Retry-After``) on one page costs that one request again, after the wait the server asked, and
the snapshot is the clean one; a 429 that outlasts ``GPUAAS_RETRIES`` fails as ``RetriesSpent``, which the task
does not repeat; a page whose ``continue`` token expired (410) starts its list over once from the first page,
the pages read dropped; expired again, the read fails naming how long the list took and its page size; a failed
list keeps the lists not yet started from being sent; the batch job kinds are listed as metadata alone
(``PartialObjectMetadataList``), which the embedded API server serves as the real one does; pods parsed page by
page get the owner roots ``parse_pods`` gives them; each list's resourceVersion is kept.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.apiserver import ApiServer, ObjectStore
from gpuaas.cluster.fault_proxy import FaultProxy, fault_proxy
from gpuaas.errors import Expired, PermanentError, RetriesSpent, TransientError
from gpuaas.models import Owner
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._concurrent import at_once
from gpuaas.sources._kube_owners import parse_pods
from gpuaas.sources.kube import KubeState, read_kube, with_roots
from tasks._options import retry_transient_only
from tests.sources.test_kube import _pod_spec, _seed

PODS_PAGE_2 = "/api/v1/pods?continue="
"""Every page of the running pods' list but the first (the client sends ``continue`` first)."""
GPU_PODS = 5


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[ObjectStore, ApiServer, FaultProxy, GpuaasSettings]]:
    store = ObjectStore()
    _seed(store)
    for i in range(GPU_PODS - 1):  # five GPU pods and two without GPUs: four pages of two
        store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"gpu-{i}", "namespace": "team-a"},
                      "spec": {"nodeName": "node-1", **_pod_spec("1")}, "status": {"phase": "Running"}})
    for i in range(2):
        store.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"cpu-{i}", "namespace": "team-a"},
                      "spec": {"nodeName": "node-1", **_pod_spec("0")}, "status": {"phase": "Running"}})
    with ApiServer(store) as server, fault_proxy(server.url) as proxy:
        kubeconfig = proxy.kubeconfig(server.write_kubeconfig(tmp_path / "direct"), tmp_path / "kubeconfig")
        yield store, server, proxy, GpuaasSettings(kubeconfig=kubeconfig, kube_page_size=2, retry_backoff_seconds=0)


def _clean(proxy: FaultProxy, settings: GpuaasSettings) -> KubeState:
    state = read_kube(settings)
    assert len(state.pods) == GPU_PODS and not proxy.hits
    proxy.clear()
    return state


def _same(got: KubeState, want: KubeState) -> bool:
    return dataclasses.replace(got, requests=0) == dataclasses.replace(want, requests=0)


def _pods_pages(proxy: FaultProxy) -> list[bool]:
    """Each relayed request of the pods' list: whether it continued the list."""
    return ["continue=" in hit.path for hit in proxy.relayed if hit.path.startswith("/api/v1/pods?")]


def test_a_throttled_page_costs_one_request_after_the_wait_asked(proxied: Any) -> None:
    _store, _server, proxy, settings = proxied
    clean = _clean(proxy, settings)
    proxy.arm("429", path=PODS_PAGE_2)  # Retry-After: 1

    state = read_kube(settings)

    assert state.requests == clean.requests + 1 and len(proxy.relayed) == clean.requests
    assert _same(state, clean)
    (refused,) = proxy.hits
    retried = next(hit for hit in proxy.relayed if hit.path == refused.path)
    assert retried.at - refused.at >= 0.99  # Retry-After: 1, as the server asked
    assert _pods_pages(proxy) == [False, True, True, True]  # the same page again, not the list


def test_a_failure_that_outlasts_the_retries_is_not_repeated_by_the_task(proxied: Any) -> None:
    _store, _server, proxy, settings = proxied
    proxy.arm("429", times=99, path=PODS_PAGE_2, retry_after=0)

    with pytest.raises(RetriesSpent) as caught:
        read_kube(settings.model_copy(update={"retries": 2}))

    error = caught.value
    assert str(error) == (f"Kubernetes API at {settings_url(proxy)}: listing pods/v1: 429 Too Many Requests: "
                          "slow down (asked 3 times over 0 s)")
    assert isinstance(error, PermanentError) and isinstance(error.__cause__, TransientError)
    assert len(proxy.hits) == 3  # the first try and GPUAAS_RETRIES=2 more, of that one page

    class Failed:
        def result(self) -> None:
            raise error

    assert retry_transient_only(None, None, Failed()) is False  # the whole read is not sent again


def settings_url(proxy: FaultProxy) -> str:
    return proxy.url


def test_an_expired_continue_token_restarts_the_list_once_from_its_first_page(proxied: Any) -> None:
    _store, _server, proxy, settings = proxied
    clean = _clean(proxy, settings)
    proxy.arm("410", path=PODS_PAGE_2)

    state = read_kube(settings)

    assert _same(state, clean)  # the first page, read twice, is in it once: the pages before the 410 dropped
    assert state.requests == clean.requests + 2  # the 410, and the first page again
    # the restart asks for the first page (no continue, no resourceVersion), never the rest the 410 offers
    assert _pods_pages(proxy) == [False, False, True, True, True]
    assert not any("resourceVersion" in hit.path for hit in proxy.relayed)


def test_a_list_that_expires_again_fails_naming_its_time_and_page_size(proxied: Any) -> None:
    _store, _server, proxy, settings = proxied
    proxy.arm("410", times=2, path=PODS_PAGE_2)

    with pytest.raises(Expired) as caught:
        read_kube(settings)

    assert str(caught.value) == (
        "listing pods/v1: 410 Gone (Expired): the list expired again after starting over: 0s for 1 page of 2 "
        "objects (a continue token lives as long as etcd keeps the list's version, 5 minutes by default): raise "
        "GPUAAS_KUBE_PAGE_SIZE, or give the reader a larger share of the API server")
    assert isinstance(caught.value, PermanentError)
    assert _pods_pages(proxy) == [False, False]


def test_a_failed_list_keeps_the_lists_not_yet_started_from_being_sent() -> None:
    started: list[int] = []
    in_flight, raised = threading.Event(), threading.Event()

    def fails() -> None:
        started.append(0)
        in_flight.wait(5)
        raised.set()
        raise RetriesSpent("listing pods/v1: 429", source="kube")

    def running() -> int:  # in flight when the other fails: it finishes
        started.append(1)
        in_flight.set()
        raised.wait(5)
        time.sleep(0.1)
        return 1

    def later(i: int) -> Any:
        return lambda: started.append(i)

    with pytest.raises(RetriesSpent):
        at_once([fails, running, *(later(i) for i in range(2, 6))], workers=2)
    assert sorted(started) == [0, 1]


def test_job_kinds_are_listed_as_metadata_alone(proxied: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store, server, proxy, settings = proxied
    store.create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "train", "namespace": "team-a", "annotations": {"gpuaas.io/deadline": "2026-03-11T00:00:00Z"}},
        "spec": {"template": {"spec": {"containers": [{"name": "m", "image": "x" * 1000}]}}}})
    accepted: dict[str, str] = {}
    answers: dict[str, Any] = {}
    handle = server.handle

    def recording(method: str, raw_path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        status, payload = handle(method, raw_path, headers, body)
        accepted[raw_path.split("?")[0]] = headers.get("accept", "")
        answers[raw_path.split("?")[0]] = payload
        return status, payload

    monkeypatch.setattr(server, "handle", recording)
    read_kube(settings)

    assert accepted["/apis/batch/v1/jobs"].startswith("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    assert accepted["/api/v1/pods"] == "application/json"  # a pod's GPUs are in its spec
    jobs = answers["/apis/batch/v1/jobs"]
    assert b'"kind":"PartialObjectMetadataList"' in jobs and b'"kind":"PartialObjectMetadata"' in jobs
    assert b"gpuaas.io/deadline" in jobs and b'"spec"' not in jobs


def test_pods_parsed_page_by_page_get_the_roots_parse_pods_gives() -> None:
    def pod(name: str, kind: str, owner: str, gpus: str = "1", **labels: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "labels": labels, "ownerReferences": [
            {"kind": kind, "name": owner, "controller": True}]}, "spec": {"nodeName": "n", **_pod_spec(gpus)}}

    pods = [pod("isvc-a", "ReplicaSet", "isvc-pred-abc", **{"pod-template-hash": "abc"}),
            pod("nb-0", "StatefulSet", "nb"), pod("ray-0", "RayCluster", "rc"), pod("web", "ReplicaSet", "web-x"),
            pod("cpu", "ReplicaSet", "web-x", gpus="0")]
    owners = [Owner("Deployment", "ns", "isvc-pred", "u", "1", 1, 1, False, (), "InferenceService", "isvc"),
              Owner("StatefulSet", "ns", "nb", "u", "1", 1, 1, False, (), "Notebook", "nb"),
              Owner("RayCluster", "ns", "rc", "u", "1", 1, 1, False, (), None, None)]
    names = ("nvidia.com/gpu",)
    assert with_roots(parse_pods(pods, (), names), owners) == parse_pods(pods, owners, names)
    assert [p.root_kind for p in with_roots(parse_pods(pods, (), names), owners)] == [
        "InferenceService", "Notebook", "RayCluster", "ReplicaSet"]


def test_each_list_keeps_the_resource_version_it_saw(proxied: Any) -> None:
    store, _server, proxy, settings = proxied
    state = read_kube(settings)
    assert state.list_versions["pods/v1"] == state.list_versions["namespaces/v1"] == store.resource_version
    assert set(state.list_versions) >= {"pods/v1", "workloads.kueue.x-k8s.io/v1beta2", "jobs.batch/v1"}
