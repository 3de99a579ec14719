"""``gpuaas replay rebalance`` accounts for every tenant of its input.

A tenant of the trace or of the quotas is either replayed (a row of the tenant table, an entry of every
configuration's ``tenants``) or named in one ``Left out:`` line with why; the headline's counts are the
table's. A tenant that the quotas file or the policy names but the trace does not have is refused in one
line naming the file and field. The traces are hand-made, a few jobs each, so each case is known.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cluster.quota_replay import CONFIGURATIONS
from gpuaas.cluster.quota_replay._engine import QuotaReplay
from gpuaas.cluster.quota_replay._report import summarise
from gpuaas.cluster.traces import TraceJob

runner = CliRunner()

# a: two jobs that fit its 4 GPUs, one of 8 that does not; big: one job of 8 on 4 GPUs; nq: no quota;
# late: its one job on day 3, outside --days 1.
PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 00:00:00,3600,2,7200,a
2017-10-09 00:30:00,3600,8,28800,a
2017-10-09 01:00:00,3600,1,3600,a
2017-10-09 02:00:00,3600,8,28800,big
2017-10-09 03:00:00,3600,1,3600,nq
2017-10-12 00:00:00,3600,1,3600,late
"""


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text(PHILLY, encoding="utf-8")
    return path


def _quotas(tmp_path: Path, text: str = "a: 4\nbig: 4\nlate: 2\n") -> Path:
    path = tmp_path / "quotas.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _replay(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["replay", "rebalance", "--trace-format", "philly", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_accounts_for_every_tenant_with_why(tmp_path: Path, trace: Path) -> None:
    code, out, err = _replay("--trace", str(trace), "--quotas", str(_quotas(tmp_path)), "--days", "1",
                             "--format", "json")
    assert code == 0, err
    meta = json.loads(out)["meta"]
    assert {name: t["left_out"] for name, t in meta["tenants"].items()} == {
        "a": None, "big": "jobs_too_large", "nq": "no_quota", "late": "no_job_in_window"}
    assert meta["tenants"]["a"]["jobs"] == 2 and meta["tenants"]["a"]["excluded_jobs"] == 1
    assert all(t["why"].startswith(f"Left out: {name} ") for name, t in meta["tenants"].items() if t["left_out"])
    for figures in json.loads(out)["configurations"].values():
        assert set(figures["tenants"]) == {"a"}


def test_table_names_every_tenant_and_its_headline_adds_up(tmp_path: Path, trace: Path) -> None:
    code, out, err = _replay("--trace", str(trace), "--quotas", str(_quotas(tmp_path)), "--days", "1", "--wide")
    assert code == 0, err
    lines = out.splitlines()
    left = {m.group(1): line for line in lines if (m := re.match(r"Left out: (\S+) ", line))}
    assert set(left) == {"big", "nq", "late"}
    assert "more GPUs than its quota" in left["big"] and "no quota" in left["nq"] and "first 1 days" in left["late"]
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    tenant_rows = [r for r in rows if not r[0].startswith(("static", "rebalanced"))]
    assert [r[0] for r in tenant_rows] == ["a"]
    head = re.search(r"(\d+) jobs? of (\d+) tenants? over .*, (\d+) GPUs? \((\d+) jobs? excluded, (\d+) tenants? left out\)",
                     out)
    assert head, out
    jobs, tenants, gpus, excluded, left_out = map(int, head.groups())
    assert jobs == sum(int(r[2]) for r in tenant_rows) == 2
    assert tenants == len(tenant_rows) and gpus == sum(int(r[1]) for r in tenant_rows) == 4
    assert excluded == sum(int(r[3]) for r in tenant_rows) + 2  # a's job of 8, and big's and nq's one job each
    assert left_out == len(left)


def test_a_vc_without_a_job_in_the_trace_is_named(tmp_path: Path, trace: Path) -> None:
    (tmp_path / "philly_vc_nodes_helios.csv").write_text("vc,node num\na,1\nbig,1\nidle,2\n", encoding="utf-8")
    code, out, err = _replay("--trace", str(trace))
    assert code == 0, err
    assert "Left out: idle (quota 16 GPUs): no job in the trace." in out.splitlines()


@pytest.mark.parametrize(("policy", "field"), [
    ("tenants:\n  - name: research\n    cluster_queues: [a, ghost]\n", "tenants[0].cluster_queues[1]"),
    ("tenants:\n  - name: research\n    namespaces: [research]\n", "tenants[0].cluster_queues"),
])
def test_a_policy_tenant_the_trace_does_not_have_is_one_line(tmp_path: Path, trace: Path, policy: str,
                                                             field: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(policy, encoding="utf-8")
    code, out, err = _replay("--trace", str(trace), "--quotas", str(_quotas(tmp_path)), "--policy", str(path))
    assert code == 1 and out == ""
    assert err.startswith(f"error: {path}: {field}: ") and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_a_quota_for_a_tenant_the_trace_does_not_have_is_one_line(tmp_path: Path, trace: Path) -> None:
    quotas = _quotas(tmp_path, "a: 4\nghost: 8\n")
    code, out, err = _replay("--trace", str(trace), "--quotas", str(quotas))
    assert code == 1 and out == ""
    assert err.startswith(f"error: {quotas}: ghost: no tenant of the trace") and len(err.strip().splitlines()) == 1


def test_two_itp_files_of_one_name_are_refused_rather_than_merged(tmp_path: Path) -> None:
    paths = []
    for folder in ("x", "y"):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "team.csv"
        path.write_text("submission_time,deadline,num_gpu,duration\n0,7200,1,3600\n", encoding="utf-8")
        paths.append(path)
    result = runner.invoke(app, ["replay", "rebalance", "--trace-format", "itp", "--trace", str(paths[0]),
                                 "--trace", str(paths[1])])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith(f"error: {paths[1]}: same tenant name 'team'")


def test_a_starved_tenant_keeps_its_entry_and_counts_as_the_worst() -> None:
    """b's job can never be admitted: it waits until the replay stops, and that wait is b's, the worst tenant's
    and part of Jain's index; a configuration that starves a tenant cannot score better than one that serves it."""
    jobs = [TraceJob("a", 0.0, 3600.0, 1), TraceJob("b", 0.0, 3600.0, 4)]
    run = QuotaReplay(jobs, {"a": 2, "b": 2}, CONFIGURATIONS[0]).run()
    figures = summarise(run)
    b = figures["tenants"]["b"]
    assert b["jobs"] == 1 and b["jobs_unfinished"] == 1
    assert b["p95_queue_s"] == b["avg_queue_s"] == round(run.makespan_s, 1) > 30 * 86400  # waited until the stop
    assert figures["tenants"]["a"] == {"avg_queue_s": 0.0, "p95_queue_s": 0.0, "jobs": 1, "jobs_unfinished": 0}
    assert figures["worst_tenant_p95_queue_s"] == b["p95_queue_s"]
    assert figures["jain_fairness"] == 0.5  # one tenant waits, the other does not
    assert figures["avg_queue_s"] == round(run.makespan_s / 2, 1)


def _seconds(said: str) -> int:
    """``3h07m`` or ``45m`` back in seconds (the headline's durations are whole minutes)."""
    match = re.fullmatch(r"(?:(\d+)h)?(\d+)m", said)
    assert match, said
    return 3600 * int(match.group(1) or 0) + 60 * int(match.group(2))


def test_the_first_line_compares_the_worst_tenants_wait_with_static_quotas(tmp_path: Path, trace: Path) -> None:
    args = ("--trace", str(trace), "--quotas", str(_quotas(tmp_path)), "--days", "1")
    code, out, err = _replay(*args)
    assert code == 0, err
    first = " ".join(out.split("Rebalance replay:")[0].split())
    said = re.fullmatch(r"Nightly rebalancing: the worst-off tenant's p95 wait (\S+) against (\S+) with static quotas "
                        r"\(isolated queues\), (\S+) against (\S+) with static quotas \(one cohort\); GPUs moved a "
                        r"night: (\S+) \(isolated\), (\S+) \(cohort\)\.", first)
    assert said, first
    code, out, err = _replay(*args, "--format", "json")
    data = json.loads(out)
    assert data["headline"] == first and first in " ".join(err.split())
    figures = data["configurations"]
    for said_wait, name in zip(said.groups()[:4], ("rebalanced_isolated", "static_isolated", "rebalanced_cohort",
                                                    "static_cohort"), strict=True):
        assert 0 <= figures[name]["worst_tenant_p95_queue_s"] - _seconds(said_wait) < 60, (name, said_wait)
    for said_moved, name in zip(said.groups()[4:], ("rebalanced_isolated", "rebalanced_cohort"), strict=True):
        nights = figures[name]["gpus_moved_per_night"]
        assert float(said_moved) == pytest.approx(sum(nights) / max(len(nights), 1), abs=0.05)


def test_an_itp_file_whose_name_is_no_kubernetes_name_is_refused_naming_it(tmp_path: Path) -> None:
    """An ITP tenant is named by its file, and becomes a ClusterQueue: ``My_Trace.csv`` cannot, and the error says
    so naming the file and a name it could have, where a validation error of the tenant model escaped."""
    path = tmp_path / "My_Trace.csv"
    path.write_text("submission_time,deadline,num_gpu,duration\n0,7200,1,3600\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", "rebalance", "--trace-format", "itp", "--trace", str(path)])
    assert result.exit_code == 1 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: {path}: 'My_Trace' is no Kubernetes object name") and "my-trace.csv" in line
