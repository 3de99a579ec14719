"""``gpuaas demo`` — what ``make demo`` runs — as a real process on a fresh data directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


NAMES = ["research/ray-hparam-sweep", "platform/nb-alice", "platform/nb-bob", "platform/embed-batch",
         "platform/llm-chat", "platform/llm-legacy", "vision/vision-train-8"]


def test_demo_runs_the_main_job_on_the_embedded_cluster(tmp_path: Path) -> None:
    """As ``make demo`` runs it: stdout is a pipe, 80 columns. No line is wider, no workload name is cut."""
    gpuaas = Path(sys.executable).with_name("gpuaas")
    env = {**os.environ, "GPUAAS_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "80"}
    proc = subprocess.run([str(gpuaas), "demo", "--history", "2h"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    lines = out.splitlines()
    assert [line for line in lines if len(line) > 80 and str(tmp_path) not in line] == []  # a path is kept whole
    flat = " ".join(out.split())  # sentences wrap at 80 columns
    # The first line is reclaim's headline, as `gpuaas reclaim` prints it: what it would do and the next step.
    assert flat.startswith("Dry-run: 10 GPUs would be freed by stopping 3 idle workloads (")
    assert "nothing was changed; to act: gpuaas reclaim --apply." in flat.split("Reclaim decisions")[0]
    assert "Kueue backlog per ClusterQueue" in out and "vision-cq" in out
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│")]
    nvml = next(row for row in cells if row and row[0] == "nvml")  # absent and optional: no failure
    assert nvml[1] == "no (optional)"
    for name in NAMES:  # whole, in a cell of its own (a folded name would be split over two rows)
        assert any(name in " ".join(row) for row in cells), name
    # The same reason, with its numbers, in the decisions (as `gpuaas reclaim`) and in the idle table.
    assert "RayCluster research/ray-hparam-sweep reason: idle " in flat
    assert flat.count("max activity 0.00 ≤") >= 4  # 3 decisions and their rows of the idle table
    assert "opted out" in flat
    verdicts = {name: row for row in cells for name in row if name in NAMES}
    assert "idle" in verdicts["research/ray-hparam-sweep"] and "unknown" in verdicts["platform/embed-batch"]
    assert "busy" in verdicts["platform/llm-chat"]  # missing telemetry is never idle, busy is busy
    assert "(not shown at 80 columns:" in out and "--wide shows them)" in out
    # the demo's rows go to a database of its own, never the deployment's (nothing is changed)
    assert (tmp_path / "data" / "cluster" / "demo" / "data" / "gpuaas.db").exists()
    assert not (tmp_path / "data" / "gpuaas.db").exists()
    # then the nightly rebalance in dry-run: the quota plan per cohort, nothing patched, worded as planned
    assert "Quota plan (dry-run)" in out and "GPUs would move" in flat
    # the cycle ends with the cost report: the funnel, outcomes, and where the HTML report is
    assert "GPU-hour funnel per tenant" in out and "no verified outcome" in flat
    last = out.strip().splitlines()[-1]
    assert last.startswith("HTML report") and Path(last.split(": ", 1)[1]).is_file()
    # Progress on stderr as plain lines (no terminal: no spinner), each long step with its time.
    assert "starting the embedded cluster…" in proc.stderr and "starting the embedded cluster: done in" in proc.stderr
    assert not list((tmp_path / "data" / "cluster").glob("**/*.pid"))
    # A second demo is a new cluster: it starts afresh, it does not find the first one's history in its way.
    again = subprocess.run([str(gpuaas), "demo", "--history", "1h"], env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]


def test_two_demos_of_one_seed_print_the_same_costs(tmp_path: Path) -> None:
    """The cycle runs at the instant the history ends, on a cluster that stands still there: a job finishing or a
    window sliding while the steps run would make two demos of one seed disagree on what the GPUs cost. (The
    requests served follow the time of day the history ends at, so counts and costs per outcome may differ
    between two demos a minute apart.)"""
    import re

    gpuaas = Path(sys.executable).with_name("gpuaas")

    def costs(run: int) -> list[str]:
        env = {**os.environ, "GPUAAS_DATA_DIR": str(tmp_path / f"data-{run}"), "COLUMNS": "200"}
        proc = subprocess.run([str(gpuaas), "demo", "--history", "2h"], env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = proc.stdout[proc.stdout.index("GPUs: $") - 20:]
        return re.findall(r"\$[\d,]+\.\d+(?!\d)(?! per)", report)  # not a cost per outcome

    first, second = costs(1), costs(2)
    assert len(first) > 20
    assert first == second
