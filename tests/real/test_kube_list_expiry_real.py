"""A list whose ``continue`` token expires, against a real kube-apiserver and etcd that compact every second.

A list that takes longer than etcd keeps its version (5 minutes by default; seconds here) is answered 410 Expired on
its next page. Cases: the reader starts the list over once from its first page and reads exactly what a list
that did not expire reads; expired again, it fails with one line naming how long the list took and its page size.
The real server also serves the metadata-only lists the reader asks the batch job kinds for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.real import RealCluster
from gpuaas.cluster.real._kubeapi import KubeHTTPError
from gpuaas.errors import Expired
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._kube_client import METADATA_ONLY, KubeLister, make_api_client

pytestmark = [pytest.mark.real]

COMPACTION_S = 1
STALL_S = 60
"""The longest a stalled request waits for its token to expire: the API server 1.35 answers 410 from about 4 s on
at a compaction every second (it compacts to the revision it saw a tick before)."""
NAMESPACES = 6


@pytest.fixture(scope="module")
def compacting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    cluster = RealCluster(None, tmp_path_factory.mktemp("compacting"), prometheus=False, control_plane_only=True,
                          apiserver_flags=(f"--etcd-compaction-interval={COMPACTION_S}s",))
    with cluster:
        assert cluster.api is not None
        for i in range(NAMESPACES):
            cluster.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{i}"}})
        yield cluster


def _lister(cluster: RealCluster, stall: Callable[[int], bool]) -> KubeLister:
    """A lister at 2 objects a page whose ``stall(n)``-th request waits, while a Namespace changes, until the API
    server answers its token 410 (asked aside): a list as slow as one of a throttled API server."""
    settings = GpuaasSettings(kubeconfig=cluster.kubeconfig, kube_page_size=2, retries=0)
    lister = KubeLister(make_api_client(settings), settings)
    read, sent = lister._read, [0]
    api = cluster.api
    assert api is not None

    def expired(path: str, token: str) -> bool:
        try:
            api.request("GET", path, params={"continue": token, "limit": "1"})  # aside: not the lister's count
        except KubeHTTPError as exc:
            assert exc.status == 410, exc
            return True
        return False

    def slow(path: str, query: list[tuple[str, Any]], **kw: Any) -> Any:
        sent[0] += 1
        token = dict(query).get("continue")
        if stall(sent[0]):
            assert token, "a stalled request continues a list"
            deadline = time.monotonic() + STALL_S
            while not expired(path, token):
                assert time.monotonic() < deadline, f"no 410 within {STALL_S} s of compactions"
                api.merge_patch("Namespace", "ns-0", {"metadata": {"labels": {"churn": str(time.monotonic_ns())}}})
                time.sleep(COMPACTION_S)
        return read(path, query, **kw)

    lister._read = slow  # type: ignore[method-assign]
    return lister


def test_an_expired_list_starts_over_and_reads_one_version(compacting: RealCluster) -> None:
    clean = _lister(compacting, lambda n: False)
    want = {name: {k: v for k, v in labels.items() if k != "churn"}
            for name, labels in (clean.namespace_labels() or {}).items()}

    lister = _lister(compacting, lambda n: n == 2)  # the first continued page, once
    got = lister.namespace_labels()

    assert got is not None and {name: {k: v for k, v in labels.items() if k != "churn"}
                                for name, labels in got.items()} == want
    assert lister.requests == clean.requests + 2  # the 410 and the first page again
    assert lister.versions["namespaces/v1"] != clean.versions["namespaces/v1"]  # read at the newer version


def test_a_list_that_expires_again_fails_in_one_line(compacting: RealCluster) -> None:
    lister = _lister(compacting, lambda n: n in (2, 4))  # the first continued page of each try

    with pytest.raises(Expired) as caught:
        lister.namespace_labels()

    line = str(caught.value)
    assert line.startswith("listing namespaces/v1: 410 Gone (Expired): the list expired again after starting over: ")
    assert " for 1 page of 2 objects " in line and "GPUAAS_KUBE_PAGE_SIZE" in line and "\n" not in line


def test_metadata_lists_are_served(compacting: RealCluster, tmp_path: Path) -> None:
    settings = GpuaasSettings(kubeconfig=compacting.kubeconfig, retries=0)
    lister = KubeLister(make_api_client(settings), settings)
    body = lister._read("/api/v1/namespaces", [("limit", 2)], verb="listing", kind="namespaces/v1",
                        accept=METADATA_ONLY)
    assert body["kind"] == "PartialObjectMetadataList" and body["apiVersion"] == "meta.k8s.io/v1"
    assert {item["kind"] for item in body["items"]} == {"PartialObjectMetadata"}
    assert all(set(item) == {"kind", "apiVersion", "metadata"} for item in body["items"])
