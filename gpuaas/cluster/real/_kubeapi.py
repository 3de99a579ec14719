"""A small HTTP client for the real API server: create objects, read, patch, wait.

The cluster's own set-up (CRDs, webhooks, the scenario) and the tests use it; gpuaas itself talks to
the cluster through its production client and the kubeconfig. Paths come from a table of the kinds
the set-up writes, so no discovery round trip is needed.

One ``KubeHTTP`` is shared by threads (the pod stand-in's loop, the caller, the differential cases),
so each thread sends through its own ``httpx.Client``: in one shared connection pool, a thread's pass
over the pool may close a connection it still sees idle that another thread has just been handed, under
that thread's request, whose read then fails with ``[Errno 9] Bad file descriptor`` or waits out its
timeout. httpcore (1.0.9) closes idle connections on almost every request once a pool holds more than
20 (its keep-alive limit is checked against all connections, not the idle ones), as two dozen threads do.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from gpuaas.errors import PermanentError

__all__ = ["KubeHTTP", "KubeHTTPError", "path_of"]

# kind -> (apiVersion prefix of the URL, plural, namespaced)
_KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("api/v1", "namespaces", False),
    "Node": ("api/v1", "nodes", False),
    "ServiceAccount": ("api/v1", "serviceaccounts", True),
    "Secret": ("api/v1", "secrets", True),
    "ConfigMap": ("api/v1", "configmaps", True),
    "Pod": ("api/v1", "pods", True),
    "Job": ("apis/batch/v1", "jobs", True),
    "Deployment": ("apis/apps/v1", "deployments", True),
    "StatefulSet": ("apis/apps/v1", "statefulsets", True),
    "ClusterRole": ("apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "CustomResourceDefinition": ("apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False),
    "MutatingWebhookConfiguration": ("apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations", False),
    "ValidatingWebhookConfiguration": ("apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations",
                                       False),
    "ResourceFlavor": ("apis/kueue.x-k8s.io/v1beta2", "resourceflavors", False),
    "WorkloadPriorityClass": ("apis/kueue.x-k8s.io/v1beta2", "workloadpriorityclasses", False),
    "ClusterQueue": ("apis/kueue.x-k8s.io/v1beta2", "clusterqueues", False),
    "Cohort": ("apis/kueue.x-k8s.io/v1beta2", "cohorts", False),
    "LocalQueue": ("apis/kueue.x-k8s.io/v1beta2", "localqueues", True),
    "Workload": ("apis/kueue.x-k8s.io/v1beta2", "workloads", True),
    "RayCluster": ("apis/ray.io/v1", "rayclusters", True),
    "InferenceService": ("apis/serving.kserve.io/v1beta1", "inferenceservices", True),
    "Notebook": ("apis/kubeflow.org/v1", "notebooks", True),
    "Event": ("apis/events.k8s.io/v1", "events", True),
}


class KubeHTTPError(PermanentError):
    """The API server refused a request of the set-up; carries the status code."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def path_of(kind: str, namespace: str | None = None, name: str | None = None) -> str:
    """``/apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>]`` for a kind of the table."""
    prefix, plural, namespaced = _KINDS[kind]
    path = f"/{prefix}"
    if namespaced and namespace:
        path += f"/namespaces/{namespace}"
    path += f"/{plural}"
    return f"{path}/{name}" if name else path


class KubeHTTP:
    """Requests with our CA and a bearer token; safe to share between threads (each has its own client)."""

    def __init__(self, server: str, ca_file: Path, token: str, timeout: float = 30.0) -> None:
        self.server = server
        self._tls = ssl.create_default_context(cafile=str(ca_file))
        self._timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}"}
        self._lock = threading.Lock()
        self._clients: dict[threading.Thread, httpx.Client] = {}
        self._closed = False

    def _client(self) -> httpx.Client:
        """The calling thread's client, made on its first request; those of finished threads are closed
        then, so a pool of short-lived threads leaves no sockets open behind it."""
        me = threading.current_thread()
        with self._lock:
            if self._closed:
                raise RuntimeError(f"{self.server}: request on a closed KubeHTTP")
            client = self._clients.get(me)
            if client is None:
                gone = [t for t in self._clients if not t.is_alive()]
                for thread in gone:
                    self._clients.pop(thread).close()
                client = self._clients[me] = httpx.Client(base_url=self.server, verify=self._tls,
                                                          timeout=self._timeout, headers=self._headers)
            return client

    def close(self) -> None:
        """Close every thread's client; a request after this fails instead of opening a new one."""
        with self._lock:
            self._closed = True
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                params: dict[str, str] | None = None) -> Any:
        headers = {"Content-Type": content_type} if body is not None else {}
        response = self._client().request(method, path, json=body, headers=headers, params=params)
        if response.status_code >= 400:
            try:
                message = str(response.json().get("message", ""))[:300]
            except ValueError:
                message = response.text[:300]
            raise KubeHTTPError(f"{method} {path}: {response.status_code} {message}", response.status_code)
        return response.json() if response.content else None

    def ok(self, path: str) -> bool:
        """A 200 from a health endpoint (``/readyz``), which answers text, not JSON."""
        return self._client().get(path).status_code == 200

    def create(self, obj: dict[str, Any], *, exist_ok: bool = True) -> dict[str, Any] | None:
        meta = obj["metadata"]
        try:
            out: dict[str, Any] = self.request("POST", path_of(obj["kind"], meta.get("namespace")), obj)
            return out
        except KubeHTTPError as exc:
            if exc.status == 409 and exist_ok:
                return None
            raise

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = self.request("GET", path_of(kind, namespace, name))
        return out

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.request("GET", path_of(kind, namespace))["items"]
        return items

    def merge_patch(self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None,
                    subresource: str = "") -> dict[str, Any]:
        path = path_of(kind, namespace, name) + (f"/{subresource}" if subresource else "")
        out: dict[str, Any] = self.request("PATCH", path, patch, "application/merge-patch+json")
        return out

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        try:
            self.request("DELETE", path_of(kind, namespace, name))
        except KubeHTTPError as exc:
            if exc.status != 404:
                raise

    def wait_for(self, what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
        """Poll ``check`` until true; a ``KubeHTTPError`` naming ``what`` when the time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if check():
                    return
            except (KubeHTTPError, httpx.HTTPError):
                pass
            if time.monotonic() > deadline:
                raise KubeHTTPError(f"timed out after {timeout:.0f} s waiting for {what}", 0)
            time.sleep(0.2)
