"""The manifests the real control plane is given: Kueue's own CRDs and webhooks, KubeRay's CRDs,
and the manager's configuration file.

Kueue's CRDs and webhook configurations come from the ``sigs.k8s.io/kueue`` module itself (its
``config/components``), KubeRay's from ``github.com/ray-project/kuberay/ray-operator``; the build
copies them into the cache (``stage_manifests``). What a ``kustomize build`` of Kueue's default
overlay would change is done here, for loopback: every ``clientConfig.service`` becomes a
``clientConfig.url`` to ``https://127.0.0.1:<port>`` with our CA, the CRDs that Kueue converts get
the conversion webhook (so ``v1beta1`` reads work), and the pod-level webhooks keep the namespace
selector of Kueue's overlay. Webhooks of integrations that are not enabled are left out.

The KServe and Kubeflow modules are not served by the Go module proxy, so InferenceService and
Notebook CRDs are generated with the real group, version and kind and an open schema
(``x-kubernetes-preserve-unknown-fields``): no controller runs for them, only the objects are stored.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "INTEGRATIONS",
    "KUBERAY_MODULE",
    "generated_crds",
    "kueue_config",
    "kueue_crds",
    "kuberay_crds",
    "stage_manifests",
    "webhook_configurations",
]

KUBERAY_MODULE = ("github.com/ray-project/kuberay/ray-operator", "v1.6.0")
KWOK_POD_STAGES = ("pod-ready.yaml", "pod-delete.yaml")
INTEGRATIONS = ["batch/job", "ray.io/raycluster", "pod", "deployment", "statefulset"]
# (API group, resource) of the webhooks kept: Kueue's own kinds and the enabled integrations.
_KEPT = {("batch", "jobs"), ("ray.io", "rayclusters"), ("", "pods"), ("apps", "deployments"),
         ("apps", "statefulsets")}


def _module_dir(go: str, env: dict[str, str], cwd: Path, module: str, version: str) -> Path:
    out = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=1800, check=True)
    return Path(json.loads(out.stdout)["Dir"])


def stage_manifests(go: str, env: dict[str, str], tools: Path, kueue_version: str, kwok_version: str,
                    target: Path) -> None:
    """Copy the upstream YAML the cluster needs from the module cache into ``target``.

    Each module is downloaded from the tool module whose ``go.sum`` pins it (``tools/k8s/<name>``)."""
    kueue = _module_dir(go, env, tools / "kueue", "sigs.k8s.io/kueue", kueue_version) / "config" / "components"
    ray = _module_dir(go, env, tools / "kueue", *KUBERAY_MODULE) / "config" / "crd" / "bases"
    kwok = _module_dir(go, env, tools / "kwok", "sigs.k8s.io/kwok", kwok_version) / "kustomize" / "stage" / "pod" / "fast"
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(kueue / "crd" / "bases", tmp / "kueue-crd")
    shutil.copytree(kueue / "crd" / "patches", tmp / "kueue-crd-patches")
    shutil.copytree(kueue / "webhook", tmp / "kueue-webhook")
    shutil.copytree(ray, tmp / "kuberay-crd")
    # kwok's "fast" pod stages without ``pod-complete``: a Job's pods run until Kueue suspends the Job,
    # as in the emulator, instead of succeeding the moment they run.
    (tmp / "kwok-stages").mkdir()
    for stage in KWOK_POD_STAGES:
        shutil.copyfile(kwok / stage, tmp / "kwok-stages" / stage)
    for path in tmp.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)  # the module cache is read-only
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)


def _load_all(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict)]


def kueue_crds(manifests: Path, webhook_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """Kueue's CRDs, with the conversion webhook on those its overlay converts."""
    converted = set()
    for patch in sorted((manifests / "kueue-crd-patches").glob("webhook_in_*.yaml")):
        for doc in _load_all(patch):
            converted.add(doc["metadata"]["name"])
    crds = []
    for path in sorted((manifests / "kueue-crd").glob("*.yaml")):
        for crd in _load_all(path):
            if crd["metadata"]["name"] in converted:
                crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": f"{webhook_url}/convert", "caBundle": ca_bundle},
                    "conversionReviewVersions": ["v1"]}}
            crds.append(crd)
    return crds


def kuberay_crds(manifests: Path) -> list[dict[str, Any]]:
    return [crd for path in sorted((manifests / "kuberay-crd").glob("*.yaml")) for crd in _load_all(path)]


def _overlay_selectors(manifests: Path) -> dict[str, Any]:
    """webhook name -> namespaceSelector, from the patches of Kueue's webhook kustomization."""
    out: dict[str, Any] = {}
    kustomization = yaml.safe_load((manifests / "kueue-webhook" / "kustomization.yaml").read_text())
    for patch in kustomization.get("patches") or []:
        body = yaml.safe_load(patch.get("patch") or "{}") or {}
        for hook in body.get("webhooks") or []:
            if "namespaceSelector" in hook:
                out[hook["name"]] = hook["namespaceSelector"]
    return out


def _kept(hook: dict[str, Any]) -> bool:
    for rule in hook.get("rules") or []:
        for group in rule.get("apiGroups") or []:
            if group == "kueue.x-k8s.io":
                return True
            if any((group, resource.split("/")[0]) in _KEPT for resource in rule.get("resources") or []):
                return True
    return False


def webhook_configurations(manifests: Path, webhook_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """Kueue's mutating and validating webhook configurations, pointed at the manager on loopback."""
    selectors = _overlay_selectors(manifests)
    out = []
    for config in _load_all(manifests / "kueue-webhook" / "manifests.yaml"):
        config["metadata"] = {"name": f"kueue-{config['metadata']['name']}"}
        hooks = []
        for hook in config.get("webhooks") or []:
            if not _kept(hook):
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{webhook_url}{path}", "caBundle": ca_bundle}
            if hook["name"] in selectors:
                hook["namespaceSelector"] = selectors[hook["name"]]
            hooks.append(hook)
        config["webhooks"] = hooks
        out.append(config)
    return out


def _open_crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "versions": [{
                "name": version, "served": True, "storage": True,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                "subresources": {"status": {}},
            }],
        },
    }


def generated_crds() -> list[dict[str, Any]]:
    """InferenceService and Notebook, whose upstream modules the proxy does not serve."""
    return [_open_crd("serving.kserve.io", "v1beta1", "InferenceService", "inferenceservices"),
            _open_crd("kubeflow.org", "v1", "Notebook", "notebooks")]


def kueue_config(*, webhook_port: int, cert_dir: Path, metrics_port: int, health_port: int) -> dict[str, Any]:
    """The manager's ``Configuration``: loopback ports, no leader election, our certificates."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "enableClusterQueueResources": True},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "integrations": {"frameworks": list(INTEGRATIONS)},
        # Quota is kept for GPUs: cpu and memory requests are not accounted, as in the emulator
        # (and as a GPU-only ClusterQueue needs, or every pod's cpu request would be unadmittable).
        "resources": {"excludeResourcePrefixes": ["cpu", "memory"]},
        "managedJobsNamespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-system"]}]},
    }
