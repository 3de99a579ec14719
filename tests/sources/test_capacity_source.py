"""A service's sustainable per-replica rate for the cost report and the planners: source and age.

Cases: the policy's sweep file wins (judged with the service's SLO; age from the file); else
the newest load test of the service in the store (re-judged with the policy's SLO, age from
the run); a load test of the model when the service was not named; nothing measured -> None;
a bad sweep file names itself. Real SQLite store, real files.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpuaas.errors import ConfigError
from gpuaas.loadtest import LoadTestConfig, SweepRun, record_load_test, serving_capacity
from gpuaas.policies.cost import replicas_needed, sustainable_capacity
from gpuaas.settings import load_settings
from gpuaas.store import Store

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SWEEP = "rate_rps,replicas,gpus,latency_p95_s,quality\n2,2,2,0.5,1\n4,2,2,0.9,1\n8,2,2,1.6,1\n"


def _policy(tmp_path: Path, capacity: str = "") -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "services:\n"
        "  - {name: chat, namespace: platform, model_name: org/chat, latency_slo_seconds: 1.0" + capacity + "}\n")
    return path


def _run(steps: list[tuple[float, float]], service: str | None = "platform/chat", model: str = "org/chat",
         slo: float = 2.0) -> SweepRun:
    config = LoadTestConfig(url="http://127.0.0.1:1/v1", model=model, rates=tuple(r for r, _ in steps),
                            slo_quantile="p95", slo_seconds=slo, replicas=1, gpus=1, service=service)
    run = SweepRun(config)
    run.steps = [{"rate_rps": r, "replicas": 1, "gpus": 1, "latency_p95_s": lat, "quality": 1.0,
                  "client_limited": False} for r, lat in steps]
    return run


def _record(store: Store, run: SweepRun) -> int:
    capacity = sustainable_capacity(run.sweep.dropna(axis=1, how="all"), slo_quantile="p95",
                                    slo_seconds=run.config.slo_seconds, min_quality=0.99)
    return int(record_load_test(store, run, capacity, {}).id or 0)


def test_policy_sweep_file_with_the_services_slo_and_the_files_age(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "chat-sweep.csv").write_text(SWEEP)
    os.utime(tmp_path / "chat-sweep.csv", (0, (NOW - timedelta(hours=3)).timestamp()))
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(_policy(tmp_path, ", capacity: {sweep: chat-sweep.csv}")))
    estimate = serving_capacity(load_settings(), "platform", "chat", now=NOW)
    assert estimate is not None and estimate.met
    # SLO 1.0 s at p95: 4 rps on 2 replicas holds, 8 does not
    assert (estimate.sustainable_rate_rps, estimate.per_replica_rps, estimate.per_gpu_rps) == (4, 2, 2)
    assert estimate.source == f"sweep file {tmp_path / 'chat-sweep.csv'}"
    assert estimate.age_seconds == pytest.approx(3 * 3600)
    assert replicas_needed(9, estimate.per_replica_rps) == 5


def test_latest_load_test_in_the_store_rejudged_with_the_policy_slo(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(_policy(tmp_path)))
    settings = load_settings()
    store = Store(settings.database_url_value)
    try:
        _record(store, _run([(1, 0.5), (2, 0.6)]))
        newest = _record(store, _run([(1, 0.5), (2, 0.8), (4, 1.5), (8, 3.0)]))  # tested against a 2 s SLO
        _record(store, _run([(1, 0.1), (100, 0.1)], service="other/svc"))
        estimate = serving_capacity(settings, "platform", "chat", now=datetime.now(UTC) + timedelta(minutes=5),
                                    store=store)
    finally:
        store.close()
    assert estimate is not None and estimate.source == f"load test #{newest}"
    # stored with a 2 s SLO (4 rps); the policy's 1 s SLO holds only up to 2 rps
    assert estimate.per_replica_rps == 2 and estimate.slo_seconds == 1.0
    assert 290 <= estimate.age_seconds <= 400


def test_model_fallback_and_nothing_measured(tmp_path: Path) -> None:
    settings = load_settings()
    store = Store(settings.database_url_value)
    try:
        assert serving_capacity(settings, "platform", "chat", store=store) is None
        run_id = _record(store, _run([(3, 0.5), (6, 0.7)], service=None, model="org/chat"))
        assert serving_capacity(settings, "platform", "chat", store=store) is None  # no model name to go by
        estimate = serving_capacity(settings, "platform", "chat", model_name="org/chat", store=store)
    finally:
        store.close()
    assert estimate is not None and estimate.source == f"load test #{run_id}"
    assert estimate.per_replica_rps == 6 and estimate.slo_seconds == 2.0  # the run's own SLO: no policy entry


def test_bad_sweep_file_names_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "chat-sweep.csv").write_text(SWEEP.replace("0.9,1", "slow,1"))
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(_policy(tmp_path, ", capacity: {sweep: chat-sweep.csv}")))
    with pytest.raises(ConfigError, match=r"chat-sweep.csv: row 2, column latency_p95_s: not a number: 'slow'"):
        serving_capacity(load_settings(), "platform", "chat")


@pytest.mark.parametrize(("sweep", "says"), [
    (None, "{tmp}/chat-sweep.csv: no such file"),
    ("rate_rps,replicas\n1,1\n", "{tmp}/chat-sweep.csv: column gpus: missing"),
], ids=["missing", "not-a-sweep"])
def test_config_check_reads_the_sweep_a_policy_names_as_the_report_will(tmp_path: Path, sweep: str | None,
                                                                        says: str) -> None:
    """A typo in a sweep path used to pass the check and surface only as a note of the cost report."""
    from typer.testing import CliRunner

    from gpuaas.cli.app import app

    policy = _policy(tmp_path, ", capacity: {sweep: chat-sweep.csv}")
    if sweep is not None:
        (tmp_path / "chat-sweep.csv").write_text(sweep)
    result = CliRunner().invoke(app, ["config", "check", str(policy)])
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"error: {policy}: services[0].capacity.sweep: {says.format(tmp=tmp_path)}")
    (tmp_path / "chat-sweep.csv").write_text(SWEEP)  # the path is relative to the policy file, as the report reads it
    assert CliRunner().invoke(app, ["config", "check", str(policy)]).exit_code == 0


@pytest.mark.parametrize(("capacity", "why"), [
    ({"sweep": "gone.csv"}, "its capacity sweep could not be read (its note says why)"),
    (None, "no capacity sweep in the policy and no load test of it in the store"),
], ids=["sweep-unreadable", "no-sweep"])
def test_replicas_unknown_says_why_without_denying_the_sweep_the_policy_names(capacity: dict[str, str] | None,
                                                                            why: str) -> None:
    from gpuaas.policies.cost.services import ServiceTally, replicas
    from gpuaas.policy import CostPolicy, ServiceOutcome

    spec = ServiceOutcome.model_validate({"name": "chat", "namespace": "platform", "latency_slo_seconds": 1.0,
                                          **({"capacity": capacity} if capacity else {})})
    notes: list[str] = []
    out = replicas(ServiceTally(spec, "platform", rate_quantile=2.0), None, CostPolicy(), notes)
    assert out["replicas_needed"] is None and notes == [f"service chat: replicas needed unknown: {why}"]


def test_a_store_that_does_not_open_leaves_the_sweep_backed_capacity_standing(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a service measured by a load test needs the store: one with a sweep file keeps its capacity when the
    store fails (it was read inside the store's block, and lost with it)."""
    from gpuaas.sources.cost_window import _read_capacity

    (tmp_path / "chat-sweep.csv").write_text(SWEEP)
    policy = _policy(tmp_path, ", capacity: {sweep: chat-sweep.csv}")
    with policy.open("a") as more:
        more.write("  - {name: other, namespace: platform, model_name: org/other, latency_slo_seconds: 1.0}\n")
    (tmp_path / "not-a-db").write_text("not a database\n" * 100)
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(policy))
    monkeypatch.setenv("GPUAAS_DATABASE_URL", f"sqlite:///{tmp_path}/not-a-db")
    notes: list[str] = []
    read = _read_capacity(load_settings(), NOW, notes)
    assert read["chat"] is not None and read["chat"].per_replica_rps == 2 and read["other"] is None
    assert [n.split(" (")[0] for n in notes] == ["capacity unknown: the store did not open"]
