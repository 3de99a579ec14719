"""The reclaim action against the real kube-apiserver where a 200 is not a stop, or a stop is not gpuaas's to make.

In the ``default`` namespace, on Deployments of this module's own (deleted at the end), with decisions built by hand
(the action is what is tested; the planner's side is the embedded tests'):

* a mutating admission webhook (a loopback HTTPS server of this module, registered for one label) sets
  ``replicas`` back to 2 on every update: the stop is ``failed`` (``stop-not-held``, naming ``spec.replicas``),
  no "Reclaimed" Event is recorded, and the next run does not patch again;
* a patch of a field the schema does not know is refused by the API server (``fieldValidation=Strict``), and the
  error names the field;
* the Argo CD sequence (server-side apply as ``argocd-controller``, a gpuaas stop, a forced re-apply): gpuaas's
  write shows the field manager ``gpuaas``, and the next run skips it ``gitops-managed``, naming
  ``argocd-controller``;
* an object with a finalizer deleted with ``propagationPolicy=Foreground`` is skipped ``being-deleted``.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gpuaas.actions import KubeWriter, execute_decisions
from gpuaas.actions._patches import stop_patch, stop_plan
from gpuaas.cluster.real._pki import Pki
from gpuaas.errors import Invalid
from gpuaas.models import Outcome
from gpuaas.operations.reclaim import plan, read_audit_view
from gpuaas.policies.reclaim import Decision, SkipCause
from gpuaas.policy import FreeGoal, Mode, Policy
from gpuaas.settings import GpuaasSettings
from gpuaas.sources import make_api_client
from gpuaas.store import Store
from tests.real.conftest import wait_until

pytestmark = [pytest.mark.real]

NS = "default"
HOOK_LABEL = "gpuaas-test/min-replicas"


def _deployment(name: str, labels: dict[str, str] | None = None, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {"app": name, **(labels or {})}}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "example.com/idle:1"}]}}}}


def _decision(obj: dict[str, Any], key: str) -> Decision:
    meta = obj["metadata"]
    return Decision(kind="Deployment", namespace=NS, name=meta["name"], uid=meta["uid"], tenant=None, gpus=1.0,
                    idle_seconds=3600.0, free=FreeGoal.quota, outcome=Outcome.planned, reason="idle for 1h",
                    resource_version=meta["resourceVersion"], idempotency_key=f"test/{meta['name']}/{key}",
                    mode=Mode.apply, evidence={"window_minutes": 30.0})


def _steady(settings: GpuaasSettings, name: str) -> dict[str, Any]:
    """The Deployment once its controllers stop writing it (the same resourceVersion 1.5 s apart): a decision is
    made on a snapshot, and the action skips an object changed since."""
    seen: list[dict[str, Any]] = []

    def still() -> bool:
        with KubeWriter(settings) as writer:
            seen.append(writer.get("Deployment", NS, name))
        if len(seen) > 1 and seen[-1]["metadata"]["resourceVersion"] == seen[-2]["metadata"]["resourceVersion"]:
            return True
        time.sleep(1.5)
        return False

    wait_until(f"Deployment {NS}/{name} settles", still, timeout=60)
    return seen[-1]


def _act(settings: GpuaasSettings, store: Store, obj: dict[str, Any], key: str) -> Any:
    with KubeWriter(settings) as writer:
        [result] = execute_decisions([_decision(obj, key)], store, writer, mode=Mode.apply, flow_run_id="real",
                                     now=datetime.now(UTC))
    return result


class _MinReplicas(BaseHTTPRequestHandler):
    """A mutating webhook: every reviewed object gets ``spec.replicas: 2`` (a "minimum replicas" policy)."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        patch = [{"op": "replace", "path": "/spec/replicas", "value": 2}]
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
            "uid": review["request"]["uid"], "allowed": True, "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch).encode()).decode()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def kube(settings: GpuaasSettings) -> Iterator[client.ApiClient]:
    api = make_api_client(settings)
    yield api
    api.close()


@pytest.fixture()
def made(kube: client.ApiClient) -> Iterator[list[str]]:
    """Names of the Deployments a test made: deleted afterwards, finalizers dropped first."""
    names: list[str] = []
    yield names
    apps = client.AppsV1Api(kube)
    for name in names:
        try:
            apps.patch_namespaced_deployment(name, NS, {"metadata": {"finalizers": None}})
            apps.delete_namespaced_deployment(name, NS, _request_timeout=10)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


@pytest.fixture()
def min_replicas_webhook(kube: client.ApiClient, tmp_path: Path) -> Iterator[None]:
    pki = Pki(tmp_path / "webhook-pki")
    crt, key = pki.issue("webhook")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MinReplicas)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(crt, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    admission = client.AdmissionregistrationV1Api(kube)
    name = "gpuaas-test-min-replicas"
    admission.create_mutating_webhook_configuration({"metadata": {"name": name}, "webhooks": [{
        "name": "min-replicas.gpuaas-test.example.com",
        "clientConfig": {"url": f"https://127.0.0.1:{server.server_address[1]}/mutate",
                         "caBundle": base64.b64encode(pki.ca_pem).decode()},
        "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["deployments"]}],
        "objectSelector": {"matchLabels": {HOOK_LABEL: "true"}}, "failurePolicy": "Fail", "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "timeoutSeconds": 5}]})
    try:
        yield
    finally:
        admission.delete_mutating_webhook_configuration(name)
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _reclaimed_events(kube: client.ApiClient, name: str) -> list[Any]:
    answer = client.EventsV1Api(kube).list_namespaced_event(NS, field_selector=f"regarding.name={name}",
                                                            _preload_content=False)
    return [e for e in json.loads(answer.data)["items"] if e.get("reason") == "Reclaimed"]


def test_a_stop_a_mutating_webhook_sets_back_is_failed_and_not_made_again(
        settings: GpuaasSettings, store: Store, kube: client.ApiClient, made: list[str],
        min_replicas_webhook: None, monkeypatch: pytest.MonkeyPatch) -> None:
    apps, name = client.AppsV1Api(kube), "stop-guards-webhook"
    made.append(name)
    apps.create_namespaced_deployment(NS, _deployment(name, {HOOK_LABEL: "true"}))

    def webhook_answers() -> bool:  # the API server takes a moment to call a newly registered webhook
        scaled = apps.patch_namespaced_deployment(name, NS, {"spec": {"replicas": 1}})
        return bool(scaled.spec.replicas == 2)

    wait_until("the mutating webhook is called", webhook_answers, timeout=30)
    first = _act(settings, store, _steady(settings, name), "1")
    assert (first.result, first.cause) == (Outcome.failed, SkipCause.stop_not_held), first.reason
    assert "spec.replicas is 2 (the stop sets 0)" in first.reason
    assert apps.read_namespaced_deployment(name, NS).spec.replicas == 2
    assert _reclaimed_events(kube, name) == []

    patches: list[str] = []
    real_patch = KubeWriter.patch
    monkeypatch.setattr(KubeWriter, "patch", lambda self, *a, **k: patches.append(a[2]) or real_patch(self, *a, **k))
    second = _act(settings, store, _steady(settings, name), "2")
    assert (second.result, second.cause) == (Outcome.skipped, SkipCause.stop_not_held), second.reason
    assert f"audit #{first.audit_id}" in second.reason
    assert patches == []


def test_a_field_the_schema_lacks_is_refused_by_name(settings: GpuaasSettings, kube: client.ApiClient,
                                                     made: list[str]) -> None:
    apps, name = client.AppsV1Api(kube), "stop-guards-strict"
    made.append(name)
    apps.create_namespaced_deployment(NS, _deployment(name))
    rv = _steady(settings, name)["metadata"]["resourceVersion"]
    with KubeWriter(settings) as writer, pytest.raises(Invalid) as refused:
        writer.patch("Deployment", NS, name, {"metadata": {"resourceVersion": rv}, "spec": {"suspend": True}})
    assert "no field spec.suspend" in str(refused.value), str(refused.value)
    after = kube.sanitize_for_serialization(apps.read_namespaced_deployment(name, NS))
    assert "suspend" not in after["spec"] and "gpuaas" not in {m["manager"] for m in after["metadata"]["managedFields"]}


def _server_side_apply(kube: client.ApiClient, manifest: dict[str, Any]) -> None:
    name = manifest["metadata"]["name"]
    params = kube.param_serialize("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/{name}",
                                  query_params=[("fieldManager", "argocd-controller"), ("force", "true")],
                                  header_params={"Content-Type": "application/apply-patch+yaml",
                                                 "Accept": "application/json"},
                                  body=manifest, auth_settings=["BearerToken"])
    answer = kube.call_api(*params, _request_timeout=10)
    answer.read()
    assert answer.status in (200, 201), answer.data[:300]


def _owners_of_replicas(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["manager"], m["operation"]) for m in obj["metadata"].get("managedFields") or []
            if "f:replicas" in (m.get("fieldsV1") or {}).get("f:spec", {})]


def test_a_stop_argo_cd_reverts_is_not_fought(settings: GpuaasSettings, store: Store, kube: client.ApiClient,
                                              made: list[str]) -> None:
    name = "stop-guards-argocd"
    made.append(name)
    manifest = _deployment(name)
    _server_side_apply(kube, manifest)
    live = _steady(settings, name)
    with KubeWriter(settings) as writer:
        first = _act(settings, store, live, "1")
        assert (first.result, first.cause) == (Outcome.skipped, SkipCause.gitops_managed), first.reason
        assert "argocd-controller sets spec.replicas" in first.reason
        # A stop made all the same (by an earlier gpuaas, or an operator): gpuaas's own write shows as "gpuaas".
        plan = stop_plan("Deployment", live, FreeGoal.quota, datetime.now(UTC))
        stopped = writer.patch("Deployment", NS, name, stop_patch(plan, live, 1))
        assert stopped["spec"]["replicas"] == 0
        assert ("gpuaas", "Update") in _owners_of_replicas(stopped)
        assert "OpenAPI-Generator" not in {m["manager"] for m in stopped["metadata"]["managedFields"]}
        _server_side_apply(kube, manifest)  # Argo CD's self-heal: a forced re-apply
    reverted = _steady(settings, name)
    assert reverted["spec"]["replicas"] == 2 and _owners_of_replicas(reverted) == [("argocd-controller", "Apply")]
    second = _act(settings, store, reverted, "2")
    assert (second.result, second.cause) == (Outcome.skipped, SkipCause.gitops_managed), second.reason
    assert "reverted by argocd-controller after gpuaas stopped it (audit #1)" in second.reason
    assert client.AppsV1Api(kube).read_namespaced_deployment(name, NS).spec.replicas == 2


def test_an_object_being_deleted_is_left_alone(settings: GpuaasSettings, store: Store, kube: client.ApiClient,
                                               made: list[str]) -> None:
    apps, name = client.AppsV1Api(kube), "stop-guards-deleting"
    made.append(name)
    apps.create_namespaced_deployment(NS, _deployment(name, finalizers=["example.com/keep"]))
    apps.delete_namespaced_deployment(name, NS, propagation_policy="Foreground")
    live = _steady(settings, name)
    assert live["metadata"].get("deletionTimestamp")
    result = _act(settings, store, live, "1")
    assert (result.result, result.cause) == (Outcome.skipped, SkipCause.being_deleted), result.reason
    assert "example.com/keep" in result.reason
    assert apps.read_namespaced_deployment(name, NS).spec.replicas == 2


def test_an_argo_managed_object_is_skipped_before_the_cap_while_unchanged(
        settings: GpuaasSettings, store: Store, kube: client.ApiClient, made: list[str]) -> None:
    """The skip records the resourceVersion the real API server showed; the next plan, on the same version, skips it
    before the cap without reading it; a write to the object makes it a candidate again."""
    name = "stop-guards-argocd-cap"
    made.append(name)
    _server_side_apply(kube, _deployment(name))
    live = _steady(settings, name)
    first = _act(settings, store, live, "1")
    assert (first.result, first.cause) == (Outcome.skipped, SkipCause.gitops_managed), first.reason
    [row] = [r for r in store.audit(flow="reclaim") if r.name == name]
    assert row.evidence["judged_version"] == live["metadata"]["resourceVersion"]

    def planned(obj: dict[str, Any], key: str) -> Decision:
        d = _decision(obj, key)
        view = read_audit_view(store, [d], datetime.now(UTC), skips_every=timedelta(minutes=60))
        [out] = plan([d], view, Policy(), Mode.apply, datetime.now(UTC)).decisions
        return out

    same = _steady(settings, name)
    assert same["metadata"]["resourceVersion"] == live["metadata"]["resourceVersion"]
    held = planned(same, "2")
    assert (held.outcome, held.cause) == (Outcome.skipped, SkipCause.gitops_managed)
    assert held.reason.startswith(f"still managed by its GitOps controller (audit #{first.audit_id}, unchanged since)")
    client.AppsV1Api(kube).patch_namespaced_deployment(name, NS, {"metadata": {"annotations": {"team": "edited"}}})
    assert planned(_steady(settings, name), "3").outcome == Outcome.planned  # judged live again
