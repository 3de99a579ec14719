"""A wrong or unreachable source, as an operator meets it: the installed command in a subprocess.

The corpus: a host name that does not resolve, a port nothing listens on, a server answering
HTTP 401, a wrong path (HTTP 404), and a kubeconfig pointing nowhere. For each, the first line of
the command's output names the source, its URL (credentials scrubbed) and the error in words,
no traceback appears, and the exit code is documented: 1 when every source failed, 3 when the
run went on degraded (then ``--format json`` carries ``degraded`` and each source's error).
A URL without a scheme is refused when the settings load, naming the variable.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.sources.failures import in_words

pytestmark = pytest.mark.slow


class _Status(BaseHTTPRequestHandler):
    """Answers every request (GET, and POST as the Prometheus client queries) with this server's status."""

    status = 404

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = json.dumps({"kind": "Status", "message": "go away"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815 - the stdlib's name

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def status_server() -> Iterator[dict[int, str]]:
    """Two loopback servers: one answers 401 to everything, one 404; {status: base URL}."""
    servers = {}
    for status in (401, 404):
        handler = type(f"Status{status}", (_Status,), {"status": status})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[status] = server
    yield {s: f"http://127.0.0.1:{srv.server_address[1]}" for s, srv in servers.items()}
    for server in servers.values():
        server.shutdown()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: s3cr3t-token}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return path


def _gpuaas(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_API_URL"))}
    base |= {"GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_NVML": "off", "GPUAAS_RETRIES": "0",
             "GPUAAS_REQUEST_TIMEOUT_SECONDS": "5", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", *args], env=base | env, capture_output=True,
                          text=True, timeout=240, check=False)


def test_every_failure_is_named_in_words_on_the_first_line(tmp_path: Path, status_server: dict[int, str]) -> None:
    """Every source broken the same way: exit 1, one line naming each source, where it points and why."""
    refused = f"http://127.0.0.1:{_closed_port()}"
    cases = {  # words: (Prometheus and OpenCost URL, API server URL, how many of the three sources say the words)
        "name does not resolve": ("http://gpuaas-test.invalid:9090", "http://gpuaas-test.invalid:6443", 3),
        "connection refused": (refused, refused, 3),
        "HTTP 401: unauthorized": (status_server[401], status_server[401], 3),
        # A 404 from the API server means "this resource is not served" (an optional CRD), not a failure.
        "HTTP 404: not found": (f"{status_server[404]}/wrong/path", refused, 2),
    }
    for words, (url, api, count) in cases.items():
        proc = _gpuaas(tmp_path, "collect", GPUAAS_PROMETHEUS_URL=url, GPUAAS_OPENCOST_URL=url,
                       GPUAAS_KUBECONFIG=str(_kubeconfig(tmp_path / "kubeconfig", api)))
        assert proc.returncode == 1, (words, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stdout == ""
        first = proc.stderr.strip().splitlines()[-1]  # the progress lines come before it on a non-terminal
        assert first.startswith("error: ") and "every source failed" in first
        assert "collecting a snapshot: failed after " in proc.stderr and "done in" not in proc.stderr
        for source in ("Kubernetes API", "Prometheus", "OpenCost"):
            assert f"{source} at " in first, first
        assert first.count(words) == count, (words, first)
        assert "s3cr3t-token" not in proc.stderr and "%28" not in first  # no credentials, no encoded PromQL


def test_a_kubeconfig_pointing_nowhere_is_named(tmp_path: Path) -> None:
    proc = _gpuaas(tmp_path, "collect", GPUAAS_KUBECONFIG=str(tmp_path / "nowhere" / "config"),
                   GPUAAS_PROMETHEUS_URL="http://gpuaas-test.invalid:9090")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert f"Kubernetes API at kubeconfig {tmp_path / 'nowhere' / 'config'}" in line
    assert "Prometheus at http://gpuaas-test.invalid:9090: name does not resolve" in line


def test_a_url_without_a_scheme_is_refused_at_load(tmp_path: Path) -> None:
    proc = _gpuaas(tmp_path, "reclaim", GPUAAS_PROMETHEUS_URL="prometheus:9090")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip() == ("error: environment: GPUAAS_PROMETHEUS_URL: 'prometheus:9090' is not an http(s) "
                                   "URL with a host; write it as http://prometheus:9090")


@pytest.mark.integration
def test_one_failed_source_degrades_the_run_exit_3_and_json_says_why(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster) -> None:
    env = reclaim_fleet.settings_env() | {"GPUAAS_PROMETHEUS_URL": "http://gpuaas-test.invalid:9090"}
    table = _gpuaas(tmp_path, "reclaim", **env)
    assert table.returncode == 3, table.stderr
    assert table.stdout.splitlines()[0].startswith(
        "Degraded: Prometheus at http://gpuaas-test.invalid:9090: name does not resolve.")
    as_json = _gpuaas(tmp_path, "collect", "--format", "json", **env)
    assert as_json.returncode == 3, as_json.stderr
    doc = json.loads(as_json.stdout)
    assert doc["degraded"] is True
    assert doc["source_errors"] == {"prometheus": "Prometheus at http://gpuaas-test.invalid:9090: name does not resolve"}
    assert doc["sources"]["prometheus"]["error"] == doc["source_errors"]["prometheus"]
    assert doc["headline"].startswith("Degraded: Prometheus at")


@pytest.mark.parametrize(("text", "words"), [
    ("ConnectionError: HTTPConnectionPool(host='p', port=9090): Max retries exceeded with url: /api/v1/query?query=%28x"
     " (Caused by NameResolutionError(\"Failed to resolve 'p' ([Errno -2] Name or service not known)\"))",
     "name does not resolve"),
    ("ConnectError: [Errno 111] Connection refused", "connection refused (nothing listens on that port)"),
    ("HTTP 401 from /api/v1/query", "HTTP 401: unauthorized: the credentials were refused (check the token)"),
    ("ReadTimeout: HTTPConnectionPool(host='p', port=1): Read timed out. (read timeout=5)",
     "no answer in time (timed out)"),
    ("something new /api/v1/query?query=%28abc", "something new /api/v1/query"),
    ("SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
     "Hostname mismatch, certificate is not valid for 'prom.example'. (_ssl.c:1006)'))",
     "TLS failed: the certificate is not for this host name"),
    ("ConnectError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate in "
     "certificate chain (_ssl.c:1006)", "TLS failed: the certificate is not signed by a trusted CA"),
    ("SSLError: [SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)",
     "TLS failed (certificate or protocol)"),
    ("ProtocolError: ('Connection aborted.', SSLEOFError(8, '[SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in "
     "violation of protocol (_ssl.c:2427)'))", "connection dropped by the server"),
    ("ReadError: [SSL: UNEXPECTED_EOF_WHILE_READING] EOF occurred in violation of protocol (_ssl.c:2427)",
     "connection dropped by the server"),
], ids=["dns", "refused", "401", "timeout", "unknown-keeps-text-without-query", "tls-name", "tls-untrusted",
        "tls-protocol", "tls-closed-under-a-request", "tls-closed-httpx"])
def test_errors_in_words(text: str, words: str) -> None:
    assert in_words(RuntimeError(text)) == words


def test_a_source_with_no_url_names_the_variable_to_set() -> None:
    from gpuaas.errors import ConfigError
    from gpuaas.settings import GpuaasSettings
    from gpuaas.sources.failures import describe_failure

    settings = GpuaasSettings(prometheus_url=None, opencost_url=None, pushgateway_url=None)
    why = ConfigError("not configured", field="prometheus_url")
    assert describe_failure(settings, "prometheus", why) == "Prometheus: GPUAAS_PROMETHEUS_URL is not set"
    assert describe_failure(settings, "opencost", why) == (
        "OpenCost: neither GPUAAS_OPENCOST_URL nor GPUAAS_PROMETHEUS_URL is set")
    assert describe_failure(settings, "pushgateway", why) == "Pushgateway: GPUAAS_PUSHGATEWAY_URL is not set"
    with_prometheus = GpuaasSettings(prometheus_url="http://127.0.0.1:9", opencost_url=None)
    assert describe_failure(with_prometheus, "opencost", RuntimeError("Connection refused")) == (
        "OpenCost at http://127.0.0.1:9: connection refused (nothing listens on that port)")


def test_cost_report_without_a_prometheus_url_names_the_variable_to_set(tmp_path: Path) -> None:
    proc = _gpuaas(tmp_path, "cost-report", "--window", "6h")
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: GPUAAS_PROMETHEUS_URL: not set")
    assert "prometheus_url" not in proc.stderr


def test_a_push_without_a_pushgateway_url_names_the_variable_to_set() -> None:
    from gpuaas.errors import ConfigError
    from gpuaas.pushgateway import _gateway
    from gpuaas.settings import GpuaasSettings

    with pytest.raises(ConfigError, match=r"^GPUAAS_PUSHGATEWAY_URL: not set"):
        _gateway(GpuaasSettings(pushgateway_url=None))


@pytest.mark.parametrize("text", [
    "InvalidHeader: Invalid leading whitespace, reserved character(s), or return character(s) in header value: "
    "'Bearer top\\nPLANTED-secret'",
    "ValueError: Invalid header value b'Bearer top\nPLANTED-secret'",
    "headers {'Authorization': 'Bearer PLANTED-secret'} refused",
    "Authorization: Basic PLANTED-secret",
    "in header value: 'PLANTED-secret'",
], ids=["requests", "http.client", "mapping", "header-line", "extra-header"])
def test_a_credential_quoted_by_a_library_is_masked(text: str) -> None:
    """The settings refuse such a token when they load; the wording masks what a library quotes all the same."""
    from gpuaas.settings import GpuaasSettings
    from gpuaas.sources.failures import describe_failure

    assert "PLANTED-secret" not in in_words(RuntimeError(text))
    settings = GpuaasSettings(prometheus_url="http://127.0.0.1:9")
    line = describe_failure(settings, "prometheus", RuntimeError(text))
    assert "PLANTED-secret" not in line and line.startswith("Prometheus at http://127.0.0.1:9: ")


def test_words_without_a_credential_are_kept() -> None:
    assert in_words(RuntimeError("the bearer token file is fine; no token here")) == (
        "the bearer token file is fine; no token here")


def test_a_kubeconfig_token_with_a_line_break_is_named_not_shown(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{_closed_port()}"}}}}]
users: [{{name: u, user: {{token: "kube\\nPLANTED-secret"}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    proc = _gpuaas(tmp_path, "collect", GPUAAS_KUBECONFIG=str(kubeconfig))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "PLANTED-secret" not in proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert f"the token of user 'u' in kubeconfig {kubeconfig} holds a line break" in line
    assert "not JSON" not in line


def test_a_token_past_the_settings_check_is_still_not_quoted() -> None:
    """Settings built around the check (``model_copy``): the request fails in words, the token masked."""
    from datetime import UTC, datetime

    from pydantic import SecretStr

    from gpuaas.errors import SourceError
    from gpuaas.settings import GpuaasSettings
    from gpuaas.sources._prom_client import PromClient
    from gpuaas.sources.failures import describe_failure

    settings = GpuaasSettings(prometheus_url="http://127.0.0.1:9", retries=0).model_copy(
        update={"prometheus_token": SecretStr("top\nPLANTED-secret")})
    with pytest.raises(SourceError) as raised:
        PromClient(settings).query("up", datetime.now(UTC))
    line = describe_failure(settings, "prometheus", raised.value)
    assert "PLANTED-secret" not in str(raised.value) + line
    assert line == ("Prometheus at http://127.0.0.1:9: a request header could not be sent: the token or a header value "
                    "holds a line break or another character a header cannot carry")
