"""``make e2e``: gpuaas operated through a real Prefect server, as an ops engineer runs it.

Starts ``prefect server start`` on a free loopback port, creates the process work pool, deploys with
``prefect --no-prompt deploy --all`` from the checkout, starts a worker against an embedded cluster
and runs the cycle through the worker: the scheduled collect, reclaim, rebalance and cost_report,
then every deployment of ``prefect.yaml`` without a schedule except the load test (the incident
review, ``incident_review/incident_review`` with its default window, the last hour). Checks through
the Prefect API that each run Completed and made its artifacts (each artifact's first line says
something), and that a reclaim given a snapshot that is not there ends Failed with one line naming it
and no traceback in its logs, then Debian's headless Chromium, driven by Selenium through ``chromium-driver``, opens the
pages a person opens: the flow runs list, each run's page, the reclaim decisions table (it must fit
a 1600-pixel screen) and the rebalance plan. Screenshots go to the test's tmp dir (``e2e-*.png``).
Everything it started is stopped, also on failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from flows._outcome import run_name
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.services import prefect_server, stop_session
from reports.cost_report import NO_SERVICES
from tests.scenarios import embedded

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCHEDULED_CYCLE = ["collect", "reclaim", "preflight", "rebalance", "cost_report"]
"""The scheduled part of the cycle, in the order the schedules run it (deadlines is left out: under 3 min)."""
NOT_IN_THE_CYCLE = {"load_test"}
ARTIFACT_KEYS = {"reclaim": "gpuaas-reclaim-decisions", "rebalance": "gpuaas-rebalance-plan",
                 "incident_review": "incident-review", "preflight": "gpuaas-preflight"}
"""The artifact each of these runs must publish (the one a person opens)."""
SCREEN = (1600, 1000)


def cycle(prefect_yaml: Path) -> list[str]:
    """The scheduled flows in cycle order, then each deployment without a schedule except the load test."""
    deployments = yaml.safe_load(prefect_yaml.read_text())["deployments"]
    names = [d["name"] for d in deployments]
    unscheduled = [d["name"] for d in deployments if not (d.get("schedules") or d.get("schedule"))
                   and d["name"] not in NOT_IN_THE_CYCLE]
    return [n for n in SCHEDULED_CYCLE if n in names] + unscheduled


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[Any]:
    """Debian's chromium through Debian's chromedriver (Selenium finds no driver of its own to fetch)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", f"--window-size={SCREEN[0]},{SCREEN[1]}", f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver",
                                              log_output=str(tmp_path / "chromedriver.log")), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _page(driver: Any, url: str, shows: list[str], screenshot: Path) -> str:
    """Open ``url`` and wait (60 s at most) until the rendered page's text shows each of ``shows``; screenshot it."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    try:
        WebDriverWait(driver, 60, poll_frequency=0.5).until(
            lambda d: all(s in d.find_element(By.TAG_NAME, "body").text for s in shows))
    except TimeoutException:
        _shoot(driver, screenshot)
        text = driver.find_element(By.TAG_NAME, "body").text
        missing = [s for s in shows if s not in text]
        raise AssertionError(f"{url}: {missing} not shown within 60 s (screenshot {screenshot});\n{text[:2000]}") from None
    time.sleep(1)  # let the last requests of the page settle before the picture
    _shoot(driver, screenshot)
    return str(driver.find_element(By.TAG_NAME, "body").text)


def _artifacts_tab(driver: Any, shows: list[str], screenshot: Path) -> None:
    """On the open run page, the Artifacts tab (the flow run's own, not a task run's): each of ``shows`` on it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    tabs = [e for e in driver.find_elements(By.XPATH, "//*[normalize-space(.)='Artifacts']") if e.is_displayed()]
    assert tabs, "no Artifacts tab on the run page"
    tabs[-1].click()  # the innermost element with that text
    WebDriverWait(driver, 60, poll_frequency=0.5).until(
        lambda d: all(s in d.find_element(By.TAG_NAME, "body").text for s in shows))
    time.sleep(1)
    _shoot(driver, screenshot)


def _shoot(driver: Any, screenshot: Path) -> None:
    """Save the picture, and a copy where ``E2E_SCREENSHOTS`` says (a folder that outlives the test's)."""
    driver.save_screenshot(str(screenshot))
    keep = os.environ.get("E2E_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(screenshot, Path(keep) / screenshot.name)


STATES = ("Completed", "Failed", "Crashed", "Cancelled", "Running", "Pending", "Scheduled", "Late", "Paused")


def _literal(text: str) -> str:
    """``text`` as an XPath string literal, whatever quotes it holds."""
    if "'" not in text:
        return f"'{text}'"
    return "concat(" + ", \"'\", ".join(f"'{part}'" for part in text.split("'")) + ")"


def _row(driver: Any, run_name: str) -> Any:
    """The runs list's row of ``run_name``: the nearest box around the name that shows a state."""
    from selenium.webdriver.common.by import By

    any_state = " or ".join(f"normalize-space()='{s}'" for s in STATES)
    return driver.find_element(By.XPATH, f"//*[normalize-space()={_literal(run_name)}]/ancestor::*[.//*[{any_state}]][1]")


def _row_state(driver: Any, run_name: str) -> str:
    """The state badge of the runs list's row of ``run_name``."""
    row = _row(driver, run_name)
    shown = [s for s in STATES if s in row.text.split("\n")]
    return shown[0] if len(shown) == 1 else f"{shown or 'no state'} in one row"


def _table_fits(driver: Any) -> tuple[int, int]:
    """(the widest shown table's width, the room its box has on screen): wider means scrolling sideways."""
    width, room = driver.execute_script(
        "const t = [...document.querySelectorAll('table')].filter(e => e.offsetParent !== null);"
        "if (!t.length) return [-1, -1];"
        "const w = t.reduce((a, e) => e.scrollWidth > a.scrollWidth ? e : a);"
        "const box = w.parentElement.getBoundingClientRect();"
        "return [w.scrollWidth, Math.min(w.parentElement.clientWidth, window.innerWidth - box.left)];")
    return int(width), int(room)


@pytest.fixture()
def prefect_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1", "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false", "PYTHONPATH": str(ROOT)}
    env.pop("GPUAAS_PROJECT_DIR", None)
    env.pop("PREFECT_UI_API_URL", None)  # the UI follows the server's PREFECT_API_URL
    with prefect_server(env, tmp_path / "server.log", timeout_s=120) as api:
        yield {**env, "PREFECT_API_URL": api, "PREFECT_UI_API_URL": api}


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[EmbeddedCluster]:
    with embedded(tmp_path / "cluster") as running:
        yield running


def test_the_cycle_is_derived_from_prefect_yaml(tmp_path: Path) -> None:
    """The incident review joins the cycle as soon as its deployment is in ``prefect.yaml`` (an unscheduled one)."""
    doc = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    assert cycle(ROOT / "prefect.yaml")[:len(SCHEDULED_CYCLE)] == SCHEDULED_CYCLE
    doc["deployments"] = [d for d in doc["deployments"] if d["name"] != "incident_review"]  # there or not yet
    doc["deployments"].append({"name": "incident_review", "entrypoint": "flows/incident.py:incident_review"})
    (tmp_path / "prefect.yaml").write_text(yaml.safe_dump(doc))
    assert cycle(tmp_path / "prefect.yaml") == [*SCHEDULED_CYCLE, "incident_review"]


@pytest.mark.timeout(900)  # ~3 min on a quiet machine, 8 at a load of 20; the suite's 300 s would end it mid-way
def test_the_cycle_runs_through_a_worker_and_completes(prefect_env: dict[str, str], cluster: EmbeddedCluster,
                                                       browser: Any, tmp_path: Path) -> None:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, LogFilter, LogFilterFlowRunId

    prefect = str(BIN / "prefect")
    for command in ([prefect, "work-pool", "create", "gpuaas", "--type", "process"],
                    [prefect, "--no-prompt", "deploy", "--all"]):
        done = subprocess.run(command, cwd=ROOT, env=prefect_env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    worker_env = {**prefect_env, **cluster.settings_env(), "GPUAAS_NVML": "off",
                  "GPUAAS_DATA_DIR": str(tmp_path / "gpuaas-data"), "PREFECT_WORKER_QUERY_SECONDS": "2"}
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen([prefect, "worker", "start", "--pool", "gpuaas"], cwd=tmp_path, env=worker_env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    runs: dict[str, Any] = {}
    published: dict[str, Any] = {}
    names = cycle(ROOT / "prefect.yaml")
    # The scheduled flows do not depend on each other (each collects its own snapshot): started together, as
    # their schedules overlap in a day; the hand-started ones (the incident review) after them, on their rows.
    stages = [[n for n in names if n in SCHEDULED_CYCLE], [n for n in names if n not in SCHEDULED_CYCLE]]
    try:
        with SyncPrefectClient(prefect_env["PREFECT_API_URL"]) as client:
            for stage in stages:
                started = {name: client.create_flow_run_from_deployment(
                    client.read_deployment_by_name(f"{name}/{name}").id) for name in stage}
                deadline = time.monotonic() + 240
                for name, run in started.items():
                    while not (state := client.read_flow_run(run.id).state) or not state.is_final():
                        assert worker.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
                        assert time.monotonic() < deadline, f"{name}: not finished within 240 s ({state})"
                        time.sleep(1)
                    assert state.is_completed(), f"{name}: {state.name} {state.message}\n" \
                        + (tmp_path / "worker.log").read_text()[-3000:]
                    artifacts = client.read_artifacts(
                        artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run.id])))
                    assert artifacts, f"{name}: no artifacts"
                    for artifact in artifacts:
                        first = str(artifact.data).strip().splitlines()
                        assert first and first[0].strip(), f"{name}: artifact {artifact.key} with an empty first line"
                        # on the run's page, not under a task run, and a card that says what it is
                        assert artifact.task_run_id is None, f"{name}: artifact {artifact.key} filed under a task run"
                        assert (artifact.description or "").strip(), f"{name}: artifact {artifact.key} undescribed"
                    # what the run did: its headline is the state message (the run page) and its gist the run's
                    # name (the runs list shows names, not state messages)
                    assert state.message and state.message != "None" and state.message.endswith(".") \
                        and len(state.message) > 20, f"{name}: state message {state.message!r}"
                    renamed = client.read_flow_run(run.id).name
                    assert renamed == run_name(state.message.removeprefix(NO_SERVICES)), \
                        f"{name}: run named {renamed!r} for the headline {state.message!r}"
                    if name in ARTIFACT_KEYS:
                        published[name] = next((a for a in artifacts if a.key == ARTIFACT_KEYS[name]), None)
                        assert published[name] is not None, f"{name}: no {ARTIFACT_KEYS[name]!r} artifact"
                    runs[name] = client.read_flow_run(run.id)
            # A run stopped by bad input ends Failed with one line naming it, and its logs hold no traceback.
            bad = client.create_flow_run_from_deployment(client.read_deployment_by_name("reclaim/reclaim").id,
                                                         parameters={"snapshot_id": 999999})
            deadline = time.monotonic() + 120
            while not (state := client.read_flow_run(bad.id).state) or not state.is_final():
                assert time.monotonic() < deadline, f"reclaim with a missing snapshot: not finished within 120 s ({state})"
                time.sleep(1)
            assert state.is_failed() and "snapshot 999999 is not in the store" in (state.message or ""), state
            # A run's process sends its logs in batches, the last at its exit: they may land just after its state.
            deadline = time.monotonic() + 30
            while True:
                lines = [entry.message for entry in client.read_logs(log_filter=LogFilter(
                    flow_run_id=LogFilterFlowRunId(any_=[bad.id])))]
                if any("snapshot 999999 is not in the store" in line for line in lines) or time.monotonic() > deadline:
                    break
                time.sleep(1)
            assert any("snapshot 999999 is not in the store" in line for line in lines), lines
            assert not any("Traceback" in line or "unexpected exception" in line for line in lines), "\n".join(lines)
            failed_run = client.read_flow_run(bad.id)
    finally:
        stop_session(worker)
        log.close()

    ui = prefect_env["PREFECT_API_URL"].removesuffix("/api")
    # The runs list a person opens first: every run of the cycle, each Completed, each row saying what the run did
    # (its name is its headline's gist).
    listed = _page(browser, f"{ui}/runs", [r.name for r in runs.values()] + ["Completed"], tmp_path / "e2e-runs.png")
    (tmp_path / "e2e-runs.txt").write_text(listed)
    for name, run in runs.items():  # the row of each run: its own state badge says Completed
        assert _row_state(browser, run.name) == "Completed", f"{name}: the runs list shows {_row_state(browser, run.name)}"
    top_row = _row(browser, next(iter(runs.values())).name)
    browser.execute_script("arguments[0].scrollIntoView({block: 'start'});", top_row)  # the rows, not the chart
    time.sleep(1)
    _shoot(browser, tmp_path / "e2e-runs-rows.png")
    _page(browser, f"{ui}/runs/flow-run/{failed_run.id}", ["Failed", "snapshot 999999 is not in the store"],
          tmp_path / "e2e-run-failed.png")
    for name, run in runs.items():  # the run page: the headline in its log, its artifacts' cards on its own tab
        _page(browser, f"{ui}/runs/flow-run/{run.id}", [run.name, "Completed"], tmp_path / f"e2e-run-{name}.png")
        if name in ARTIFACT_KEYS:
            _artifacts_tab(browser, [ARTIFACT_KEYS[name]], tmp_path / f"e2e-run-{name}-artifacts.png")
    # The reclaim decisions table: the hand-checked fleet's one idle workload with its evidence, on one screen.
    decisions = _page(browser, f"{ui}/artifacts/artifact/{published['reclaim'].id}",
                      ["team-b/nb", "max 0.00"], tmp_path / "e2e-reclaim-decisions.png")
    assert "Notebook team-b/nb" in decisions
    width, room = _table_fits(browser)
    assert 0 < width <= room, f"the decisions table is {width} px wide in a {room} px box of a {SCREEN[0]} px screen"
    # The rebalance plan: each planned queue's row (or the line that says there is no move) is shown.
    plan = published["rebalance"].data
    plan = json.loads(plan) if isinstance(plan, str) and published["rebalance"].type == "table" else plan
    queues = sorted({str(row["queue"]) for row in (plan if isinstance(plan, list) else [])})
    _page(browser, f"{ui}/artifacts/artifact/{published['rebalance'].id}", queues or ["No quota"],
          tmp_path / "e2e-rebalance-plan.png")
    # The preflight's checks: each check's row, with its outcome, on the artifact's page.
    _page(browser, f"{ui}/artifacts/artifact/{published['preflight'].id}",
          ["Kubernetes API and Kueue", "permissions", "GPU telemetry", "database", "StatefulSet team-b/dark"],
          tmp_path / "e2e-preflight.png")
    if "incident_review" in published:
        opening = str(published["incident_review"].data).strip().splitlines()[0]
        plain = " ".join(re.sub(r"[*_`#>\[\]]", " ", opening).split()[:4])  # as rendered: markdown marks gone
        _page(browser, f"{ui}/artifacts/artifact/{published['incident_review'].id}", [plain],
              tmp_path / "e2e-incident-review.png")
