"""A ``GPUAAS_*`` variable one typo from a setting is refused, naming it and the setting it is close to.

pydantic-settings skips a variable that names no setting: ``GPUAAS_POLICY_FIEL=/etc/gpuaas/policy.yaml``
ran every flow on the default policy (its exclusions and disabled tenants gone; with ``--apply``, acting on
them), and ``GPUAAS_RETRYS=10`` kept 3 retries, without a word. Run through a real command in a subprocess,
as an operator's shell runs it: one ``error:`` line, exit 1, no traceback. Variables of other tools, and the
``GPUAAS_*`` variables read outside the settings, are left alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaas.errors import ConfigError
from gpuaas.settings import load_settings


def _audit_list(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GPUAAS_DATA_DIR": str(tmp_path / "data"), **variables}
    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "audit", "list"], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(("variable", "meant"), [
    ("GPUAAS_POLICY_FIEL", "GPUAAS_POLICY_FILE"),
    ("GPUAAS_POLICYFILE", "GPUAAS_POLICY_FILE"),
    ("GPUAAS_RETRYS", "GPUAAS_RETRIES"),
    ("GPUAAS_KUBE_CONFIG", "GPUAAS_KUBECONFIG"),
    ("gpuaas_prometheus_ur", "GPUAAS_PROMETHEUS_URL"),
])
def test_a_misspelt_variable_is_one_line_naming_it(tmp_path: Path, variable: str, meant: str) -> None:
    done = _audit_list(tmp_path, **{variable: "x"})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [f"error: environment: {variable.upper()} is no gpuaas variable: did you mean "
                                        f"{meant}? (as it is, it is ignored)"]


def test_variables_read_elsewhere_or_far_from_any_setting_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GPUAAS_CLUSTER_TOKEN", "GPUAAS_K8S_CACHE", "GPUAAS_NOTIFY_WEBHOOK_URL", "GPUAAS_PROJECT_DIR",
                 "GPUAAS_ENDPOINT_TEAM_A_CHAT", "GPUAAS_TEST_POSTGRES_URL", "GPUAAS_REPORT_SCREENSHOT",
                 "GPUAAS_PROMETHEUS_HEADERS__X_SCOPE_ORGID"):
        monkeypatch.setenv(name, "x")
    assert load_settings().retries == 3
    monkeypatch.setenv("GPUAAS_RETRIE", "5")  # beside them, one typo is still found
    with pytest.raises(ConfigError, match="GPUAAS_RETRIE is no gpuaas variable: did you mean GPUAAS_RETRIES"):
        load_settings()
