"""Opt-out (``gpuaas.io/reclaim: never``) is read the way people write it, on every object and owner.

A YAML block scalar (``reclaim: |``) leaves ``"never\\n"``; someone types ``Never`` or ``NEVER``.
Each spelling, on the Workload, on its owner (the RayCluster, the Deployment) or on the owner's
own controller (the InferenceService over a Deployment, the Notebook over a StatefulSet), must
exclude the workload from the idle verdict and from the reclaim decisions. Built through
``build_snapshot`` -> ``find_idle`` -> ``plan_reclaim``; no I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
import yaml

from gpuaas.models import Owner, PodGpus, SourceStatus, Workload, WorkloadState
from gpuaas.policies.reclaim import find_idle, is_opted_out, plan_reclaim
from gpuaas.policy import Mode, Policy
from gpuaas.snapshot import build_snapshot
from gpuaas.sources.kube import KubeState
from gpuaas.sources.prometheus import GPU_COLUMNS, PrometheusReading

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
ANNOTATION = "gpuaas.io/reclaim"
BLOCK_SCALAR = yaml.safe_load("reclaim: |\n  never\n")["reclaim"]
SPELLINGS = [BLOCK_SCALAR, "Never", " NEVER ", "never\r\n", "\tnever"]


def _notes(value: str | None) -> tuple[tuple[str, str], ...]:
    return ((ANNOTATION, value),) if value is not None else ()


def _fleet(on_workload: str | None = None, on_owner: str | None = None,
           on_controller: str | None = None) -> tuple[pd.DataFrame, PrometheusReading, KubeState]:
    """One idle Deployment ``llm`` (2 GPUs, complete telemetry) controlled by InferenceService ``llm``."""
    wl = Workload("Workload", "team-a", "pod-llm-0", "uid-wl", "lq", "cq", 0, None, WorkloadState.admitted, True,
                  2.0, "h100", NOW - timedelta(hours=2), NOW - timedelta(hours=2), "Deployment", "llm",
                  _notes(on_workload))
    deployment = Owner("Deployment", "team-a", "llm", "uid-dep", "7", 2.0, 1, False, _notes(on_owner),
                       "InferenceService", "llm")
    isvc = Owner("InferenceService", "team-a", "llm", "uid-isvc", "9", 2.0, 1, False, _notes(on_controller))
    pod = PodGpus("team-a", "llm-abc-0", "n1", 2.0, "Deployment", "llm", "InferenceService", "llm")
    kube = KubeState("v1beta2", (), (), (wl,), (), (), (deployment, isvc), (pod,), (), 0)
    rows = []
    for gpu in ("0", "1"):
        row: dict[str, object] = dict.fromkeys(GPU_COLUMNS, "")
        row.update(host="n1", gpu=gpu, uuid=f"GPU-{gpu}", namespace="team-a", pod="llm-abc-0", window_minutes=30.0,
                   activity_avg=0.0, activity_max=0.0, coverage=1.0, signal="x", longest_gap_s=15.0, age_s=15.0,
                   fb_used_mib=1.0, power_w=1.0, temperature_c=1.0, xid=float("nan"))
        rows.append(row)
    prom = PrometheusReading(gpus=pd.DataFrame(rows), kueue=pd.DataFrame(), serving=pd.DataFrame(
        columns=["namespace", "pod", "model_name", "window_minutes", "stat", "finished_reason", "le", "value"]))
    return pd.DataFrame(), prom, kube


def _verdict_and_decision(**where: str | None) -> tuple[str, str, list[str]]:
    _, prom, kube = _fleet(**where)
    sources = {"kube": SourceStatus("kube", True, 0.1, 0.0), "prometheus": SourceStatus("prometheus", True, 0.1, 5.0)}
    snap = build_snapshot(NOW, [30], sources, kube=kube, prom=prom, policy=Policy())
    idle = find_idle(snap.workloads, Policy(), NOW)
    planned = [d.outcome for d in plan_reclaim(snap, idle, Policy(), Mode.dry_run)]
    return str(idle.loc[0, "verdict"]), str(idle.loc[0, "reason"]), planned


def test_without_an_opt_out_the_deployment_is_idle_and_planned() -> None:
    verdict, _, outcomes = _verdict_and_decision()
    assert verdict == "idle" and outcomes == ["planned"]


@pytest.mark.parametrize("where", ["on_workload", "on_owner", "on_controller"])
@pytest.mark.parametrize("value", SPELLINGS, ids=["block-scalar", "capitalised", "upper-padded", "crlf", "tab"])
def test_every_spelling_on_every_object_excludes(where: str, value: str) -> None:
    verdict, reason, outcomes = _verdict_and_decision(**{where: value})
    assert verdict == "excluded" and "opted out" in reason, (where, value, verdict)
    assert "planned" not in outcomes


@pytest.mark.parametrize("value", ["allow", "never-ever", "not never", "", "nevermind"])
def test_other_values_are_no_opt_out(value: str) -> None:
    assert not is_opted_out(value)
    verdict, _, outcomes = _verdict_and_decision(on_owner=value, on_workload=value)
    assert verdict == "idle" and outcomes == ["planned"]


def test_is_opted_out_on_missing_values() -> None:
    assert [is_opted_out(v) for v in (None, float("nan"), BLOCK_SCALAR)] == [False, False, True]
