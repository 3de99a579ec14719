"""Where the idle signal may act (policy ``actuator``), and how a blind run reports itself. Pure.

* Dry-run publishes the signal only for workloads whose rule chooses the KEDA path; apply publishes
  every verdict; every set carries the instant of its evidence.
* gpuaas never stops a KEDA-path workload itself.
* A run whose snapshot left most GPU workloads without complete telemetry says so on the first
  line of its summary, instead of "no idle workloads".
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from gpuaas.models import Snapshot
from gpuaas.policies.reclaim import blind_run_line, find_idle, resolve_rule
from gpuaas.policy import Actuator, parse_policy
from reports.reclaim import SUCCESS_METRIC, headline, idle_metrics, summary_line, summary_markdown
from tests.policies.test_idle import NOW, workload
from tests.policies.test_reclaim import OK, owner, plan, snapshot

POLICY = parse_policy({"reclaim": {"kinds": {"Deployment": {"actuator": "keda"}}},
                       "tenants": [{"name": "team-b", "namespaces": ["team-b"], "reclaim": {"actuator": "gpuaas"}}]})


def _idle_frame() -> pd.DataFrame:
    rows = [workload("dep", kind="Deployment", owner_kind="Deployment", owner_name="dep"),
            workload("ray"),
            workload("dep-b", kind="Deployment", owner_kind="Deployment", owner_name="dep-b", namespace="team-b",
                     tenant="team-b")]
    return find_idle(pd.DataFrame(rows), POLICY, NOW)


def _published(families: list[Any]) -> dict[str, list[tuple[tuple[str, ...], float]]]:
    return {f.name: f.samples for f in families}


def test_the_actuator_resolves_like_every_other_rule() -> None:
    assert resolve_rule(POLICY, "Deployment", "team-a").actuator is Actuator.keda
    assert resolve_rule(POLICY, "Deployment", "team-b").actuator is Actuator.gpuaas  # the tenant's rule wins
    assert resolve_rule(POLICY, "RayCluster", "team-a").actuator is Actuator.gpuaas  # the default
    with pytest.raises(Exception, match="actuator"):
        parse_policy({"reclaim": {"actuator": "hpa"}})


def test_dry_run_publishes_only_the_keda_path() -> None:
    idle = _idle_frame()
    assert idle.set_index("owner_name")["verdict"].to_dict() == {"dep": "idle", "ray": "idle", "dep-b": "idle"}
    got = _published(idle_metrics(idle, mode="dry-run", evidence_at=NOW))
    assert [labels[:3] for labels, _ in got["gpuaas_workload_idle"]] == [("team-a", "Deployment", "dep")]
    assert got[SUCCESS_METRIC] == [((), NOW.timestamp())]


def test_apply_publishes_every_verdict() -> None:
    got = _published(idle_metrics(_idle_frame(), mode="apply", evidence_at=NOW))
    assert sorted(labels[2] for labels, _ in got["gpuaas_workload_idle"]) == ["dep", "dep-b", "ray"]


def test_gpuaas_never_stops_a_keda_path_workload() -> None:
    rows = [workload("dep", kind="Deployment", owner_kind="Deployment", owner_name="dep"), workload("ray")]
    snap = snapshot(rows, [owner("dep", kind="Deployment"), owner("ray")])
    decisions = {d.name: d for d in plan(snap, policy=POLICY)}
    assert decisions["ray"].outcome == "planned"
    assert decisions["dep"].outcome == "skipped" and "KEDA" in decisions["dep"].reason


def _blind_snapshot(unknown: int, complete: int) -> Snapshot:
    telemetry = ["unknown"] * unknown + ["complete"] * complete + ["n/a"]
    frame = pd.DataFrame({"name": [f"w{i}" for i in range(len(telemetry))], "telemetry": telemetry})
    return Snapshot(collected_at=NOW - timedelta(minutes=1), windows_minutes=(30.0,), sources=OK, workloads=frame)


def test_a_blind_run_says_so_on_its_first_line() -> None:
    text = summary_markdown([], _blind_snapshot(19, 0), "dry-run", 10)
    first = text.splitlines()[0]
    assert "telemetry incomplete for 19 of 19 GPU workloads — nothing judged idle" in first
    assert "degraded" in first
    assert summary_line([], _blind_snapshot(19, 0)) == (
        "telemetry incomplete for 19 of 19 GPU workloads — nothing judged idle")


def test_a_few_unknown_workloads_do_not_make_a_run_degraded() -> None:
    text = summary_markdown([], _blind_snapshot(2, 17), "dry-run", 10)
    assert text.splitlines()[0] == "Nothing to reclaim: none of the 19 GPU workloads is idle."
    assert blind_run_line(2, 19, 0) is None
    assert blind_run_line(10, 19, 3) == "telemetry incomplete for 10 of 19 GPU workloads — only 3 judged idle"
    assert blind_run_line(0, 0, 0) is None


@pytest.mark.parametrize(("complete", "first"), [
    (1, "Nothing to reclaim: the one GPU workload is not idle."),
    (2, "Nothing to reclaim: none of the 2 GPU workloads is idle."),
    (0, "Nothing to reclaim: no workload holds a GPU."),
], ids=["one", "several", "none"])
def test_nothing_idle_says_what_it_counted(complete: int, first: str) -> None:
    """The headline names what the number counts (the GPU-holding workloads judged), in the singular for one."""
    assert headline([], _blind_snapshot(0, complete), "dry-run").splitlines()[0] == first


def test_a_freeze_is_said_when_nothing_is_idle() -> None:
    from gpuaas.policy import FreezeOn

    frozen = FreezeOn("year-end", datetime(2027, 1, 4, tzinfo=UTC))
    assert headline([], _blind_snapshot(0, 2), "dry-run", frozen=frozen).splitlines()[0] == (
        "Change freeze year-end until 2027-01-04 00:00 UTC: dry-run, nothing to reclaim: none of the 2 GPU "
        "workloads is idle.")


def test_with_the_kubernetes_api_down_the_headlines_say_nothing_was_read_not_that_there_is_nothing() -> None:
    """No workload in the snapshot because the API did not answer is not "no workload holds a GPU"."""
    from gpuaas.models import SourceStatus
    from reports.collect import headline as collect_headline

    down = {**OK, "kube": SourceStatus("kube", ok=False, error="Kubernetes API at https://127.0.0.1:1: connection refused")}
    snap = Snapshot(collected_at=NOW, windows_minutes=(30.0,), sources=down, workloads=pd.DataFrame())
    assert headline([], snap, "dry-run").splitlines()[0] == (
        "Degraded: Kubernetes API at https://127.0.0.1:1: connection refused. Nothing decided: no workload could "
        "be read.")
    summary = {**snap.summary(), "snapshot_id": 16, "unjudged_count": 0}
    assert collect_headline(summary, 0) == (
        "Degraded: Kubernetes API at https://127.0.0.1:1: connection refused. Snapshot 16: no workload or queue "
        "could be read, so nothing is judged; the next collect reads them again.")
    from reports.deadlines import deadlines_headline
    from reports.rebalance import first_line

    assert first_line([], "dry-run", None, unread=True) == "Nothing rebalanced: no ClusterQueue could be read."
    assert first_line([], "dry-run", None) == "Nothing to rebalance: no cohort with GPU quota."
    assert deadlines_headline([], unread=True) == "Nothing planned: no ClusterQueue could be read."
    assert deadlines_headline([]) == "Nothing to plan: no ClusterQueue with GPU quota."


def test_a_collect_whose_gpu_workloads_all_lack_telemetry_says_so_first() -> None:
    from reports.collect import headline as collect_headline

    summary = {**_blind_snapshot(19, 0).summary(), "snapshot_id": 3, "unjudged_count": 19,
               "blind": blind_run_line(19, 19, 0)}
    assert collect_headline(summary, 0).startswith(
        "Degraded snapshot: telemetry incomplete for 19 of 19 GPU workloads — nothing judged idle. Snapshot 3: ")
