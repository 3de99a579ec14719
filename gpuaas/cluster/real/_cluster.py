"""``RealCluster``: etcd, kube-apiserver, the controllers, the scheduler, kwok and the Kueue manager
on loopback, with the scenario loaded.

Started the way Kueue's own integration tests start envtest (an API server and etcd), plus the
rest of a control plane: kube-controller-manager (Job, ReplicaSet, Deployment, StatefulSet and
garbage collector controllers), kube-scheduler, kwok for the nodes' kubelets (it runs the pods
bound to the scenario's nodes, which it manages), and the real Kueue manager. Certificates and a
bearer token are generated per run; the API server runs the RBAC authorizer; Kueue's CRDs and
webhooks come from its module, pointed at the manager on 127.0.0.1 with our CA. The scenario's
queues are created, then its jobs, RayClusters and the other objects: Kueue creates the Workloads
and admits them. A real Prometheus scrapes Kueue's ``/metrics`` (HTTPS, bearer token: the manager
checks it through TokenReview and SubjectAccessReview).

Stood in for (``_standin.PodStandIn``): the KubeRay operator (a RayCluster's pods) and the GPU
device plugin (which GPU indices a bound pod holds); a loopback exporter (``_gpu_exporter``) gives
those GPUs dcgm-exporter series and the pods OpenCost's metrics (and vLLM's, for a serving workload).
"""

from __future__ import annotations

import base64
import os
import shutil
import threading
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from gpuaas.cluster.prometheus import PrometheusServer, free_port
from gpuaas.cluster.real._build import Binaries, build_all
from gpuaas.cluster.real._gpu_exporter import GpuExporter
from gpuaas.cluster.real._kubeapi import KubeHTTP
from gpuaas.cluster.real._manifests import (
    generated_crds,
    kuberay_crds,
    kueue_config,
    kueue_crds,
    webhook_configurations,
)
from gpuaas.cluster.real._pki import Pki, new_token
from gpuaas.cluster.real._procs import Process, StartError
from gpuaas.cluster.real._scenario import KWOK_NODE_ANNOTATION, real_fleet_objects, real_workload_objects
from gpuaas.cluster.real._standin import PodStandIn
from gpuaas.cluster.scenario import Scenario

__all__ = ["RealCluster", "StartCancelled"]

ADMIN_USER = "gpuaas-admin"
# The controllers that make and remove the pods of what Kueue starts, and the Workloads of gone pods.
KUBE_CONTROLLERS = ("job-controller,replicaset-controller,deployment-controller,statefulset-controller,"
                    "garbage-collector-controller")


class StartCancelled(Exception):  # noqa: N818 - not an error: the operator asked for it
    """``cancel()`` was called while the cluster was starting; what had started is stopped."""


class RealCluster:
    """A context manager that starts everything on loopback and stops it newest first."""

    def __init__(self, scenario: Scenario | None, data_dir: Path, *, api_port: int = 0,
                 kubeconfig: Path | None = None, progress: Any = None, prometheus: bool = True,
                 token: str | None = None, apiserver_flags: tuple[str, ...] = (),
                 control_plane_only: bool = False) -> None:
        self.scenario = scenario
        self.data_dir = Path(data_dir)
        self.api_port = api_port or free_port()
        self.kubeconfig = Path(kubeconfig) if kubeconfig else self.data_dir / "kubeconfig"
        self.token = token or new_token()
        self._progress = progress or (lambda message: None)
        self._with_prometheus = prometheus
        self._apiserver_flags = apiserver_flags
        """More kube-apiserver flags (``--etcd-compaction-interval=2s``), for a test of the API server's own behaviour."""
        self._control_plane_only = control_plane_only
        """etcd and kube-apiserver alone: no CRDs, Kueue, controllers or scenario."""
        self._stop = threading.Event()
        self._procs: list[Process] = []
        self.prometheus: PrometheusServer | None = None
        self.api: KubeHTTP | None = None
        self.bins: Binaries | None = None
        self.pods: PodStandIn | None = None
        self._exporter: GpuExporter | None = None
        self.kueue_metrics_port = 0
        self.epoch = datetime.now(UTC)

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def prometheus_url(self) -> str:
        return self.prometheus.url if self.prometheus else ""

    @property
    def pki_dir(self) -> Path:
        return self.data_dir / "pki"

    def settings_env(self) -> dict[str, str]:
        """The ``GPUAAS_*`` settings that point gpuaas at this cluster (same keys as the embedded one)."""
        env = {"GPUAAS_KUBECONFIG": str(self.kubeconfig), "GPUAAS_METRICS__SAMPLE_INTERVAL_SECONDS": "60"}
        if self.prometheus is not None:
            env["GPUAAS_PROMETHEUS_URL"] = self.prometheus.url
        return env

    def cancel(self) -> None:
        self._stop.set()

    def _check(self) -> None:
        if self._stop.is_set():
            raise StartCancelled("the real cluster was stopped while starting")

    # --- processes -------------------------------------------------------------------------
    def _start_etcd(self, bins: Binaries) -> str:
        client, peer = free_port(), free_port()
        url = f"http://127.0.0.1:{client}"
        proc = Process("etcd", [
            str(bins.etcd), "--name", "gpuaas", "--data-dir", str(self.data_dir / "etcd"),
            "--listen-client-urls", url, "--advertise-client-urls", url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}", "--initial-cluster", f"gpuaas=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--log-level", "warn",
        ], self.data_dir / "logs")
        self._run(proc, lambda: _http_ok(f"{url}/health"), 60)
        return url

    def _start_apiserver(self, bins: Binaries, pki: Pki, etcd: str) -> None:
        crt, key = pki.issue("apiserver")
        tokens = self.pki_dir / "tokens.csv"
        tokens.write_text(f'{self.token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
        tokens.chmod(0o600)
        proc = Process("kube-apiserver", [
            str(bins.kube_apiserver), f"--etcd-servers={etcd}", f"--secure-port={self.api_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--tls-cert-file={crt}",
            f"--tls-private-key-file={key}", f"--client-ca-file={pki.ca_file}", f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC", f"--service-account-issuer={self.api_url}",
            f"--service-account-key-file={pki.sa_pub_file}",
            f"--service-account-signing-key-file={pki.sa_key_file}",
            "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition", f"--cert-dir={self.pki_dir}",
            "--enable-priority-and-fairness=false", "--profiling=false", "-v=0", *self._apiserver_flags,
        ], self.data_dir / "logs")
        self.api = KubeHTTP(self.api_url, pki.ca_file, self.token)
        api = self.api
        self._run(proc, lambda: api.ok("/readyz"), 120)

    def _start_kueue(self, bins: Binaries, pki: Pki, webhook_port: int) -> None:
        _metrics_certs(pki)
        certs = self.data_dir / "kueue-certs"
        certs.mkdir(parents=True, exist_ok=True)
        crt, key = pki.issue("kueue-webhook")
        os.replace(crt, certs / "tls.crt")
        os.replace(key, certs / "tls.key")
        health = free_port()
        self.kueue_metrics_port = free_port()
        config = self.data_dir / "kueue-config.yaml"
        config.write_text(yaml.safe_dump(kueue_config(webhook_port=webhook_port, cert_dir=certs,
                                                      metrics_port=self.kueue_metrics_port, health_port=health)))
        admin = self.data_dir / "kueue-kubeconfig"
        self._write_kubeconfig(admin, pki, "kueue-manager")
        proc = Process("kueue", [
            str(bins.kueue), f"--config={config}", f"--kubeconfig={admin}",
            # The visibility API is not registered (see the module doc): its server stays off.
            "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=2",
        ], self.data_dir / "logs")
        self._run(proc, lambda: _http_ok(f"http://127.0.0.1:{health}/readyz"), 120)

    def _start_kube_components(self, bins: Binaries, pki: Pki) -> None:
        """kube-controller-manager, kube-scheduler and kwok, each with the admin token's kubeconfig.

        The controller manager runs only the controllers that make and remove the pods of what
        Kueue starts. Not the node lifecycle controller: on a loaded test machine it would find kwok's
        heartbeats late and mark every pod unready; the API server's ``TaintNodesByCondition``
        admission is off instead, so a new Node is not tainted ``not-ready`` with nothing to lift it. The two serve their
        health checks on free loopback ports with self-signed certificates; kwok manages only the
        nodes annotated for it and runs its pod stages from its module without ``pod-complete``."""
        kubeconfig = self.data_dir / "components-kubeconfig"
        self._write_kubeconfig(kubeconfig, pki, "components")
        logs = self.data_dir / "logs"
        for name, binary, controllers in (
                ("kube-controller-manager", bins.kube_controller_manager, KUBE_CONTROLLERS),
                ("kube-scheduler", bins.kube_scheduler, "")):
            port = free_port()
            argv = [str(binary), f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}", "--authentication-skip-lookup=true",
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1", f"--secure-port={port}",
                    f"--cert-dir={self.data_dir / name}", "-v=1"]
            if controllers:
                argv += [f"--controllers={controllers}", "--use-service-account-credentials=false",
                         "--concurrent-gc-syncs=5"]
            proc = Process(name, argv, logs)
            self._run(proc, partial(_https_ok, f"https://127.0.0.1:{port}/healthz"), 120)
        stages = bins.manifests / "kwok-stages"
        argv = [str(bins.kwok), f"--kubeconfig={kubeconfig}",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                "--cidr=10.244.0.1/16", "--node-ip=10.0.0.1"]
        argv += [f"--config={path}" for path in sorted(stages.glob("*.yaml"))]
        started = time.monotonic()
        self._run(Process("kwok", argv, logs), lambda: time.monotonic() - started > 1.0, 30)

    def _run(self, proc: Process, ready: Any, timeout: float) -> None:
        self._check()
        self._progress(f"starting {proc.name}")
        proc.start()
        self._procs.append(proc)
        proc.wait_ready(ready, timeout)

    # --- objects ---------------------------------------------------------------------------
    def _install(self, bins: Binaries, pki: Pki, webhook: str) -> None:
        assert self.api is not None
        api = self.api
        ca = base64.b64encode(pki.ca_pem).decode()
        self._progress("installing the Kueue, KubeRay, KServe and Notebook CRDs")
        crds = kueue_crds(bins.manifests, webhook, ca) + kuberay_crds(bins.manifests) + generated_crds()
        for crd in crds:
            api.create(crd)
        for crd in crds:
            name = crd["metadata"]["name"]
            api.wait_for(f"CRD {name} established", partial(_has, api, "CustomResourceDefinition", name, "Established"))
        for config in webhook_configurations(bins.manifests, webhook, ca):
            api.create(config)

    def load_scenario(self, scenario: Scenario) -> None:
        """Create the queues, wait until Kueue calls them active, then submit the workloads."""
        assert self.api is not None
        api = self.api
        self._progress(f"loading scenario {scenario.name!r}")
        for obj in real_fleet_objects(scenario):
            # A Node keeps the status it is created with (as a kubelet registers it), so kwok never sees
            # it without its capacity; other kinds' status is written through the subresource.
            status = obj.pop("status", None) if obj["kind"] != "Node" else None
            api.create(obj)
            if status is not None:
                api.merge_patch(obj["kind"], obj["metadata"]["name"], {"status": status}, subresource="status")
        for obj in real_fleet_objects(scenario):
            if obj["kind"] == "ClusterQueue":
                name = obj["metadata"]["name"]
                api.wait_for(f"ClusterQueue {name} active", partial(_has, api, "ClusterQueue", name, "Active"))
        for obj in real_workload_objects(scenario, self.epoch):
            self._check()
            api.create(obj)

    # --- lifecycle -------------------------------------------------------------------------
    def start(self) -> RealCluster:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.bins = bins = build_all(self._progress)
            self._check()
            pki = Pki(self.pki_dir)
            etcd = self._start_etcd(bins)
            self._start_apiserver(bins, pki, etcd)
            assert self.api is not None
            if self._control_plane_only:
                self._write_kubeconfig(self.kubeconfig, pki, "gpuaas-real")
                return self
            self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})
            # The webhook configurations name the manager's port before it starts.
            webhook_port = free_port()
            self._install(bins, pki, f"https://127.0.0.1:{webhook_port}")
            self._start_kueue(bins, pki, webhook_port)
            self._start_kube_components(bins, pki)
            self._write_kubeconfig(self.kubeconfig, pki, "gpuaas-real")
            self.pods = PodStandIn(self.api)
            if self._with_prometheus:
                self._start_prometheus()
            if self.scenario is not None:
                self.load_scenario(self.scenario)
            # Started last: its passes would only compete with the start-up for the API server.
            self.pods.start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_prometheus(self) -> None:
        assert self.api is not None
        token_file = self.pki_dir / "prometheus.token"
        token_file.write_text(self.token)
        token_file.chmod(0o600)
        targets = []
        if self.scenario is not None and self.pods is not None:
            self._exporter = GpuExporter(self.scenario, self.pods.bound)
            self._exporter.start()
            targets.append(self._exporter.target)
        self.prometheus = PrometheusServer(self.data_dir / "prometheus", scrape_interval="5s", scrape_targets=targets,
                                           extra_scrape_configs=[{
            "job_name": "kueue", "scheme": "https", "tls_config": {"insecure_skip_verify": True},
            "authorization": {"credentials_file": str(token_file)},
            "static_configs": [{"targets": [f"127.0.0.1:{self.kueue_metrics_port}"]}],
        }])
        self._check()
        self._progress("starting Prometheus")
        self.prometheus.start()

    def _write_kubeconfig(self, path: Path, pki: Pki, context: str) -> None:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": context, "cluster": {
                "server": self.api_url, "certificate-authority-data": base64.b64encode(pki.ca_pem).decode()}}],
            "users": [{"name": ADMIN_USER, "user": {"token": self.token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": ADMIN_USER,
                                                        "namespace": "default"}}],
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(yaml.safe_dump(config, sort_keys=False))
            os.replace(partial, path)
        except BaseException:
            partial.unlink(missing_ok=True)  # it holds the token: never left behind
            raise

    def stop(self) -> None:
        self._stop.set()
        if self.pods is not None:
            self.pods.stop()
        if self.prometheus is not None:
            try:
                self.prometheus.stop()
            except Exception:  # noqa: BLE001 - keep stopping the rest
                pass
        if self._exporter is not None:
            self._exporter.stop()
        if self.api is not None:
            self.api.close()
        while self._procs:
            self._procs.pop().stop()

    def wait(self, stop: threading.Event) -> None:
        """Block until ``stop`` is set or a process of the control plane dies."""
        while not stop.wait(0.5):
            for proc in self._procs:
                if not proc.alive():
                    raise StartError(f"{proc.name} exited: {proc.log_tail()}")

    def __enter__(self) -> RealCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")


def _metrics_certs(pki: Pki) -> None:
    """Kueue v0.17 with internal cert management off reads its metrics serving pair from a fixed
    path, ``/etc/kueue/metrics/certs``: write a loopback pair there once per machine (kept, since
    another run's manager may be reading it; Prometheus does not verify it)."""
    crt, key = KUEUE_METRICS_CERTS / "tls.crt", KUEUE_METRICS_CERTS / "tls.key"
    if crt.is_file() and key.is_file():
        return
    try:
        KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        made_crt, made_key = pki.issue("kueue-metrics")
        shutil.copyfile(made_key, key)
        key.chmod(0o600)
        shutil.copyfile(made_crt, crt)
    except OSError as exc:
        raise StartError(f"the Kueue manager reads its metrics certificate from {KUEUE_METRICS_CERTS}, which "
                         f"cannot be written ({exc.strerror}): create it once with a loopback tls.crt/tls.key pair, "
                         "or run as a user who may write /etc/kueue") from exc


def _http_ok(url: str) -> bool:
    import httpx

    return httpx.get(url, timeout=2).status_code == 200


def _https_ok(url: str) -> bool:
    """A component's health check on its self-signed loopback certificate."""
    import httpx

    return httpx.get(url, timeout=2, verify=False).status_code == 200  # noqa: S501 - loopback, self-signed


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def _has(api: KubeHTTP, kind: str, name: str, condition: str) -> bool:
    """The cluster-scoped object carries ``condition`` = True."""
    return _condition(api.get(kind, name), condition)
