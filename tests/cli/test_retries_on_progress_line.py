"""A source that is retried is said on the command's progress line while it is waited for, not left to a spinner.

Covers: ``gpuaas collect`` against a loopback Prometheus that answers 503 to its first requests and then answers
(empty results): stderr names Prometheus, its URL, the 503 and the attempt (``retry 1 of 3 in …``) before the run
goes on, Prometheus is read in the end, and the retry is said once, not again as a warning after the run; ``gpuaas
config preflight`` against a Kubernetes API nothing listens on: each retry of its requests is a progress line naming
the API and the attempt. Both run as an operator runs them (a process), with retries 0.05 s apart, so each takes
a few seconds; the server listens on 127.0.0.1 and answers a bounded number of requests.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REFUSED = 2
"""Requests the Prometheus here answers 503 before it answers: enough to fail the first attempt of the read."""

MAX_REQUESTS = 200
"""Requests it answers at all: a collect sends a few dozen queries, each retried at most 3 times."""


class _RefusesFirst(BaseHTTPRequestHandler):
    """503 to the first ``REFUSED`` requests, then an empty success as Prometheus writes it."""

    lock = threading.Lock()
    count = 0

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.lock:
            type(self).count += 1
            n = type(self).count
        if n > MAX_REQUESTS:
            self.send_error(500, "too many requests for this test")
            return
        status = 503 if n <= REFUSED else 200
        kind = "matrix" if self.path.endswith("query_range") else "vector"
        body = json.dumps({"status": "success", "data": {"resultType": kind, "result": []}} if status == 200
                          else {"status": "error", "errorType": "unavailable", "error": "starting up"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def prometheus() -> Iterator[str]:
    handler = type("Refuses", (_RefusesFirst,), {"count": 0, "lock": threading.Lock()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _nowhere_kubeconfig(path: Path) -> tuple[Path, str]:
    url = f"http://127.0.0.1:{_closed_port()}"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{url}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return path, url


def _gpuaas(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_API_URL"))}
    base |= {"GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_NVML": "off", "GPUAAS_RETRIES": "3",
             "GPUAAS_RETRY_BACKOFF_SECONDS": "0.05", "GPUAAS_REQUEST_TIMEOUT_SECONDS": "5", "COLUMNS": "400"}
    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", *args], env=base | env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_a_prometheus_answering_503_is_named_with_the_attempt_while_it_is_retried(
        tmp_path: Path, prometheus: str) -> None:
    kubeconfig, _ = _nowhere_kubeconfig(tmp_path / "kubeconfig")
    run = _gpuaas(tmp_path, "collect", "--format", "json", GPUAAS_PROMETHEUS_URL=prometheus,
                  GPUAAS_KUBECONFIG=str(kubeconfig), GPUAAS_RETRIES="3")
    assert "Traceback" not in run.stderr
    said = [line.strip() for line in run.stderr.splitlines() if line.startswith(f"  Prometheus at {prometheus}")]
    assert said, run.stderr
    assert said[0].startswith(f"Prometheus at {prometheus}: HTTP 503 from /api/v1/query: starting up")
    assert re.search(r"; retry 1 of 3 in \d+(\.\d)? s$", said[0]), said[0]
    assert run.stderr.index(said[0]) < run.stderr.index("collecting a snapshot: failed after" if run.returncode == 1
                                                        else "collecting a snapshot: done in")
    assert "retry #" not in run.stderr  # said once, on the progress line, not again as the log's line or a warning
    summary = json.loads(run.stdout)
    assert summary["sources"]["prometheus"]["ok"], summary["sources"]["prometheus"]  # the retry got the answer
    assert run.returncode == 3  # degraded: the Kubernetes API nothing listens on


def test_preflight_names_the_kubernetes_api_and_each_attempt_while_it_retries(tmp_path: Path) -> None:
    kubeconfig, url = _nowhere_kubeconfig(tmp_path / "kubeconfig")
    run = _gpuaas(tmp_path, "config", "preflight", "--format", "json", GPUAAS_KUBECONFIG=str(kubeconfig),
                  GPUAAS_RETRIES="2", GPUAAS_PROMETHEUS_URL=f"http://127.0.0.1:{_closed_port()}")
    assert "Traceback" not in run.stderr
    said = [line.strip() for line in run.stderr.splitlines() if line.startswith(f"  Kubernetes API at {url}")]
    assert [line.rsplit("; ", 1)[1][:len("retry 1 of 2")] for line in said] == ["retry 1 of 2", "retry 2 of 2"], (
        run.stderr)
    assert all("connection refused" in line for line in said)
    assert run.stderr.startswith("reading every source once…\n")
    assert run.returncode == 1  # the Kubernetes API and Prometheus checks failed


def test_a_failure_that_reads_as_markup_is_shown_as_text_and_the_retries_go_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the line is a spinner's, which would parse ``[/api/v1/query_range]`` as a closing tag: the
    error it raised came out of the retry loop it reported on, which then stopped retrying."""
    import io

    from rich.console import Console

    import gpuaas.cli._progress as progress_module
    from gpuaas.cli._progress import progress
    from tasks import run_retried

    terminal = Console(file=io.StringIO(), force_terminal=True, width=200)
    monkeypatch.setattr(progress_module, "err_console", terminal)
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("HTTP 503 from [/api/v1/query_range] [bold]")
        return "read"

    with progress("collect") as step:
        state = run_retried("read-prometheus", flaky, 3, lambda attempt: 0.0)
        assert step is not None
    assert state.is_completed() and state.result() == "read" and len(calls) == 3
