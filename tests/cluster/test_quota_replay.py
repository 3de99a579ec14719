"""``gpuaas replay rebalance`` on a short real slice: structure and invariants, not figures.

The slice is 20 days of the ITP cluster10 and 195-job traces (258 real jobs) with a small quota
file (8 and 16 GPUs), so queues form,
the cohort borrows and preempts, and the planner moves quota. Invariants checked per
configuration: every job runs to completion exactly once more than it was preempted; GPU time
held equals the trace's GPU time plus the work lost to preemption; the quota total is conserved
every night; static configurations move nothing; isolated ones never preempt. Also the command's
JSON keys and a bad quota file's one-line error.
"""

from __future__ import annotations

import json
from collections import deque
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.quota_replay import CONFIGURATIONS, in_window, load_quotas, read_trace
from gpuaas.cluster.quota_replay._engine import QuotaReplay, ReplayRun
from gpuaas.policy import Policy, RebalancePolicy

KEYS = {"tenants", "avg_queue_s", "p95_queue_s", "worst_tenant_p95_queue_s", "deadline_satisfaction",
        "gpu_allocation_ratio", "jain_fairness", "preempted_gpu_hours", "gpus_moved_per_night"}
runner = CliRunner()


@pytest.fixture(scope="module")
def slice_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path, dict[str, ReplayRun]]:
    from tests.conftest import SHARED

    itp = SHARED / "fixtures" / "traces" / "microsoft-itp-elasticflow"
    traces = [itp / "cluster10.csv", itp / "195job.csv"]
    quotas = tmp_path_factory.mktemp("quotas") / "quotas.yaml"
    quotas.write_text("cluster10: 8\n195job: 16\n", encoding="utf-8")
    table = load_quotas([], "itp", traces, quotas)
    jobs = [j for j in in_window(read_trace(traces, "itp"), 20) if j.gpus <= table[j.tenant]]
    runs = {c.name: QuotaReplay(jobs, table, c).run() for c in CONFIGURATIONS}
    lending = Policy(rebalance=RebalancePolicy(reclaiming_lends=True, reclaiming_keep_factor=0, reclaiming_keep_gpus=0))
    runs["rebalanced_cohort_lending"] = QuotaReplay(jobs, table, CONFIGURATIONS[3], policy=lending).run()
    margins = Policy(rebalance=RebalancePolicy(reclaiming_lends=True))
    runs["rebalanced_cohort_margins"] = QuotaReplay(jobs, table, CONFIGURATIONS[3], policy=margins).run()
    return traces, quotas, runs


def test_every_job_runs_to_completion_once_and_gpu_time_adds_up(
        slice_runs: tuple[list[Path], Path, dict[str, ReplayRun]]) -> None:
    _, _, runs = slice_runs
    counts = {name: len(run.jobs) for name, run in runs.items()}
    assert len(set(counts.values())) == 1 and min(counts.values()) > 100
    for name, run in runs.items():
        assert all(j.finished is not None for j in run.jobs), name
        assert sum(j.runs for j in run.jobs) == len(run.jobs) + run.preemptions, name
        assert all(j.queue_s >= 0 and j.finished is not None and j.finished >= j.submit + j.duration
                   for j in run.jobs), name
        trace_gpu_s = sum(j.gpus * j.duration for j in run.jobs)
        assert run.allocated_gpu_s == pytest.approx(trace_gpu_s + run.preempted_gpu_hours * 3600), name


def test_quota_is_conserved_and_only_what_should_move_moves(
        slice_runs: tuple[list[Path], Path, dict[str, ReplayRun]]) -> None:
    _, _, runs = slice_runs
    for name, run in runs.items():
        assert run.total_gpus == 24
        assert all(total == 24 for total in run.quota_totals), name
        if name.startswith("static"):
            assert run.gpus_moved_per_night == [] and run.quota_totals == []
        else:
            assert len(run.gpus_moved_per_night) >= 20, name
            assert max(run.gpus_moved_per_night) <= Policy().rebalance.max_total_moved_gpus
        if name.endswith("isolated"):
            assert run.preemptions == 0 and run.preempted_gpu_hours == 0
    assert runs["static_cohort"].preemptions > 0  # the slice does exercise reclaim
    # Queues that can reclaim, in a cohort without limits, lend nothing below their share by default: 195job, 4 GPUs
    # above its share of 12, gives them back and nothing else moves. Lending, they keep a margin over their busiest;
    # with no margin they lend more.
    moved = {name: sum(runs[name].gpus_moved_per_night) for name in runs if name.startswith("rebalanced_cohort")}
    assert moved["rebalanced_cohort"] <= 4 < moved["rebalanced_cohort_margins"] < moved["rebalanced_cohort_lending"]


def test_command_json_has_four_configurations_with_their_figures(
        slice_runs: tuple[list[Path], Path, dict[str, ReplayRun]]) -> None:
    traces, quotas, _ = slice_runs
    args = ["replay", "rebalance", *[a for t in traces for a in ("--trace", str(t))], "--trace-format", "itp",
            "--quotas", str(quotas), "--days", "20", "--format", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert list(data["configurations"]) == [c.name for c in CONFIGURATIONS]
    for name, figures in data["configurations"].items():
        assert KEYS <= figures.keys(), name
        assert sum(t["jobs"] for t in figures["tenants"].values()) == data["meta"]["jobs"]
        assert 0 < figures["deadline_satisfaction"] <= 1  # ITP carries deadlines
        assert 0 < figures["jain_fairness"] <= 1 and 0 < figures["gpu_allocation_ratio"] <= 1
        assert figures["worst_tenant_p95_queue_s"] == max(t["p95_queue_s"] for t in figures["tenants"].values())
    assert data["meta"]["total_gpus"] == 24


def test_bad_quota_file_is_one_line_naming_file_and_tenant(tmp_path: Path,
                                                           slice_runs: tuple[list[Path], Path, dict[str, ReplayRun]]
                                                           ) -> None:
    traces, _, _ = slice_runs
    bad = tmp_path / "quotas.yaml"
    bad.write_text("cluster10: lots\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", "rebalance", "--trace", str(traces[0]), "--trace-format", "itp",
                                 "--quotas", str(bad), "--format", "json"])
    assert result.exit_code == 1
    assert result.stdout == "" or "Traceback" not in result.output
    assert f"{bad}: cluster10: must be a whole number of GPUs" in result.output


@pytest.mark.parametrize(("reclaim", "lends", "b_samples", "a_hours"),
                         [("Any", False, 6.0, 168), ("Any", True, 6.0, 168), ("Never", False, 6.0, 168),
                          ("Never", False, 0.5, 168), ("Any", True, 6.0, 30)],
                         ids=["reclaiming", "reclaiming-lends", "never", "never-b-backlog-new", "reclaiming-lends-a-new"])
def test_the_replays_night_plans_what_the_rebalance_flow_plans_on_the_same_state(
        reclaim: str, lends: bool, b_samples: float, a_hours: int, tmp_path: Path) -> None:
    """The replay's nightly plan and the flow's (``gpuaas.operations.rebalance.plan``) on one state.

    The state: three queues of one cohort, a week of hourly samples. The flow reads the percentile
    of usage and the median and peak of pending GPUs from Prometheus; here the test writes those
    figures into the history frame from the same samples, and the snapshot carries the backlog now
    and the queues' ``reclaimWithinCohort``. The cohort is full at its busiest (b and c together
    want more than its 48 GPUs), so a lends its unused share only where it can reclaim it, and
    then only with ``reclaiming_lends`` (the cohort sets no borrowing or lending limit) and no
    ``reclaiming_keep_factor`` (else, in a full cohort, it keeps four times its busiest: its share).

    What the flow reads besides: the moves of the audit log, from a store, where the replay counts its
    own (a plan 6 hours ago is within the night's window, last night's is not); the deadline need of
    c's Workloads, planned on their estimated run times; b's backlog now, larger than any hourly sample
    of it when its pending GPUs are new (``b_samples`` their mean over the week), which the busiest
    demand counts in the flow. Queue a's history is a week, or 30 hours (``a_hours``: a queue created since,
    too young to lend below its share).
    """
    import numpy as np
    import pandas as pd

    from gpuaas.cluster.quota_replay._nightly import DeadlineWork, History, deadline_gpus, night_demand, plan_night
    from gpuaas.models import Snapshot, SourceStatus
    from gpuaas.operations import rebalance
    from gpuaas.operations.deadlines import pool_plans
    from gpuaas.store import AuditEntry, Store

    now = datetime.now(UTC)  # the audit view ends at the wall clock
    rng = np.random.default_rng(7)
    quotas = {"a": 16, "b": 16, "c": 16}
    means = {"a": 2.0, "b": 15.0, "c": 12.0}
    backlog = {"a": (0.0, 0.0), "b": (12.0, 5 * 3600.0), "c": (4.0, 600.0)}
    waiting = {"a": 0.0, "b": b_samples, "c": 2.0}
    # (hours ago, net GPUs) of the plans applied to each queue: last night's and one by hand 6 hours ago.
    applied = {"a": [(23.0, -4), (6.0, -2)], "b": [(23.0, 4), (6.0, 2)], "c": []}
    samples = {"a": a_hours, "b": 168, "c": 168}
    history = {q: History(used=deque(np.minimum(quotas[q], rng.poisson(means[q], samples[q])).astype(float)),
                          pending=deque(rng.poisson(waiting[q], samples[q]).astype(float)),
                          changes=deque(d for _, d in applied[q]),
                          pending_now=backlog[q][0], oldest_wait_s=backlog[q][1],
                          applied=deque((now - timedelta(hours=h), d) for h, d in applied[q])) for q in quotas}
    # c's three 10-GPU jobs must end within 2.5 hours and are told to run 2 (they run 3): all at once, 30 GPUs.
    work = [DeadlineWork("c", f"dl-{i}", 10, 2 * 3600.0, 9000.0) for i in range(3)]
    policy = Policy(rebalance=RebalancePolicy(reclaiming_lends=lends, reclaiming_keep_factor=0))
    need = deadline_gpus(quotas, work, 0.0)  # the replay's clock: its jobs' deadlines 2.5 hours ahead
    assert need == {"c": 30}
    reclaims = {q: reclaim != "Never" for q in quotas}
    replayed = plan_night(quotas, history, policy, reclaims, now=now, deadline_need=need)
    asked = night_demand(quotas, history, policy, reclaims, now=now, deadline_need=need)

    store = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    for q, moves in applied.items():
        for hours, delta in moves:
            store.append(AuditEntry(created_at=now - timedelta(hours=hours), flow="rebalance", action="quota-change",
                                    kind="ClusterQueue", name=q, mode="apply", outcome="applied",
                                    before={"gpu": 16 - delta}, after={"gpu": 16}, refers_to=int(hours)))
    audit = rebalance.read_audit_view(store, policy, now)
    store.close()
    assert audit.moved_24h == {("a", "gpu"): (0, 2), ("b", "gpu"): (2, 0)}

    pct = policy.rebalance.usage_percentile
    rows = []
    for q, h in history.items():
        use = float(np.percentile(list(h.used), pct))
        rows += [{"cluster_queue": q, "flavor": "gpu", "stat": "usage_p", "value": use},
                 {"cluster_queue": q, "flavor": "gpu", "stat": "reservation_p", "value": use},
                 {"cluster_queue": q, "flavor": "gpu", "stat": "history_seconds", "value": samples[q] * 3600.0},
                 {"cluster_queue": q, "flavor": "", "stat": "pending_median", "value": float(np.median(list(h.pending)))},
                 {"cluster_queue": q, "flavor": "", "stat": "pending_max", "value": float(max(h.pending))}]
    workloads = pd.DataFrame([{"namespace": "c", "name": w.name, "cluster_queue": "c", "state": "pending",
                               "gpus": float(w.gpus), "flavor": None, "active": True, "runtime_seconds": w.estimate_s,
                               "deadline_at": now + timedelta(seconds=w.deadline_s), "admitted_at": None}
                              for w in work])
    snap = Snapshot(
        collected_at=now,
        windows_minutes=(30.0,), sources={"kube": SourceStatus("kube", ok=True)},
        quotas=pd.DataFrame([{"cluster_queue": q, "cohort": "trace", "flavor": "gpu", "resource": "nvidia.com/gpu",
                              "nominal": float(g), "borrowing_limit": None, "lending_limit": None, "reserved": 0.0,
                              "usage": 0.0, "borrowed": 0.0, "reclaim_within_cohort": reclaim}
                             for q, g in quotas.items()]),
        queues=pd.DataFrame([{"name": q, "pending_gpus": p, "oldest_pending_seconds": w}
                             for q, (p, w) in backlog.items()]),
        workloads=workloads)
    pools = pool_plans(snap)
    [cohort] = rebalance.plan(snap, pd.DataFrame(rows), policy, audit=audit, pools=pools).cohorts
    flowed = cohort.plan
    assert flowed is not None, cohort.error

    def inputs(queues: list[Any]) -> list[tuple[Any, ...]]:
        return [(q.name, q.nominal, q.demand, q.busiest, q.guaranteed, q.weight, q.recent_change, q.reclaims,
                 q.moved_24h, q.history_seconds) for q in queues]

    assert inputs(asked.queues) == inputs(cohort.demand.queues)  # every figure the planner reads, busiest included
    assert asked.limits == cohort.demand.limits
    assert {c.queue: c.after for c in flowed.changes} == replayed.quotas
    assert replayed.moved_gpus == flowed.moved_gpus
    assert asked.history_seconds == cohort.demand.history_seconds == 7 * 86400
    if lends and a_hours >= 48:
        assert replayed.moved_gpus > 0 and replayed.quotas["a"] < quotas["a"]
    else:
        assert replayed.quotas == quotas


def test_the_nightly_deadline_need_is_told_each_jobs_estimate_not_its_true_run_time(
        slice_runs: tuple[list[Path], Path, dict[str, ReplayRun]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow reads a Workload's run time from its annotation, an estimate: so does the replay's nightly
    deadline need, while the job runs its true duration."""
    import gpuaas.cluster.quota_replay._engine as engine
    from gpuaas.cluster.quota_replay._nightly import deadline_gpus

    traces, quotas, _ = slice_runs
    table = load_quotas([], "itp", traces, quotas)
    jobs = [j for j in in_window(read_trace(traces, "itp"), 5) if j.gpus <= table[j.tenant]]
    told: list[Any] = []

    def seen(quotas: dict[str, int], work: list[Any], now: float) -> dict[str, int]:
        told.extend(work)
        return deadline_gpus(quotas, work, now)

    monkeypatch.setattr(engine, "deadline_gpus", seen)
    run = QuotaReplay(jobs, table, CONFIGURATIONS[2], estimates=[3 * j.duration for j in jobs]).run()
    truth = {r.name: r.duration for r in run.jobs}
    assert told and all(w.estimate_s == 3 * truth[w.name] for w in told)
    assert any(w.started_s is not None for w in told) and any(w.started_s is None for w in told)
    assert all(r.finished is not None and r.started is not None and r.finished - r.started == r.duration
               for r in run.jobs if r.runs == 1)


def test_a_bad_runtime_estimate_is_a_usage_error_naming_the_flag(
        slice_runs: tuple[list[Path], Path, dict[str, ReplayRun]]) -> None:
    traces, quotas, _ = slice_runs
    result = runner.invoke(app, ["replay", "rebalance", "--trace", str(traces[0]), "--trace-format", "itp",
                                 "--quotas", str(quotas), "--runtime-estimate", "factor:0"])
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [
        "error: Invalid value for '--runtime-estimate': expected exact, factor:F (0 < F <= 1000) or lognormal:SIGMA "
        "(0 <= SIGMA <= 10) (got 'factor:0'); see gpuaas replay rebalance --help"]


def test_a_bad_policy_file_is_one_line_naming_file_and_field(tmp_path: Path,
                                                             slice_runs: tuple[list[Path], Path, dict[str, ReplayRun]]
                                                             ) -> None:
    traces, quotas, _ = slice_runs
    bad = tmp_path / "policy.yaml"
    bad.write_text("rebalance:\n  min_step_gpus: -1\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", "rebalance", "--trace", str(traces[0]), "--trace-format", "itp",
                                 "--quotas", str(quotas), "--policy", str(bad), "--format", "json"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert str(bad) in result.stderr and "rebalance.min_step_gpus" in result.stderr
