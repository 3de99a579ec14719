"""The adaptive strategy live and in the backtest, on one recorded duty-cycle series.

One pod of the public GenAI trace (its samples, one per minute) drives a Notebook of the
embedded cluster, whose Prometheus holds that series as history. Covers: the live reclaim
flow (``strategy: adaptive``) reclaims at the same minute as ``gpuaas replay reclaim
--adaptive`` on the same series as a CSV, with the window and why in the evidence, and not
one minute earlier; with a cold-start price it reclaims at the minute, with the window and the
expectation, that the library's survival window gives on the samples up to that minute; ``--from-prometheus`` gives the same replay and frontier as the CSV;
the history is read in a number of range queries set by the time span, with one series per
pod (aggregated in PromQL), however many GPUs; a workload's GPU-hours count its GPUs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.idle_history import read_activity_history
from gpuaas.policies.reclaim import RunStream, live_states
from gpuaas.policy import parse_policy
from gpuaas.settings import load_settings
from gpuaas.snapshot import workload_pods
from gpuaas.sources.kube import read_kube
from gpuaas.sources.traces import load_utilization
from gpuaas.store import open_store
from tests.scenarios import embedded, point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]

POD = "0e7c45fddf2f1dda1b518dbb5d3066a0"
"""A trace pod with a 61-minute idle spell followed, within the hour, by a 26-minute one."""
FROM, TO = 1662912813.0 - 40 * 60, 1662916518.0 + 36 * 60
WORKLOAD = "Notebook team-a/nb"
runner = CliRunner()


def _series(shared_dir: Path) -> list[float]:
    trace = load_utilization([shared_dir / "fixtures/traces/alibaba-genai-2026/pod_gpu_duty_cycle_part1.csv"])
    one = trace[(trace["pod"] == POD) & (trace["t"] >= FROM) & (trace["t"] <= TO)]
    return [float(v) for v in one["value"]]


@pytest.fixture(scope="module")
def recorded(shared_dir: Path) -> list[float]:
    return _series(shared_dir)


@pytest.fixture(scope="module")
def cluster(recorded: list[float], tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    points = [[f"{k * 60}s", v / 100.0] for k, v in enumerate(recorded)]
    scenario: dict[str, Any] = {
        "name": "adaptive",
        "flavors": [{"name": "h100"}],
        "pools": [{"name": "h100", "count": 1, "gpus_per_node": 4, "flavor": "h100", "gpu_hourly_price": 3.0}],
        "tenants": [
            {"name": "team-a", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 2}]},
            {"name": "team-b", "cohort": "c", "quotas": [{"flavor": "h100", "gpus": 2}]},
        ],
        "workloads": [
            {"name": "nb", "kind": "Notebook", "tenant": "team-a", "noise": 0.0,
             "utilisation": {"profile": "trace", "points": points}},
            {"name": "busy", "kind": "RayCluster", "tenant": "team-b", "gpus_per_pod": 2,
             "utilisation": {"profile": "constant", "value": 0.6}},
        ],
    }
    history = timedelta(minutes=len(recorded) - 1)
    with embedded(tmp_path_factory.mktemp("adaptive"), scenario, history=history) as running:
        yield running


@pytest.fixture()
def pointed(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    policy = {"reclaim": {"kinds": {"Notebook": {"strategy": "adaptive"}}},
              "tenants": [{"name": "team-a", "namespaces": ["team-a"]}, {"name": "team-b", "namespaces": ["team-b"]}]}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    return point_at(cluster, monkeypatch, data_dir=tmp_path / "data", policy_file=path)


PRICED = {"reclaim": {"kinds": {"Notebook": {"strategy": "adaptive"}},
                      "adaptive": {"cold_start_budget": {"cold_start_gpu_minutes": 30, "refit_hours": 0.25}}},
          "tenants": [{"name": "team-a", "namespaces": ["team-a"]}, {"name": "team-b", "namespaces": ["team-b"]}]}


@pytest.fixture()
def priced(cluster: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> EmbeddedCluster:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(PRICED))
    return point_at(cluster, monkeypatch, data_dir=tmp_path / "data", policy_file=path)


def _start(cluster: EmbeddedCluster) -> datetime:
    return cluster.clock.now() - cluster.history


def _csv(cluster: EmbeddedCluster, recorded: list[float], path: Path) -> Path:
    """The same recorded series, one row per minute from the cluster's first sample."""
    t0 = _start(cluster).timestamp()
    pd.DataFrame({"value": recorded, "timestamp": [t0 + 60 * k for k in range(len(recorded))],
                  "pod": WORKLOAD}).to_csv(path, index=False)
    return path


def _json(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _nb_decision(at: datetime) -> dict[str, Any] | None:
    from flows.reclaim import reclaim

    state = reclaim(at=at, return_state=True)
    assert state.is_completed(), state.message
    found = [d for d in state.result()["decisions"] if d["kind"] == "Notebook" and d["name"] == "nb"]
    return found[0] if found else None


def test_live_flow_reclaims_at_the_replays_minute(pointed: EmbeddedCluster, recorded: list[float],
                                                  tmp_path: Path, prefect_harness: None) -> None:
    csv = _csv(pointed, recorded, tmp_path / "nb.csv")
    replay = _json(["replay", "reclaim", "--utilization", str(csv), "--adaptive", "--reclaims", "--format", "json"])
    learned = [r for r in replay["reclaims"] if r["why"].startswith("long idle spells seen")]
    assert learned and learned[0]["window_min"] == 10.0  # 10 min after a spell of >= 60 min
    minute = datetime.fromisoformat(learned[0]["reclaim_at"].replace("Z", "+00:00"))
    assert minute < pointed.clock.now()

    before = _nb_decision(minute - timedelta(minutes=1))
    assert before is None  # idle for 9 minutes: under its window, no decision yet
    decided = _nb_decision(minute)
    assert decided is not None and decided["result"] == "planned", decided
    assert decided["window_minutes"] == 10.0 and decided["window_reason"].startswith("long idle spells seen")
    store = open_store(load_settings())
    try:
        entry = store.get_audit(int(decided["audit_id"]))
    finally:
        store.close()
    assert entry is not None and entry.outcome == "planned"
    evidence = entry.evidence
    assert evidence["strategy"] == "adaptive" and evidence["window_minutes"] == 10.0
    assert evidence["base_window_minutes"] == 30.0
    assert evidence["window_reason"].startswith("long idle spells seen")
    assert "past its adaptive window of 10 min" in decided["reason"]


def test_backtest_from_prometheus_agrees_with_the_csv(pointed: EmbeddedCluster, recorded: list[float],
                                                      tmp_path: Path) -> None:
    csv = _csv(pointed, recorded, tmp_path / "nb.csv")
    since = (_start(pointed) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")
    live = ["replay", "reclaim", "--from-prometheus", "--since", since, "--namespace", "team-a", "--chunk-hours", "1"]
    from_csv = ["replay", "reclaim", "--utilization", str(csv)]
    for extra in (["--adaptive"], ["--frontier", "--calibrate", "0", "--plot", str(tmp_path / "f.png")]):
        got, want = _json([*live, *extra, "--format", "json"]), _json([*from_csv, *extra, "--format", "json"])
        assert got == want
    assert want["frontier"][0]["policy"] == "fixed" and want["frontier"][0]["wakeups"] > 0
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    adaptive = _json([*live, "--adaptive", "--format", "json"])
    assert adaptive["pods"] == 1 and adaptive["reclaims"] >= 2  # team-b's RayCluster is filtered out
    # team-b's RayCluster alone: busy all along, its 2 GPUs observed for the whole history.
    busy = _json([*live[:6], "team-b", "--format", "json"])
    assert busy["pods"] == 1 and busy["idle_runs"] == 0
    assert busy["observed_gpu_hours"] == pytest.approx(2 * (len(recorded) - 1) / 60)


def test_history_queries_are_fixed_per_span_and_one_series_per_pod(pointed: EmbeddedCluster) -> None:
    settings = load_settings()
    links = workload_pods(read_kube(settings))
    end = pointed.clock.now()
    start = end - timedelta(hours=2)
    reading = read_activity_history(settings, start, end, links=links, key="uid", thresholds_pct=[5.0, 10.0],
                                    chunk_s=1800)
    assert reading.queries == 5  # 2 h at 1-minute steps in 30-minute chunks: 4 full chunks and the end minute
    assert reading.series == 2  # nb (1 GPU) and busy (2 GPUs): one series per pod
    assert set(reading.streams) == {5.0, 10.0}
    assert set(reading.streams[5.0].last_samples()["pod"]) == set(links["uid"])


def test_live_flow_reclaims_at_the_survival_windows_minute(priced: EmbeddedCluster, recorded: list[float],
                                                          prefect_harness: None) -> None:
    # What the library decides at each minute from the samples up to it: the same two workloads
    # (nb's recorded series, team-b's busy RayCluster), the same policy, the same instant.
    t0 = _start(priced).timestamp()
    minutes = range(len(recorded))
    util = pd.concat([pd.DataFrame({"pod": "nb", "t": [t0 + 60 * k for k in minutes], "value": recorded}),
                      pd.DataFrame({"pod": "busy", "t": [t0 + 60 * k for k in minutes], "value": 60.0})])
    policy = parse_policy(PRICED)

    def library_at(k: int) -> pd.Series:
        stream = RunStream(5.0)
        stream.add(util[util["t"] <= t0 + 60 * k])
        states = live_states({5.0: stream}, policy, t0 + 60 * k)
        return states.set_index("key").loc["nb"]

    # The first minute a survival window (not the fixed rule a history without a completed spell
    # gets) makes nb due.
    due = next(k for k in range(2, len(recorded) - 1)
               if library_at(k)["due"] and "expected wake-ups" in library_at(k)["why"] and not library_at(k - 1)["due"])
    want = library_at(due)
    assert "expected wake-ups at 30 GPU-min each" in want["why"]
    minute = _start(priced) + timedelta(minutes=due)
    assert _nb_decision(minute - timedelta(minutes=1)) is None
    decided = _nb_decision(minute)
    assert decided is not None and decided["result"] == "planned", decided
    assert decided["window_minutes"] == want["window_seconds"] / 60.0
    assert decided["window_reason"] == want["why"]
