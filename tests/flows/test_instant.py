"""The instant a flow run decides for (``flows._instant``), without a cluster.

Every flow with an ``at`` reads it as UTC through Prefect's parameter validation, which a run through
Prefect and the command line's direct run both call: naive is UTC, an offset is converted. No run, in any
mode, looks at an ``at`` later than the wall clock by more than the clock skew: every flow that takes one
refuses it in one line naming ``at`` and its value, before it reads or writes anything. A writing run in
apply mode also refuses an ``at`` further back than ``collect.max_staleness_seconds``, in one line naming
``at`` and the limit; a dry-run may look at any past instant.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from flows._instant import CLOCK_SKEW, decision_instant, looked_at
from gpuaas.errors import ActionRefused, ConfigError
from gpuaas.policy import Mode, Policy

POLICY = Policy()
LIMIT = POLICY.collect.max_staleness_seconds
WALL = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def _flows() -> list[Any]:
    from flows.collect import collect
    from flows.cost_report import cost_report
    from flows.deadlines import deadlines
    from flows.rebalance import rebalance
    from flows.reclaim import reclaim

    return [collect, cost_report, deadlines, rebalance, reclaim]


@pytest.mark.parametrize("given", [datetime(2026, 12, 1, 10, 0), "2026-12-01T10:00:00",
                                   datetime(2026, 12, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))),
                                   "2026-12-01T05:00:00-05:00", "2026-12-01T10:00:00Z"])
def test_every_flows_at_is_validated_into_utc(given: datetime | str) -> None:
    """What Prefect and the command line's direct run both call before the body runs."""
    for flow in _flows():
        at = flow.validate_parameters({"at": given})["at"]
        assert at == datetime(2026, 12, 1, 10, 0, tzinfo=UTC) and at.utcoffset() == timedelta(0), flow.name
        assert at.tzinfo is UTC, flow.name  # formats with a literal Z, compares with any aware instant


def test_an_empty_at_stays_empty() -> None:
    for flow in _flows():
        assert flow.validate_parameters({"at": None})["at"] is None, flow.name


def test_no_at_is_the_wall_clock() -> None:
    assert decision_instant(None, Mode.apply, POLICY, WALL) == WALL


@pytest.mark.parametrize("apart", [-timedelta(seconds=LIMIT + 1), -timedelta(days=3)])
def test_apply_refuses_an_at_further_back_than_the_limit(apart: timedelta) -> None:
    with pytest.raises(ActionRefused) as refused:
        decision_instant(WALL + apart, Mode.apply, POLICY, WALL)
    line = str(refused.value)
    assert line.startswith(f"at: {(WALL + apart).isoformat()} is ") and "\n" not in line
    assert "before now" in line
    assert f"the {LIMIT:g}s collect.max_staleness_seconds" in line and "nothing written" in line


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("apart", [CLOCK_SKEW + timedelta(seconds=1), timedelta(seconds=LIMIT + 1),
                                   timedelta(days=400)])
def test_no_run_looks_ahead_in_any_mode(mode: Mode, apart: timedelta) -> None:
    """Past the clock skew, a later ``at`` is refused whatever the mode and ``collect.max_staleness_seconds``."""
    at = WALL + apart
    with pytest.raises(ConfigError) as refused:
        decision_instant(at, mode, POLICY, WALL)
    line = str(refused.value)
    assert line.startswith(f"at: {at:%Y-%m-%dT%H:%M:%S}Z is in the future (") and "\n" not in line
    assert "2026-12-01T02:00:00Z" in line and line.endswith("a run can look back, not ahead")
    with pytest.raises(ConfigError):
        looked_at(at, WALL)


@pytest.mark.parametrize("apart", [timedelta(0), CLOCK_SKEW, -timedelta(seconds=LIMIT), -timedelta(minutes=1)])
def test_apply_decides_for_an_at_within_the_limit_and_the_skew(apart: timedelta) -> None:
    assert decision_instant(WALL + apart, Mode.apply, POLICY, WALL) == WALL + apart


@pytest.mark.parametrize("apart", [-timedelta(hours=20), -timedelta(days=30)])
def test_a_dry_run_looks_at_any_past_instant(apart: timedelta) -> None:
    assert decision_instant(WALL + apart, Mode.dry_run, POLICY, WALL) == WALL + apart
    assert looked_at(WALL + apart, WALL) == WALL + apart


def test_the_limit_is_the_policys() -> None:
    tight = Policy.model_validate({"collect": {"max_staleness_seconds": 30}})
    with pytest.raises(ActionRefused, match="the 30s collect.max_staleness_seconds"):
        decision_instant(WALL - timedelta(seconds=31), Mode.apply, tight, WALL)
    with pytest.raises(ActionRefused, match="after now, over the 30s collect.max_staleness_seconds"):
        decision_instant(WALL + timedelta(seconds=31), Mode.apply, tight, WALL)  # within the skew, past the limit


def test_a_naive_at_is_read_as_utc() -> None:
    """A caller in Python that bypasses the validation (a flow's ``fn``) still compares aware instants."""
    assert decision_instant(datetime(2026, 12, 1, 1, 55), Mode.apply, POLICY, WALL) == WALL - timedelta(minutes=5)
    assert looked_at(datetime(2026, 12, 1, 1, 55), WALL) == WALL - timedelta(minutes=5)
    assert looked_at(None, WALL) == WALL


def _flows_with_an_at() -> list[Any]:
    """Every flow in ``flows/`` whose parameters include ``at``, found rather than listed: a new one is checked too."""
    import importlib
    import inspect
    import pkgutil

    from prefect import Flow

    import flows

    found = {}
    for module in pkgutil.iter_modules(flows.__path__):
        for value in vars(importlib.import_module(f"flows.{module.name}")).values():
            if isinstance(value, Flow) and "at" in inspect.signature(value.fn).parameters:
                found[value.name] = value
    return [found[name] for name in sorted(found)]


def test_every_flow_with_an_at_refuses_a_future_one_before_reading_or_writing_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """As the command line runs a flow (``run_flow``): one ``error:`` line naming ``at`` and its value, exit 1, no
    traceback; no source read (each would say so), no store or report written."""
    import typer

    from gpuaas.cli._flows import run_flow

    flows = _flows_with_an_at()
    assert {f.name for f in flows} >= {"collect", "cost_report", "deadlines", "rebalance", "reclaim"}
    read: list[str] = []
    monkeypatch.setattr("gpuaas.operations.collect.read", lambda name, *_: read.append(name))
    monkeypatch.setattr("gpuaas.operations.cost_report.read", lambda *_, **__: read.append("cost window"))
    monkeypatch.setattr("tasks.deadlines.make_api_client", lambda *_, **__: read.append("kube"))
    data = tmp_path / "data"
    monkeypatch.setenv("GPUAAS_DATA_DIR", str(data))
    ahead = (datetime.now(UTC) + timedelta(days=400)).replace(microsecond=0)
    for flow in flows:
        with pytest.raises(typer.Exit) as ended:
            run_flow(flow, f"{flow.name} ahead", at=f"{ahead:%Y-%m-%dT%H:%M:%S}Z")
        assert ended.value.exit_code == 1, flow.name
        err = capsys.readouterr().err
        [line] = [line for line in err.splitlines() if line.startswith("error:")]
        assert line.startswith(f"error: at: {ahead:%Y-%m-%dT%H:%M:%S}Z is in the future ("), (flow.name, err)
        assert line.endswith("a run can look back, not ahead") and "Traceback" not in err, (flow.name, err)
    assert read == [] and not data.exists()
