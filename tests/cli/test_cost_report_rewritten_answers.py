"""``gpuaas cost-report`` fed answers a real Prometheus never gives, as an operator meets it: the installed command.

The embedded cluster's real Prometheus (``tests/cost_fleet.py``) is reached through a relay that rewrites its answers
(``tests/rewriting_prometheus.py``), as a broken proxy or federation layer would. Each case's contract: one line
naming the source and the field, a documented non-zero exit, no traceback and no warning on the terminal, and
nothing half-written (no report page where the run failed):

* every point of a range answer at the time ``1e308``: Prometheus failed (exit 1), naming the field;
* the times a query computed (when GPU telemetry began in a period) as ``1e308``: the same, naming the figure
  (read as a date, ``1e308`` ended the command in Python's ``timestamp out of range``);
* GPU-hours of ``1e308``: the same (summed, they overflowed into an infinity);
* OpenCost's metrics, read with no allocation API, with a negative GPU cost: OpenCost failed, naming the series,
  and the run is degraded (exit 3), its report written with the money unknown.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.runner import EmbeddedCluster
from tests.cost_fleet import COST_POLICY, cost_cluster
from tests.rewriting_prometheus import Rewrite, each_point, rewriting_prometheus

pytestmark = [pytest.mark.integration, pytest.mark.slow]
Change = Callable[[dict[str, str], float, str], tuple[float, str] | None]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with cost_cluster(tmp_path_factory.mktemp("rewritten-answers")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def relay(fleet: EmbeddedCluster) -> Iterator[Callable[[Rewrite], str]]:
    with rewriting_prometheus(str(fleet.prometheus_url)) as point:
        yield point


def _cost_report(fleet: EmbeddedCluster, data: Path, prometheus: str, *, opencost: bool = True
                 ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_API_URL"))}
    env |= {"GPUAAS_DATA_DIR": str(data), "GPUAAS_NVML": "off", "GPUAAS_RETRIES": "0", "COLUMNS": "200",
            "GPUAAS_PROMETHEUS_URL": prometheus, "GPUAAS_KUBECONFIG": str(fleet.kubeconfig),
            "GPUAAS_POLICY_FILE": str(COST_POLICY),
            "GPUAAS_METRICS__SAMPLE_INTERVAL_SECONDS": f"{fleet.step.total_seconds():g}"}
    if opencost:
        env["GPUAAS_OPENCOST_URL"] = str(fleet.opencost_url)
    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", "cost-report", "--window", "2h", "--no-compare",
                           "--format", "json"], env=env, capture_output=True, text=True, timeout=240, check=False)


def _range_answers(change: Change) -> Rewrite:
    def rewrite(_query: str, answer: dict[str, Any]) -> dict[str, Any]:
        return each_point(answer, change) if answer["data"]["resultType"] == "matrix" else answer
    return rewrite


def _values_of(stats: tuple[str, ...], value: str) -> Change:
    def change(labels: dict[str, str], t: float, v: str) -> tuple[float, str]:
        return (t, value) if labels.get("gpuaas_stat") in stats else (t, v)
    return change


FAILS = {  # (what the relay does, what the error line says after the source and URL)
    "sample-time-1e308": (_range_answers(lambda _labels, _t, v: (1e308, v)),
                          "field 'data.result[0].values[0]': time 1e+308 is not within "),
    "data-span-1e308": (_range_answers(_values_of(("data_first", "data_last"), "1e308")), " is 1e+308: not the time "
                        "of a sample in the "),
    "gpu-hours-1e308": (_range_answers(_values_of(("observed_h", "busy_h", "active_h"), "1e308")),
                        " is 1e+308: not GPU-hours from 0 to 20,000,000"),
}


@pytest.mark.parametrize(("rewrite", "says"), FAILS.values(), ids=FAILS.keys())
def test_an_answer_no_prometheus_gives_fails_in_one_line_naming_the_field(
        fleet: EmbeddedCluster, relay: Callable[[Rewrite], str], tmp_path: Path, rewrite: Rewrite, says: str) -> None:
    url = relay(rewrite)
    proc = _cost_report(fleet, tmp_path / "data", url)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr and "Warning" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]  # the progress lines come before it on a non-terminal
    assert line.startswith(f"error: Prometheus at {url}: ") and says in line, line
    assert "timestamp out of range" not in proc.stderr and "flow run failed" not in proc.stderr
    assert not list((tmp_path / "data").rglob("cost-report-*.html"))  # nothing half-written


def test_a_figure_no_bill_holds_in_opencosts_metrics_is_a_degraded_run_naming_the_series(
        fleet: EmbeddedCluster, relay: Callable[[Rewrite], str], tmp_path: Path) -> None:
    def negative_gpu_cost(query: str, answer: dict[str, Any]) -> dict[str, Any]:
        if "container_gpu_allocation" not in query:
            return answer
        return each_point(answer, lambda labels, t, v: (t, "-1000") if labels.get("gpuaas_stat") == "gpu_cost" and
                          labels.get("namespace") == "forecast" else (t, v))

    url = relay(negative_gpu_cost)
    proc = _cost_report(fleet, tmp_path / "data", url, opencost=False)
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr
    doc = json.loads(proc.stdout)
    error = doc["source_errors"]["opencost"]
    assert doc["degraded"] and error.startswith(f"OpenCost at {url}: series 'forecast/")
    assert "(container_gpu_allocation x node_gpu_hourly_cost): gpu_cost is -1000, below 0" in error
    assert doc["cluster"]["gpu_cost"] is None and doc["cluster"]["total_cost"] is None  # unknown, never -$1000
    assert list((tmp_path / "data").rglob("cost-report-*.html"))  # a degraded run still writes its report
