"""A kubeconfig whose user is an exec credential plugin: bounded by the request timeout, and its failure one line.

The official client waits for the plugin without a limit and, when it fails, logs at the root logger and goes on
with no credential. Here a plugin that hangs is stopped after ``GPUAAS_REQUEST_TIMEOUT_SECONDS``, one that fails
or answers without a credential is the ``ConfigError`` naming the kubeconfig's user, and naming the API server in a
failure line reads the file without running the plugin again.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path

import pytest

from gpuaas.errors import ConfigError
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._kube_client import make_api_client
from gpuaas.sources.failures import endpoint_of


def _plugin(tmp_path: Path, body: str) -> Path:
    """A kubeconfig whose user runs ``body`` (Python) as its exec plugin; each run appends a line to ``runs``."""
    script = tmp_path / "plugin.py"
    script.write_text(f"open({str(tmp_path / 'runs')!r}, 'a').write('run\\n')\n{body}\n")
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
current-context: x
clusters:
- {{name: c, cluster: {{server: "https://127.0.0.1:9"}}}}
users:
- name: ops
  user:
    exec: {{apiVersion: client.authentication.k8s.io/v1beta1, command: {sys.executable}, args: [{str(script)!r}]}}
contexts:
- {{name: x, context: {{cluster: c, user: ops}}}}
""")
    return path


def _runs(tmp_path: Path) -> int:
    runs = tmp_path / "runs"
    return len(runs.read_text().splitlines()) if runs.exists() else 0


TOKEN = ('import json; print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", '
         '"kind": "ExecCredential", "status": {"token": "tok-123"}}))')


def test_a_plugin_that_answers_gives_its_token(tmp_path: Path) -> None:
    api = make_api_client(GpuaasSettings(kubeconfig=_plugin(tmp_path, TOKEN)))
    assert "Bearer tok-123" in api.configuration.api_key.values()


def test_a_plugin_that_hangs_is_stopped_after_the_request_timeout(tmp_path: Path) -> None:
    settings = GpuaasSettings(kubeconfig=_plugin(tmp_path, "import time; time.sleep(60)"), request_timeout_seconds=1)
    started = time.monotonic()
    with pytest.raises(ConfigError) as refused:
        make_api_client(settings)
    assert time.monotonic() - started < 15
    assert refused.value.field == "kubeconfig"
    assert (f"cannot load Kubernetes credentials: the exec credential plugin of user 'ops' in kubeconfig "
            f"{settings.kubeconfig}: the credential plugin {sys.executable} gave no answer in 1 s") in str(refused.value)


@pytest.mark.parametrize(("body", "says"), [
    ("import sys; sys.stderr.write('token expired\\n'); sys.exit(1)", "process returned 1. token expired"),
    ("print('{\"apiVersion\": \"client.authentication.k8s.io/v1beta1\", \"kind\": \"ExecCredential\", "
     "\"status\": {}}')", "missing token or clientCertificateData field in plugin output"),
], ids=["fails", "no-credential"])
def test_a_plugin_without_a_credential_is_one_error_not_a_log_line_and_an_anonymous_client(
        tmp_path: Path, body: str, says: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigError) as refused:
        make_api_client(GpuaasSettings(kubeconfig=_plugin(tmp_path, body)))
    assert str(refused.value).endswith(f"in kubeconfig {tmp_path / 'kubeconfig'}: {says}")
    # This call's own lines: a background thread of an earlier test (Prefect's event worker) may log meanwhile.
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.thread == threading.get_ident()]


def test_the_failure_line_names_the_server_without_running_the_plugin(tmp_path: Path) -> None:
    settings = GpuaasSettings(kubeconfig=_plugin(tmp_path, "import time; time.sleep(60)"))
    started = time.monotonic()
    assert endpoint_of(settings, "kube") == "https://127.0.0.1:9"
    assert time.monotonic() - started < 5 and _runs(tmp_path) == 0


def test_a_login_at_the_terminal_is_not_cut_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where a person is at the terminal the client hands the plugin the terminal for a login, which takes as long as
    the person does: no bound then; a scheduled run (no terminal) has the request timeout."""
    from gpuaas.sources import _kube_exec

    for at_terminal, bound in ((True, None), (False, 1.0)):
        monkeypatch.setattr(_kube_exec, "_interactive", lambda at_terminal=at_terminal: at_terminal)
        with _kube_exec.loading_credentials(1.0):
            assert _kube_exec._local.timeout == bound
