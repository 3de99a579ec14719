"""HTTPS sources signed by a cluster's own CA, Prometheus behind a bearer token read from a file.

The embedded cluster's real Prometheus, its OpenCost API and Debian's Pushgateway each sit behind
a loopback HTTPS front (``tests/tls_front.py``) with a certificate of a CA made for the test; the
Prometheus and OpenCost fronts each let one bearer token through. ``gpuaas collect`` runs as an operator
runs it, a real process. With ``GPUAAS_CA_FILE``, ``GPUAAS_PROMETHEUS_TOKEN_FILE`` and
``GPUAAS_OPENCOST_TOKEN`` every source answers and the summary is pushed; without the CA file each HTTPS source fails its handshake, named;
a token rotated in its file is the one the next run sends. Bad values of either setting are one
line naming the variable, before anything runs.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuaas._https import ssl_context
from gpuaas.cluster.real._pki import Pki
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.errors import SOURCE_NAMES, ConfigError
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._prom_client import PromClient
from gpuaas.sources.failures import describe_failure
from gpuaas.sources.opencost import fetch_allocation
from tests.tls_front import TlsFront

pytestmark = pytest.mark.slow

OPENCOST_TOKEN = "opencost-token"


@dataclass
class Fronts:
    ca_file: Path
    token_file: Path
    prometheus: TlsFront
    opencost: TlsFront
    pushgateway: TlsFront


@pytest.fixture(scope="module")
def fronts(reclaim_fleet: EmbeddedCluster, pushgateway_url: str,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fronts]:
    pki = Pki(tmp_path_factory.mktemp("pki"))
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text("first-token\n")
    with (TlsFront(reclaim_fleet.prometheus_url, pki, "prometheus", token="first-token") as prometheus,
          TlsFront(reclaim_fleet.opencost_url, pki, "opencost", token=OPENCOST_TOKEN) as opencost,
          TlsFront(pushgateway_url, pki, "pushgateway") as pushgateway):
        yield Fronts(pki.ca_file, token_file, prometheus, opencost, pushgateway)


def _gpuaas(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("GPUAAS_", "PREFECT_API_URL", "SSL_CERT_", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"))}
    base |= {"GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_NVML": "off", "GPUAAS_RETRIES": "0",
             "GPUAAS_REQUEST_TIMEOUT_SECONDS": "10", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", *args], env=base | env, capture_output=True,
                          text=True, timeout=240, check=False)


def _env(cluster: EmbeddedCluster, fronts: Fronts, **extra: str) -> dict[str, str]:
    return cluster.settings_env() | {
        "GPUAAS_PROMETHEUS_URL": fronts.prometheus.url, "GPUAAS_OPENCOST_URL": fronts.opencost.url,
        "GPUAAS_PUSHGATEWAY_URL": fronts.pushgateway.url, "GPUAAS_PROMETHEUS_TOKEN_FILE": str(fronts.token_file),
        "GPUAAS_OPENCOST_TOKEN": OPENCOST_TOKEN,
    } | extra


@pytest.mark.integration
def test_every_https_source_answers_with_the_ca_file_and_the_token_file(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, fronts: Fronts) -> None:
    before = (len(fronts.prometheus.relayed), len(fronts.opencost.relayed), len(fronts.pushgateway.relayed))
    env = _env(reclaim_fleet, fronts, GPUAAS_CA_FILE=str(fronts.ca_file))
    run = _gpuaas(tmp_path, "collect", "--format", "json", **env)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["degraded"] is False and doc["source_errors"] == {}
    assert doc["sources"]["prometheus"]["ok"] and doc["sources"]["opencost"]["ok"]
    assert doc["workloads"] > 0
    assert fronts.prometheus.refused == 0 and fronts.opencost.refused == 0
    prometheus, opencost, pushed = (fronts.prometheus.relayed[before[0]:], fronts.opencost.relayed[before[1]:],
                                    fronts.pushgateway.relayed[before[2]:])
    assert any(r.startswith("POST /api/v1/query") for r in prometheus)
    assert any(r.startswith("GET /allocation") for r in opencost)
    assert [r for r in pushed if r.startswith(("PUT", "POST"))] == ["PUT /metrics/job/gpuaas_collect"]
    assert "not pushed" not in run.stderr


@pytest.mark.integration
def test_without_the_ca_file_each_https_source_fails_its_handshake_by_name(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, fronts: Fronts) -> None:
    pushed = len(fronts.pushgateway.relayed)
    run = _gpuaas(tmp_path, "collect", "--format", "json", **_env(reclaim_fleet, fronts))
    assert run.returncode == 3, run.stderr  # the Kubernetes API still answers: degraded, not failed
    doc = json.loads(run.stdout)
    untrusted = ("TLS failed: the certificate is not signed by a trusted CA "
                 "(set GPUAAS_CA_FILE to the CA bundle that signs it)")
    assert doc["source_errors"] == {"prometheus": f"Prometheus at {fronts.prometheus.url}: {untrusted}",
                                    "opencost": f"OpenCost at {fronts.opencost.url}: {untrusted}"}
    assert len(fronts.pushgateway.relayed) == pushed  # the push never got past the handshake either
    assert f"warning: summary metrics not pushed: Pushgateway at {fronts.pushgateway.url}: {untrusted}\n" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.integration
def test_a_ca_file_that_does_not_sign_the_source_is_named(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, fronts: Fronts) -> None:
    other = Pki(tmp_path / "other")  # a CA bundle, but of another CA
    env = _env(reclaim_fleet, fronts, GPUAAS_CA_FILE=str(other.ca_file))
    run = _gpuaas(tmp_path, "collect", "--format", "json", **env)
    assert run.returncode == 3, run.stderr
    assert json.loads(run.stdout)["source_errors"]["prometheus"] == (
        f"Prometheus at {fronts.prometheus.url}: TLS failed: the certificate is not signed by a trusted CA "
        f"(not by one in GPUAAS_CA_FILE {other.ca_file})")


@pytest.mark.integration
def test_a_token_rotated_in_its_file_is_the_one_the_next_run_sends(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, fronts: Fronts) -> None:
    env = _env(reclaim_fleet, fronts, GPUAAS_CA_FILE=str(fronts.ca_file))
    try:
        fronts.prometheus.token = "second-token"  # the proxy now accepts only the rotated token
        stale = _gpuaas(tmp_path, "collect", "--format", "json", **env)
        assert stale.returncode == 3, stale.stderr
        assert json.loads(stale.stdout)["source_errors"]["prometheus"].startswith(
            f"Prometheus at {fronts.prometheus.url}: HTTP 401: unauthorized")
        fronts.token_file.write_text("second-token\n")  # the kubelet rotates the projected token
        fresh = _gpuaas(tmp_path, "collect", "--format", "json", **env)
        assert fresh.returncode == 0, fresh.stderr
        assert json.loads(fresh.stdout)["sources"]["prometheus"]["ok"]
    finally:
        fronts.prometheus.token = "first-token"
        fronts.token_file.write_text("first-token\n")


def test_bad_tls_and_token_settings_are_one_line_naming_the_variable(tmp_path: Path) -> None:
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("-----BEGIN NOTHING-----\nhello\n")
    token = tmp_path / "token"
    token.write_text("t0ken\n")
    cases = {
        f"GPUAAS_CA_FILE: {str(tmp_path / 'nowhere.crt')!r}: no such file": {
            "GPUAAS_CA_FILE": str(tmp_path / "nowhere.crt")},
        f"GPUAAS_CA_FILE: {str(not_pem)!r} holds no PEM CA certificate": {"GPUAAS_CA_FILE": str(not_pem)},
        f"GPUAAS_CA_FILE: {str(tmp_path)!r} is a directory, not a PEM file of CA certificates": {
            "GPUAAS_CA_FILE": str(tmp_path)},
        f"GPUAAS_PROMETHEUS_TOKEN_FILE: {str(tmp_path / 'gone')!r}: no such file": {
            "GPUAAS_PROMETHEUS_TOKEN_FILE": str(tmp_path / "gone")},
        "GPUAAS_PROMETHEUS_TOKEN and GPUAAS_PROMETHEUS_TOKEN_FILE are both set (or the token is in the Prefect "
        "Secret block 'gpuaas-prometheus-token'): set one of them": {
            "GPUAAS_PROMETHEUS_TOKEN": "t0ken", "GPUAAS_PROMETHEUS_TOKEN_FILE": str(token)},
        "GPUAAS_PROMETHEUS_HEADERS: 'X-Scope OrgID' is not an HTTP header name": {
            "GPUAAS_PROMETHEUS_HEADERS": '{"X-Scope OrgID": "t0ken"}'},
        "GPUAAS_PROMETHEUS_HEADERS: the value of 'X-Scope-OrgID' holds a line break; a token or header value is one "
        "line of printable text (the value is not shown)": {
            "GPUAAS_PROMETHEUS_HEADERS": '{"X-Scope-OrgID": "a\\r\\nX-Evil: t0ken"}'},
        "GPUAAS_PROMETHEUS_HEADERS sets Authorization, and so does the Prometheus token (GPUAAS_PROMETHEUS_TOKEN or its "
        "file): set one of them": {
            "GPUAAS_PROMETHEUS_HEADERS": '{"Authorization": "Basic t0ken"}', "GPUAAS_PROMETHEUS_TOKEN": "t0ken"},
        "GPUAAS_OPENCOST_TOKEN and GPUAAS_OPENCOST_TOKEN_FILE are both set (or the token is in the Prefect "
        "Secret block 'gpuaas-opencost-token'): set one of them": {
            "GPUAAS_OPENCOST_TOKEN": "t0ken", "GPUAAS_OPENCOST_TOKEN_FILE": str(token)},
        f"GPUAAS_OPENCOST_TOKEN_FILE: {str(tmp_path / 'gone')!r}: no such file": {
            "GPUAAS_OPENCOST_TOKEN_FILE": str(tmp_path / "gone")},
        "GPUAAS_OPENCOST_HEADERS: 'X-Api-Key:' is not an HTTP header name": {
            "GPUAAS_OPENCOST_HEADERS": '{"X-Api-Key:": "t0ken"}'},
        "GPUAAS_OPENCOST_HEADERS sets Authorization, and so does the OpenCost token (GPUAAS_OPENCOST_TOKEN or its "
        "file): set one of them": {
            "GPUAAS_OPENCOST_HEADERS": '{"Authorization": "Basic t0ken"}', "GPUAAS_OPENCOST_TOKEN": "t0ken"},
    }
    for line, env in cases.items():
        proc = _gpuaas(tmp_path, "collect", GPUAAS_PROMETHEUS_URL="https://prometheus.invalid:9091", **env)
        assert (proc.returncode, proc.stdout) == (1, ""), proc.stderr
        assert proc.stderr.strip() == f"error: environment: {line}"
        assert "t0ken" not in proc.stderr


def _open_prometheus(settings: GpuaasSettings) -> None:
    PromClient(settings)


def _ask_opencost(settings: GpuaasSettings) -> None:
    fetch_allocation(settings, {"window": "1h"})


@pytest.mark.parametrize(("content", "words"), [
    (None, "cannot read it: no such file or directory"),
    ("\n", "is empty"),
], ids=["gone", "empty"])
@pytest.mark.parametrize(("source", "url", "send"), [
    ("prometheus", "https://prometheus.example:9091", _open_prometheus),
    ("opencost", "https://opencost.example:9003", _ask_opencost),
], ids=["prometheus", "opencost"])
def test_a_token_file_unreadable_at_the_run_fails_its_source_naming_the_file(
        tmp_path: Path, content: str | None, words: str, source: str, url: str,
        send: Callable[[GpuaasSettings], None]) -> None:
    """The file is checked when the settings load and read at each run: between the two it can go."""
    token = tmp_path / "token"
    token.write_text("t0ken")
    settings = GpuaasSettings(**{f"{source}_url": url, f"{source}_token_file": token})
    if content is None:
        token.unlink()
    else:
        token.write_text(content)
    with pytest.raises(ConfigError) as raised:
        send(settings)
    assert describe_failure(settings, source, raised.value) == (
        f"{SOURCE_NAMES[source]} at {url}: GPUAAS_{source.upper()}_TOKEN_FILE: "
        f"{token}{':' if content is None else ''} {words}")


def test_a_ca_bundle_rotated_under_a_running_worker_is_read_again(tmp_path: Path) -> None:
    first_ca, second_ca = Pki(tmp_path / "first"), Pki(tmp_path / "second")
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(first_ca.ca_pem)
    settings = GpuaasSettings(ca_file=bundle)
    context = ssl_context(settings)
    assert context is not None and ssl_context(settings) is context  # one context while the file is the same
    assert context.get_ca_certs(binary_form=True) == [ssl.PEM_cert_to_DER_cert(first_ca.ca_pem.decode())]
    bundle.write_bytes(second_ca.ca_pem)
    later = bundle.stat().st_mtime_ns + 1_000_000_000
    os.utime(bundle, ns=(later, later))
    rotated = ssl_context(settings)
    assert rotated is not None and rotated.get_ca_certs(binary_form=True) == [
        ssl.PEM_cert_to_DER_cert(second_ca.ca_pem.decode())]
    bundle.unlink()
    with pytest.raises(ConfigError, match=f"^GPUAAS_CA_FILE: {bundle}: no such file or directory$"):
        ssl_context(settings)


@pytest.mark.integration
def test_the_tenant_header_of_a_multi_tenant_prometheus_is_sent_with_every_query(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, fronts: Fronts) -> None:
    env = _env(reclaim_fleet, fronts, GPUAAS_CA_FILE=str(fronts.ca_file))
    try:
        fronts.prometheus.tenant = "gpu-fleet"
        without = _gpuaas(tmp_path, "collect", "--format", "json", **env)
        assert without.returncode == 3, without.stderr
        assert json.loads(without.stdout)["source_errors"]["prometheus"].startswith(
            f"Prometheus at {fronts.prometheus.url}: HTTP 401")
        refused, relayed = fronts.prometheus.refused, len(fronts.prometheus.relayed)
        env["GPUAAS_PROMETHEUS_HEADERS"] = '{"X-Scope-OrgID": "gpu-fleet"}'
        run = _gpuaas(tmp_path, "collect", "--format", "json", **env)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["sources"]["prometheus"]["ok"]
        assert fronts.prometheus.refused == refused and len(fronts.prometheus.relayed) > relayed
    finally:
        fronts.prometheus.tenant = None


@pytest.mark.integration
def test_opencost_behind_its_proxy_takes_its_own_token_and_headers(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, fronts: Fronts) -> None:
    """OpenCost's API behind an auth proxy: without its token the source fails by name (Prometheus's token is
    not sent there); with it and the gateway's header it answers, and the proxy saw no refusal."""
    env = _env(reclaim_fleet, fronts, GPUAAS_CA_FILE=str(fronts.ca_file))
    del env["GPUAAS_OPENCOST_TOKEN"]
    without = _gpuaas(tmp_path, "collect", "--format", "json", **env)
    assert without.returncode == 3, without.stderr
    doc = json.loads(without.stdout)
    assert doc["sources"]["prometheus"]["ok"]
    assert doc["source_errors"] == {"opencost": f"OpenCost at {fronts.opencost.url}: HTTP 401: unauthorized: the "
                                                "credentials were refused (check the token)"}
    try:
        fronts.opencost.tenant = "finops"
        refused = fronts.opencost.refused
        env |= {"GPUAAS_OPENCOST_TOKEN_FILE": str(fronts.token_file)}  # Prometheus's token: refused there
        wrong = _gpuaas(tmp_path, "collect", "--format", "json", **env)
        assert json.loads(wrong.stdout)["source_errors"]["opencost"].startswith(
            f"OpenCost at {fronts.opencost.url}: HTTP 401")
        assert fronts.opencost.refused > refused
        env.pop("GPUAAS_OPENCOST_TOKEN_FILE")
        env |= {"GPUAAS_OPENCOST_TOKEN": OPENCOST_TOKEN, "GPUAAS_OPENCOST_HEADERS": '{"X-Scope-OrgID": "finops"}'}
        refused, relayed = fronts.opencost.refused, len(fronts.opencost.relayed)
        run = _gpuaas(tmp_path, "collect", "--format", "json", **env)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["sources"]["opencost"]["ok"]
        assert fronts.opencost.refused == refused
        assert any(r.startswith("GET /allocation") for r in fronts.opencost.relayed[relayed:])
    finally:
        fronts.opencost.tenant = None
