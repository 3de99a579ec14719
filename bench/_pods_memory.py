"""Peak memory of the Kubernetes reader's pods list: every page kept whole until all lists finish (how the reader
read before) against the GPU pods parsed page by page as each arrives (``KubeLister``'s ``keep``).

The pages are real ``PodList`` JSON of a realistic running pod (managed fields, env, probes' worth of status:
~6 KiB, as a Deployment's pod on a kubelet), one in four asking for a GPU, decoded by the reader's own
``read_json`` and kept by its own ``_pages``; only the HTTP round trip is left out (its buffers are freed with
each page in both cases). Each way runs in a process of its own: the peak resident memory it adds to the encoded
pages it starts with (``ru_maxrss``), what a pod's memory limit counts.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

from gpuaas.settings import GpuaasSettings
from gpuaas.sources import KubeLister, pod_spec_gpus, read_json

__all__ = ["GPU_EVERY", "pods_peak_mib"]

GPU_EVERY = 4
"""One pod in this many asks for a GPU (the rest: serving front ends, operators, exporters)."""
_GPU = ("nvidia.com/gpu",)


def _pod(i: int) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi", **({"nvidia.com/gpu": "1"} if i % GPU_EVERY == 0 else {})}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"web-7d9f8c6b5-{i:06d}", "namespace": f"team-{i % 50}", "uid": f"0f7c1e2a-{i:012d}",
                     "resourceVersion": str(123456 + i), "creationTimestamp": "2026-01-01T00:00:00Z",
                     "generateName": "web-7d9f8c6b5-",
                     "labels": {"app": "web", "pod-template-hash": "7d9f8c6b5", "team": "x", "version": "v1"},
                     "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8c6b5",
                                          "uid": "x", "controller": True, "blockOwnerDeletion": True}],
                     "managedFields": [{"manager": m, "operation": "Update", "apiVersion": "v1",
                                        "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                                        "fieldsV1": {f"f:{part}": {f"f:c{j}": {"f:x": {}, "f:y": {}}
                                                                   for j in range(30)}}}
                                       for m, part in (("kube-controller-manager", "spec"), ("kubelet", "status"))]},
        "spec": {"nodeName": f"node-{i % 1000}", "serviceAccountName": "default",
                 "containers": [{"name": "c", "image": "registry.example.com/team/web:1.2.3",
                                 "env": [{"name": f"E{j}", "value": "v" * 20} for j in range(20)],
                                 "resources": {"requests": requests, "limits": requests},
                                 "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1", "hostIP": "10.1.1.1", "qosClass": "Burstable",
                   "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                                  for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                   "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0, "image": "x",
                                          "imageID": "sha256:" + "a" * 64, "containerID": "containerd://" + "b" * 64,
                                          "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]},
    }


class _Pages(KubeLister):
    """A lister whose requests are answered from encoded pages in memory, decoded as the reader decodes them."""

    def __init__(self, pages: list[bytes], page_size: int) -> None:
        api = SimpleNamespace(configuration=SimpleNamespace(host="http://bench"))
        super().__init__(api, GpuaasSettings(kube_page_size=page_size, retries=0))
        self._pages_sent = pages  # kept to the end: the baseline does not shrink as pages are read

    def _read(self, path: str, query: list[tuple[str, Any]], **_: Any) -> Any:
        self.requests += 1
        return read_json(self._pages_sent[self.requests - 1])


def _gpu_pods(items: list[dict[str, Any]]) -> list[tuple[str, str, str, float, str]]:
    """What the reader keeps of a running pod that asks for GPUs (``PodGpus``: its name, node, GPUs and owner)."""
    out = []
    for pod in items:
        gpus = pod_spec_gpus(pod.get("spec"), _GPU)
        if gpus > 0:
            meta = pod["metadata"]
            out.append((meta["namespace"], meta["name"], pod["spec"]["nodeName"], gpus,
                        meta["ownerReferences"][0]["name"]))
    return out


def _encoded_pages(pods: int, page_size: int) -> list[bytes]:
    pages = []
    for start in range(0, pods, page_size):
        last = start + page_size >= pods
        meta = {"resourceVersion": "9", **({} if last else {"continue": f"token-{start}"})}
        pages.append(json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": meta,
                                 "items": [_pod(i) for i in range(start, min(start + page_size, pods))]}).encode())
    return pages


def pods_peak_mib(pods: int, page_size: int = 500) -> tuple[float, float, int]:
    """(peak MiB keeping every pod until the end, peak MiB keeping the GPU pods page by page, GPU pods read)."""
    runs = [json.loads(subprocess.run([sys.executable, "-m", "bench._pods_memory", str(pods), str(page_size), way],
                                      check=True, capture_output=True, text=True).stdout)
            for way in ("whole", "by-page")]
    return runs[0]["peak_mib"], runs[1]["peak_mib"], runs[1]["gpu_pods"]


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _one(pods: int, page_size: int, by_page: bool) -> dict[str, float]:
    lister = _Pages(_encoded_pages(pods, page_size), page_size)
    before = _peak_rss_mib()
    if by_page:
        kept = lister.running_pods(_gpu_pods)
    else:
        kept = _gpu_pods(lister.running_pods())
    return {"peak_mib": _peak_rss_mib() - before, "gpu_pods": len(kept)}


if __name__ == "__main__":
    print(json.dumps(_one(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "by-page")))
