"""The cost_report flow on the embedded cluster: artifacts, the Pushgateway, the HTML report in a real
browser, and ``gpuaas cost-report`` with the documented JSON keys.

The numbers themselves are checked case by case in ``tests/sources/test_cost_window.py``; here the
flow must carry them, unchanged, to every place a person or a dashboard reads them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuaas.cluster.runner import EmbeddedCluster
from tests.cost_fleet import COST_POLICY, cost_cluster

pytestmark = [pytest.mark.integration, pytest.mark.flow]

TENANT_KEYS = {"tenant", "allocated_gpu_hours", "busy_gpu_hours", "productive_gpu_hours", "in_progress_gpu_hours",
               "unknown_gpu_hours", "active_gpu_hours", "gpu_cost", "total_cost", "waste_cost", "verified_outcomes",
               "cost_per_outcome"}
SERVICE_KEYS = {"service", "tenant", "requests", "verified_outcomes", "slo_fraction", "slo_error_bound", "gpu_cost",
                "total_cost", "cost_per_outcome", "peak_rps", "forecast_rps"}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    with cost_cluster(tmp_path_factory.mktemp("cost-flow")) as cluster:
        yield cluster


def _env(fleet: EmbeddedCluster, pushgateway_url: str, data_dir: Path) -> dict[str, str]:
    return {**fleet.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_POLICY_FILE": str(COST_POLICY),
            "GPUAAS_PUSHGATEWAY_URL": pushgateway_url, "GPUAAS_DATA_DIR": str(data_dir)}


@pytest.fixture()
def pointed(fleet: EmbeddedCluster, pushgateway_url: str, monkeypatch: pytest.MonkeyPatch,
            tmp_path: Path) -> EmbeddedCluster:
    for key, value in _env(fleet, pushgateway_url, tmp_path / "data").items():
        monkeypatch.setenv(key, value)
    return fleet


@pytest.fixture(scope="module")
def flow_doc(fleet: EmbeddedCluster, pushgateway_url: str, prefect_harness: None,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One flow run for the module's tests (a run costs seconds on a shared machine)."""
    from flows.cost_report import cost_report

    with pytest.MonkeyPatch.context() as mp:
        for key, value in _env(fleet, pushgateway_url, tmp_path_factory.mktemp("cost-flow-data")).items():
            mp.setenv(key, value)
        state = cost_report(window="2h", at=fleet.clock.now(), return_state=True)
        doc: dict[str, object] = state.result()
        doc["data_dir"] = os.environ["GPUAAS_DATA_DIR"]
        doc["flow_run_id"] = state.state_details.flow_run_id
    return doc


def test_flow_publishes_artifacts_metrics_and_the_html(flow_doc: dict, pushgateway_url: str) -> None:  # type: ignore[type-arg]
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    path = Path(str(flow_doc["report"]))
    assert path.is_file() and path.parent == Path(str(flow_doc["data_dir"])) / "reports"
    # the previous 2 h end where the history begins: only the samples taken at that instant (one 60 s
    # step of the ~37 GPUs running at the start, 37/60 GPU-h) fall in it
    assert flow_doc["previous"]["cluster"]["allocated_gpu_hours"] < 1.0
    keys = ["gpuaas-cost-funnel", "gpuaas-cost-per-outcome", "gpuaas-cost-top-wasters", "gpuaas-cost-summary",
            "gpuaas-cost-change"]
    with get_client(sync_client=True) as client:
        found = {a.key: a for a in client.read_artifacts(artifact_filter=ArtifactFilter(  # this run's, not another's
            key=ArtifactFilterKey(any_=keys), flow_run_id=ArtifactFilterFlowRunId(any_=[flow_doc["flow_run_id"]])))}
    assert set(found) == set(keys)
    assert "llm-abort" in str(found["gpuaas-cost-per-outcome"].data)
    assert "no verified outcome" in str(found["gpuaas-cost-per-outcome"].data)  # llm-legacy, never inf or 0
    assert "ray-hparam-sweep" in str(found["gpuaas-cost-top-wasters"].data)
    summary = str(found["gpuaas-cost-summary"].data)
    assert str(path) in summary
    # the same headline numbers as the HTML, and its plots inlined: no need for the worker's disk
    assert found["gpuaas-cost-summary"].description == flow_doc["summary"]
    assert flow_doc["summary"] not in summary  # the headline once: as the description, above the markdown
    assert summary.count("](data:image/png;base64,iVBOR") == 3  # funnel, serving and batch cost per outcome

    text = httpx.get(f"{pushgateway_url}/metrics", timeout=5).text
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.labels.get("job") == "gpuaas_cost_report"}

    def value(name: str, **labels: str) -> float | None:
        return samples.get((name, tuple(sorted({**labels, "job": "gpuaas_cost_report", "instance": ""}.items()))))

    platform = next(t for t in flow_doc["tenants"] if t["tenant"] == "platform")  # type: ignore[attr-defined]
    assert value("gpuaas_gpu_hours", stage="allocated", tenant="platform") == pytest.approx(
        platform["allocated_gpu_hours"])
    assert value("gpuaas_gpu_hours", stage="unknown", tenant="platform") == pytest.approx(2.0, abs=0.02)
    chat = next(s for s in flow_doc["services"] if s["service"] == "llm-chat")  # type: ignore[attr-defined]
    assert value("gpuaas_cost_per_outcome", service="llm-chat", tenant="platform") == pytest.approx(
        chat["cost_per_outcome"])
    assert value("gpuaas_cost_per_outcome", service="llm-legacy", tenant="platform") is None  # absent, not 0


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium")
    assert binary, "Debian's chromium is not installed (make system-deps installs it)"
    profile = tempfile.mkdtemp(prefix="gpuaas-chromium-")
    try:
        return subprocess.run(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}", *args],
            capture_output=True, text=True, timeout=90, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def test_html_report_opens_in_headless_chromium(flow_doc: dict, tmp_path: Path) -> None:  # type: ignore[type-arg]
    """Self-contained: four plots that decode (the funnel, cost per outcome for serving and for batch on
    their own axes, waste), every table titled, money never cut to one significant digit, no error text;
    the screenshot is not a blank page. ``GPUAAS_REPORT_SCREENSHOT`` keeps the screenshot for a person."""
    from matplotlib import image

    url = Path(str(flow_doc["report"])).as_uri()
    dom = _chromium("--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-plots-shown="4"' in dom.stdout
    assert dom.stdout.count('<img class="plot"') == 4
    assert dom.stdout.count("<table>") == dom.stdout.count("<caption>") > 0  # every table titled
    assert not re.search(r"\$0\.0*[1-9](?![0-9])", dom.stdout)  # "$0.0001" would hide which value it was
    assert "per 1,000 requests" in dom.stdout and "verified requests" in dom.stdout
    page = re.sub(r"<script>.*?</script>", "", dom.stdout, flags=re.S)
    page = re.sub(r'src="data:image/png;base64,[^"]*"', "", page)
    # no resource from the network (a failed source's URL may be named in the text: the previous window's OpenCost
    # had no allocation before the history began, and a degraded page says so first)
    for bad in (r"plot could not be displayed", r"Traceback", r"\binf\b", r"\bnan\b", r"(?:src|href)=.https?://"):
        assert not re.search(bad, page, flags=re.I), bad
    shot = Path(os.environ.get("GPUAAS_REPORT_SCREENSHOT", tmp_path / "report.png"))
    done = _chromium("--window-size=1200,2400", f"--screenshot={shot}", url)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    pixels = image.imread(str(shot))
    assert pixels.shape[0] == 2400 and pixels[..., :3].std() > 0.05  # plots and tables, not an empty page


def test_cli_json_has_the_documented_keys(pointed: EmbeddedCluster, prefect_harness: None) -> None:
    """``gpuaas cost-report`` runs now (the wall clock, past the history's end): the shape is checked, and
    a value that cannot be known is null with its reason in notes."""
    from typer.testing import CliRunner

    from gpuaas.cli.app import app

    runner = CliRunner()
    result = runner.invoke(app, ["cost-report", "--window", "2h", "--format", "json", "--no-compare"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {"window_s", "tenants", "services", "report", "notes"} <= set(doc) and doc["window_s"] == 7200
    # every source answered: not degraded, and the headline is the figures alone (also on stderr, beside the JSON)
    assert doc["degraded"] is False and doc["source_errors"] == {} and doc["headline"] == doc["summary"]
    assert doc["cost_source"] == "opencost-allocation-api"
    assert doc["headline"] in result.stderr.splitlines()
    assert all(TENANT_KEYS <= set(t) for t in doc["tenants"]) and doc["tenants"]
    assert all(SERVICE_KEYS <= set(s) for s in doc["services"]) and len(doc["services"]) == 5
    legacy = next(s for s in doc["services"] if s["service"] == "llm-legacy")
    assert legacy["cost_per_outcome"] is None and any("llm-legacy" in n for n in doc["notes"])
    assert Path(doc["report"]).is_file()

    bad = runner.invoke(app, ["cost-report", "--window", "36h"])
    assert bad.exit_code == 2 and bad.stderr == ("error: Invalid value for '--window': a window longer than a day must "
                                                 "be whole days, not 1.5 days (got '36h'); see gpuaas cost-report --help\n")


def test_cli_json_with_opencost_unreachable_is_degraded(pointed: EmbeddedCluster, prefect_harness: None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenCost's allocation API down (nothing listens on port 9): the money still comes from OpenCost's metrics in
    Prometheus, but the run is degraded as a collect is: ``degraded``, the failed source's line in
    ``source_errors``, the headline led by it (and the JSON's summary, and the HTML page's lead), exit code 3."""
    from typer.testing import CliRunner

    from gpuaas.cli.app import app

    monkeypatch.setenv("GPUAAS_OPENCOST_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GPUAAS_RETRIES", "0")
    result = CliRunner().invoke(app, ["cost-report", "--window", "2h", "--format", "json", "--no-compare"])
    assert result.exit_code == 3, result.output
    doc = json.loads(result.stdout)
    failure = "OpenCost at http://127.0.0.1:9: connection refused (nothing listens on that port)"
    assert doc["degraded"] is True and doc["source_errors"] == {"opencost": failure}
    assert doc["headline"] == doc["summary"] and doc["summary"].startswith(f"Degraded: {failure}. ")
    assert doc["headline"] in result.stderr.splitlines()
    assert f'<p class="lead degraded">Degraded: {failure}. ' in Path(doc["report"]).read_text(encoding="utf-8")
    assert doc["cluster"]["total_cost"] is not None  # from the metrics: known, only the API failed
    assert doc["cost_source"] == "opencost-prometheus-metrics"
    assert f"{failure}; the costs are read from OpenCost's metrics in Prometheus instead" in doc["notes"]


def test_cli_without_gpu_telemetry_is_degraded_and_says_unknown(pointed: EmbeddedCluster, prefect_harness: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU metrics configured under names no exporter writes: every source answers, but the window holds no
    GPU telemetry. The money is OpenCost's, the outcomes vLLM's and Kueue's; busy, productive and waste are
    null / "unknown", never 0 or $0; the run is degraded (exit 3), its headline led by where it looked."""
    from typer.testing import CliRunner

    from gpuaas.cli.app import app

    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY", "FOO_METRIC")
    monkeypatch.setenv("GPUAAS_METRICS__GPU_UTIL_FALLBACK", "BAR_METRIC")
    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY_SCALE", "1")  # names no DCGM field: their scales are set
    monkeypatch.setenv("GPUAAS_METRICS__GPU_UTIL_FALLBACK_SCALE", "100")
    runner = CliRunner()
    result = runner.invoke(app, ["cost-report", "--window", "2h", "--format", "json", "--no-compare"])
    assert result.exit_code == 3, result.output
    doc = json.loads(result.stdout)
    assert doc["degraded"] is True and doc["source_errors"] == {}
    said = "Degraded: no GPU telemetry in Prometheus (FOO_METRIC or BAR_METRIC) in the window. "
    assert doc["headline"] == doc["summary"] and doc["summary"].startswith(said)
    assert f'<p class="lead degraded">{said}' in Path(doc["report"]).read_text(encoding="utf-8")
    assert "idle-GPU waste unknown (no GPU telemetry in Prometheus)" in doc["summary"] and "of it on" not in doc["summary"]
    c = doc["cluster"]
    assert c["total_cost"] and c["allocated_gpu_hours"] and c["unknown_gpu_hours"] == c["allocated_gpu_hours"]
    for row in [c, *doc["tenants"]]:
        assert (row["busy_gpu_hours"], row["productive_gpu_hours"], row["waste_cost"]) == (None, None, None), row
    table = runner.invoke(app, ["cost-report", "--window", "2h", "--no-compare"])
    assert table.exit_code == 3, table.output
    assert table.stdout.startswith("Degraded: no GPU telemetry in Prometheus")
    assert "$0.00" not in table.stdout and "unknown" in table.stdout
