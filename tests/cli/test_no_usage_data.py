"""The command line sends Prefect no usage data, and prints no notice about it above its headline.

Prefect's client keeps a device id and sends usage events unless ``DO_NOT_TRACK`` is set (the server's
``PREFECT_SERVER_ANALYTICS_ENABLED`` is another switch); its first run prints a notice saying so on stderr. The
command line sets both before Prefect is imported, as the image does for the flows the worker runs.
"""

from __future__ import annotations

import os
import subprocess
import sys


def _env(**extra: str) -> dict[str, str]:
    """This environment without what would turn the telemetry off anyway (``DO_NOT_TRACK``, a CI's variables)."""
    from prefect._internal.analytics.ci_detection import CI_ENV_VARS

    return {k: v for k, v in os.environ.items() if k != "DO_NOT_TRACK" and k not in CI_ENV_VARS} | extra


CHECK = ("import gpuaas.cli._flows; from prefect._internal.analytics.enabled import is_telemetry_enabled; "
         "print(is_telemetry_enabled())")


def test_prefects_client_telemetry_is_off_once_the_command_line_loads() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], env=_env(), capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.strip() == "False", done.stderr[-500:]


def test_a_user_who_chose_otherwise_keeps_their_choice() -> None:
    env = _env(DO_NOT_TRACK="0")
    code = "import os, gpuaas.cli._flows; print(os.environ['DO_NOT_TRACK'])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.strip() == "0"
