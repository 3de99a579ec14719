"""A failed source is named once on the terminal: in the line the reader reads first, not again as a warning.

The installed command in a subprocess, run directly (no Prefect API), where the run's warnings are printed after
it: a degraded run's headline leads with each failed source, and a run that every source failed ends with one
error line naming them all; a ``warning: source ... failed`` line before either said the same thing again.
"""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from tests.cli.test_source_failures import _gpuaas as gpuaas_cli

pytestmark = pytest.mark.slow

REFUSED = "connection refused (nothing listens on that port)"


def _gpuaas(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return gpuaas_cli(tmp_path, *args, **{"COLUMNS": "250"} | env)  # the headline on one line


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.integration
@pytest.mark.parametrize(("command", "rows"), [("collect", 1), ("reclaim", 0)])
def test_a_degraded_run_names_its_failed_source_in_the_headline_alone(
        tmp_path: Path, reclaim_fleet: EmbeddedCluster, command: str, rows: int) -> None:
    """``rows``: the source's row in ``collect``'s data-quality table, which says why each source did not answer."""
    url = f"http://127.0.0.1:{_closed_port()}"
    failure = f"Prometheus at {url}: {REFUSED}"
    proc = _gpuaas(tmp_path, command, **reclaim_fleet.settings_env() | {"GPUAAS_PROMETHEUS_URL": url})
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(f"Degraded: {failure}.")
    assert proc.stderr.count(failure) == 0 and "warning:" not in proc.stderr, proc.stderr
    assert (proc.stdout + proc.stderr).count(failure) == 1 + rows, proc.stdout


def test_a_run_every_source_failed_names_each_in_its_error_line_alone(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    proc = _gpuaas(tmp_path, "collect", GPUAAS_KUBECONFIG=str(tmp_path / "missing"), GPUAAS_PROMETHEUS_URL=url,
                   GPUAAS_OPENCOST_URL=url)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("error: ") and "every source failed" in error
    for failure in (f"Kubernetes API at kubeconfig {tmp_path / 'missing'}", f"Prometheus at {url}: {REFUSED}",
                    f"OpenCost at {url}: {REFUSED}"):
        assert proc.stderr.count(failure) == 1 and failure in error, proc.stderr
