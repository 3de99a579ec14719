"""What a person reads in the Prefect UI: the defects an ops engineer saw, one by one."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from gpuaas.actions import ActionResult
from gpuaas.models import Snapshot, SourceStatus
from gpuaas.policies.reclaim import Decision
from reports.collect import quality_rows
from reports.reclaim import decision_rows, summary_markdown

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
EVIDENCE = {"activity_max": 0.0, "threshold": 0.05, "window_minutes": 30, "coverage": 1.0, "gpus_observed": 2,
            "gpus_requested": 2}


def _result(name: str, result: str = "planned", tenant: str | None = "team-a") -> ActionResult:
    decision = Decision(kind="RayCluster", namespace="team-a", name=name, uid="u", tenant=tenant, gpus=2,
                        idle_seconds=3600, free="quota", outcome="planned", reason="idle", resource_version="1",
                        idempotency_key=name, mode="dry-run", evidence=EVIDENCE)
    return ActionResult(decision, result, "idle", None, method="suspend", frees="quota")


def _snapshot(workloads: pd.DataFrame | None = None, costs: pd.DataFrame | None = None) -> Snapshot:
    return Snapshot(NOW, (30.0,), {"kube": SourceStatus("kube", True)},
                    workloads=workloads if workloads is not None else pd.DataFrame(),
                    costs=costs if costs is not None else pd.DataFrame())


def test_first_line_says_what_the_run_did() -> None:
    costs = pd.DataFrame({"namespace": ["team-a", "team-a"], "controller": ["a", "other"],
                          "controller_kind": ["raycluster", "raycluster"], "gpu_cost": [6.0, 3.0],
                          "gpu_hours": [2.0, 1.0]})
    text = summary_markdown([_result("a"), _result("b"), _result("c", "deferred")], _snapshot(costs=costs),
                            "dry-run", 2)
    first = text.splitlines()[0]
    assert first == ("Dry-run: 4 GPUs would be freed by stopping 2 idle workloads ($12.00 per hour); nothing was changed; "
                     "to act: gpuaas reclaim --apply.")
    assert text.count("nothing was changed") == 1
    # Each price source once, with how many workloads it priced (was "OpenCost, fleet average, OpenCost, ...").
    assert "price per GPU-hour: OpenCost (fleet average for 1, this workload for 1)" in text
    assert "deferred 1, planned 2 (cap 2 actions per run)" in text


def test_nothing_to_do_says_why() -> None:
    workloads = pd.DataFrame({"telemetry": ["unknown"] * 19})
    first = summary_markdown([], _snapshot(workloads), "dry-run", 5).splitlines()[0]
    assert first == "Nothing to reclaim (degraded): telemetry incomplete for 19 of 19 GPU workloads — nothing judged idle."
    busy = summary_markdown([], _snapshot(), "apply", 5, busy="no writes this run: x holds the lock (waited 60 s)")
    assert busy.splitlines()[0] == ("Another run is writing; nothing written: x holds the lock (waited 60 s); "
                                    "the next run decides again.")


def test_table_cells_are_never_a_bare_dash_and_evidence_is_a_short_phrase() -> None:
    rows = decision_rows([_result("a", tenant=None)])
    assert all(value != "-" for row in rows for value in row.values())
    assert rows[0]["evidence"] == "max 0.00 ≤ 0.05 in 30m"
    assert rows[0]["workload"] == "RayCluster team-a/a" and rows[0]["idle"] == "1h00m"


def test_the_decisions_table_is_narrow_and_the_markdown_has_the_whole_evidence() -> None:
    """Six columns of short cells (it must fit a 1600-pixel screen: the e2e measures it in Chromium);
    a long refusal is cut at a word in the table and whole in the summary's evidence list."""
    long_reason = "the RayCluster's resourceVersion changed since the snapshot (42 -> 57): not patched"
    refused = dataclasses.replace(_result("b", "refused"), reason=long_reason)
    rows = decision_rows([_result("a"), refused])
    assert list(rows[0]) == ["workload", "GPUs", "idle", "evidence", "result", "audit id"]
    assert rows[0]["result"] == "planned: suspend"
    assert rows[1]["result"] == "refused: the RayCluster's …"
    text = summary_markdown([_result("a"), refused], _snapshot(), "dry-run", 5)
    assert "## Evidence per decision" in text and long_reason in text
    assert "- **RayCluster team-a/a**, tenant team-a, 2 GPUs: max activity 0.00 ≤ 0.05 over 30m, 100% seen" in text
    one = dataclasses.replace(_result("c"), decision=dataclasses.replace(_result("c").decision, gpus=1))
    assert "- **RayCluster team-a/c**, tenant team-a, 1 GPU: max activity" in summary_markdown([one], _snapshot(),
                                                                                               "dry-run", 5)


def test_an_optional_absent_source_is_not_shown_as_a_failure() -> None:
    snapshot = Snapshot(NOW, (30.0,), {"nvml": SourceStatus("nvml", False, error="no NVML driver", required=False),
                                       "kube": SourceStatus("kube", False, error="refused")})
    ok = {r["source"]: r["ok"] for r in quality_rows(snapshot)}
    assert ok == {"nvml": "no (optional)", "kube": "NO"}
    assert all(r["staleness s"] == "" for r in quality_rows(snapshot))


def test_the_rebalance_and_cost_report_artifacts_say_first_what_the_run_found() -> None:
    from gpuaas.policies.cost import CostReport
    from reports.cost_report import cost_first_line
    from reports.cost_report import summary_markdown as cost_markdown
    from reports.rebalance import first_line

    assert first_line([], "dry-run", None) == "Nothing to rebalance: no cohort with GPU quota."
    cluster = {"allocated_gpu_hours": 111.7, "busy_gpu_hours": 91.4, "productive_gpu_hours": 15.1,
               "in_progress_gpu_hours": 0.0, "unknown_gpu_hours": 2.0, "active_gpu_hours": 40.0, "gpu_cost": 300.0,
               "total_cost": 357.7, "waste_cost": 45.3, "verified_outcomes": 132022, "verified_requests": 132021,
               "verified_jobs": 1}
    service = {"service": "chat"}
    report = CostReport(window_s=7200, start=NOW, end=NOW, tenants=[], services=[service], cluster=cluster,
                        wasters=[], daily=[], batch=[], notes=[], queries=0)
    first = cost_markdown(report, None, None).splitlines()[0]
    assert first == cost_first_line(report) == ("2 h of GPUs: $357.70 allocated to workloads ($300.00 on GPUs), $45.30 "
                                                "of it on allocated but idle GPUs; 132,021 verified requests and 1 "
                                                "batch job done in time.")
    empty = CostReport(window_s=3600, start=NOW, end=NOW, tenants=[], services=[service],
                       cluster={"allocated_gpu_hours": 0}, wasters=[], daily=[], batch=[], notes=[], queries=0)
    assert cost_first_line(empty) == "No GPU-hours allocated in the 1 h window: nothing to cost."
    # a policy without services says so first: every outcome figure would otherwise read as no work done
    bare = CostReport(window_s=7200, start=NOW, end=NOW, tenants=[], services=[], cluster=cluster, wasters=[],
                      daily=[], batch=[], notes=[], queries=0)
    assert cost_first_line(bare).startswith("The policy has no services: section, so no outcome is counted")


def test_a_degraded_summary_warns_in_words_the_prefect_ui_renders() -> None:
    """The Prefect UI renders no emoji shortcode: a ``:warning:`` prints as those nine characters."""
    from reports.collect import summary_markdown as collect_markdown
    from reports.rebalance import rebalance_markdown

    degraded = Snapshot(NOW, (30.0,), {"kube": SourceStatus("kube", True),
                                       "prometheus": SourceStatus("prometheus", False, error="connection refused")},
                        workloads=pd.DataFrame(), costs=pd.DataFrame())
    texts = [summary_markdown([], degraded, "dry-run", 5),
             collect_markdown(degraded.summary(), 0, True),
             rebalance_markdown([], "dry-run", {}, "prometheus: connection refused")]
    for text in texts:
        assert "**Warning:** degraded snapshot" in text and not re.search(r":[a-z_]+:", text), text


def test_money_keeps_significant_digits() -> None:
    from reports.cost_report import money, per_outcome

    assert money(0.000064) != money(0.00012)
    assert (money(0.000064), money(0.00012), money(0.5), money(1234.5), money(0.0)) == (
        "$0.0000640", "$0.000120", "$0.500", "$1,234.50", "$0.00")
    assert per_outcome(0.000064) == "$0.0640 per 1,000 requests"
    assert per_outcome(17.5, "batch") == "$17.50 per job"


LONG_NAMES = ["research-llm-pretrain-7b-finetune-sweep-0042", "vision-train-detector-large-batch-0007", "c"]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as ``make`` runs it: stdout a pipe (no terminal), COLUMNS=80."""
    problem = tmp_path / "problem.yaml"
    problem.write_text("capacity: {nvidia.com/gpu: 4}\njobs:\n" + "".join(
        f"  - {{name: {n}, gpus: 2, duration: 60, deadline: 120}}\n" for n in LONG_NAMES))
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("FORCE_COLOR", None)
    return subprocess.run([str(Path(sys.executable).with_name("gpuaas")), *args, str(problem)], env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_cli_tables_fit_80_columns_and_never_cut_a_name(tmp_path: Path) -> None:
    done = _cli(tmp_path, "plan", "deadlines")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│")]
    assert [row[0] for row in cells] == LONG_NAMES  # each name whole on its own row, none folded or cut
    assert "(not shown at 80 columns: resource, end, start; --wide shows them)" in done.stdout
    wide = _cli(tmp_path, "--wide", "plan", "deadlines")
    header = next(line for line in wide.stdout.splitlines() if "job" in line and "┃" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["job", "resource", "GPUs", "start", "end", "deadline",
                                                            "status"]
    assert "not shown" not in wide.stdout


def test_change_is_shown_only_against_a_previous_period_with_data() -> None:
    """A previous period that began before the telemetry (its first day empty) gives no percentage: $1.43 of
    data would turn $1,500 into "+104,800%". A complete one does, and a tenant new in it says so."""
    from gpuaas.policies.cost import CostReport
    from reports.cost_report import change_rows

    def report(cost: float, first_day: float, tenants: tuple[str, ...] = ("a",)) -> CostReport:
        rows = [{"tenant": t, "total_cost": cost, "gpu_cost": cost, "waste_cost": 0.0, "cost_per_outcome": None}
                for t in tenants]
        daily = [{"service": "s", "day": 0, "total_cost": first_day, "verified_outcomes": 0.0},
                 {"service": "s", "day": 1, "total_cost": cost - first_day, "verified_outcomes": 0.0}]
        return CostReport(window_s=172800, start=NOW, end=NOW, tenants=rows, services=[], cluster={}, wasters=[],
                          daily=daily, batch=[], notes=[], queries=0)

    now = report(1500.0, 700.0, ("a", "b"))
    assert {r["cost change"] for r in change_rows(now, report(1.43, 0.0))} == {"no data before"}
    rows = {r["tenant"]: r for r in change_rows(now, report(1000.0, 500.0))}
    assert rows["a"]["cost change"] == "+50%" and rows["b"]["cost change"] == "no data before"


def test_a_count_of_one_is_singular() -> None:
    from reports import counted

    assert [counted(1, "GPU"), counted(2.5, "GPU"), counted(0, "idle workload"), counted(1, "idle workload")] == [
        "1 GPU", "2.5 GPUs", "0 idle workloads", "1 idle workload"]
    from gpuaas.operations.rebalance import CohortOutcome
    from gpuaas.policies.quotas import CohortDemand, QueueDemand, QuotaLimits, plan_quotas
    from reports.collect import headline
    from reports.rebalance import first_line

    limits = QuotaLimits(8, 100, 32, 1)
    queues = [QueueDemand("a", {"a100": 7}, {"a100": 8}), QueueDemand("b", {"a100": 7}, {"a100": 6})]
    one = [CohortOutcome("c", CohortDemand("c", queues, limits, 86400.0, False), plan_quotas(queues, limits))]
    assert first_line(one, "dry-run", None).startswith("Dry-run: 1 GPU of quota would move in ")
    assert first_line(one, "dry-run", "prometheus: down").startswith("Degraded snapshot (prometheus: down): 1 GPU of ")
    summary = {**_snapshot().summary(), "workloads": 1, "snapshot_id": 3,
               "queues": [{"pending_gpus": 1.0, "admitted_gpus": 0.0}]}
    assert headline(summary, 1).startswith("Snapshot 3: 1 workload, 1 GPU waiting, 1 idle candidate, ")
    from reports.rebalance import rebalance_markdown

    assert "- deadline plan: a100 needs 1 extra GPU to meet every deadline" in rebalance_markdown(
        one, "dry-run", {"c": {"a100": 1}}, None)


def test_a_cohort_where_every_queue_wants_its_share_says_on_the_first_line_that_only_more_gpus_help() -> None:
    from gpuaas.operations.rebalance import CohortOutcome
    from gpuaas.policies.quotas import CohortDemand, QueueDemand, QuotaLimits, plan_quotas
    from reports.rebalance import first_line

    limits = QuotaLimits(8, 100, 32, 1)
    short = [QueueDemand("a", {"a100": 7}, {"a100": 20}), QueueDemand("b", {"a100": 7}, {"a100": 20})]
    spare = [QueueDemand("c", {"a100": 7}, {"a100": 1}), QueueDemand("d", {"a100": 7}, {"a100": 20})]
    outcomes = [CohortOutcome(name, CohortDemand(name, queues, limits, 86400.0, False), plan_quotas(queues, limits))
                for name, queues in (("research", short), ("prod", spare))]
    line = first_line(outcomes, "dry-run", None)
    assert line.startswith("Dry-run: 6 GPUs of quota would move in 1 of 2 cohorts")
    assert line.endswith("In research (a100) every queue wants at least its share: no quota move can meet it there, "
                         "more GPUs can (the deadline plan's gpuaas_extra_gpus_needed says how many).")
    assert "prod" not in line.split("In ")[-1]


def test_the_same_note_for_several_objects_is_read_once() -> None:
    from reports import grouped_notes

    cost = ["service llm-chat: replicas needed unknown: no capacity sweep",
            "tenant nlp: total cost $191.90, no verified outcome",
            "service llm-eval: replicas needed unknown: no capacity sweep",
            "GPU hours: a GPU is read from DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "service llm-legacy: total cost $14.99, no verified outcome",
            "service llm-legacy: replicas needed unknown: no capacity sweep"]
    assert grouped_notes(cost, shown=8, name_first=False) == [
        "replicas needed unknown: no capacity sweep — 3 services (llm-chat, llm-eval, llm-legacy)",
        "tenant nlp: total cost $191.90, no verified outcome",
        "GPU hours: a GPU is read from DCGM_FI_PROF_GR_ENGINE_ACTIVE",  # not a name: left as it is
        "service llm-legacy: total cost $14.99, no verified outcome",
    ]
    # Deadline notes start with the workload's name; four of them are cut to the first three.
    waits = [f"team-a/job-{k} waits for 4 GPUs" for k in range(4)]
    assert grouped_notes([*waits, "team-b/x is late"]) == [
        "waits for 4 GPUs — 4 workloads (team-a/job-0, team-a/job-1, team-a/job-2, …)", "team-b/x is late"]
    # A note that names its workload before a colon lists the names without it, and reads for one as for many.
    running = [f"ml/ray-{k}: running with no run time, so assumed to hold its GPUs" for k in range(2)]
    assert grouped_notes([*running, "ml/one: running with no run time"]) == [
        "running with no run time, so assumed to hold its GPUs — 2 workloads (ml/ray-0, ml/ray-1)",
        "ml/one: running with no run time"]


def test_the_writes_an_interrupted_run_left_open_are_counted_apart_with_what_to_undo() -> None:
    from gpuaas.actions import Settled
    from gpuaas.models import Outcome
    from reports.reclaim import headline, settled_line

    assert settled_line([]) == ""
    missed = [Settled("reclaim", Outcome.failed, 3, "Notebook team-a/nb")]
    assert settled_line(missed) == (" An interrupted run had left 1 write open, settled now from the objects: "
                                    "1 stop had not landed.")
    mixed = [Settled("reclaim", Outcome.applied, 2, "RayCluster team-a/ray"),
             Settled("reclaim", Outcome.applied, 5, "Deployment team-b/dep"), *missed,
             Settled("restore", Outcome.restored, 7, "Notebook team-c/lab"),
             Settled("restore", Outcome.failed, 9, "StatefulSet team-c/sts")]
    assert settled_line(mixed) == (
        " An interrupted run had left 5 writes open, settled now from the objects: 2 stops had landed (to reverse: "
        "gpuaas undo 2 5); 1 stop had not; the undo of Notebook team-c/lab had restored it; the undo of "
        "StatefulSet team-c/sts had not (see gpuaas audit list).")
    # after this run's own sentence, and in the artifact's first line as in the CLI's
    first = headline([], _snapshot(), "apply", settled=mixed[:1])
    assert first.startswith("Nothing to reclaim") and first.endswith("(to reverse: gpuaas undo 2).")
    assert summary_markdown([], _snapshot(), "apply", 5, settled=mixed[:1]).splitlines()[0] == first
