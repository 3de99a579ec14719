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


def _rows(cells: list[list[str]], width: int) -> dict[str, str]:
    """A table's logical rows by workload (the cell that holds one of NAMES), each folded cell's lines joined."""
    rows: dict[str, list[str]] = {}
    last = None
    for row in cells:
        named = [c for c in row if c in NAMES]
        if len(row) == width and named:
            last = named[0]
            rows[last] = list(row)
        elif len(row) == width and last and not row[0]:
            rows[last] = [f"{a} {b}".strip() for a, b in zip(rows[last], row, strict=True)]
        else:
            last = None
    return {name: " ".join(row) for name, row in rows.items()}


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
    # The first line says what the run did, with the counts of the decisions table below it.
    assert lines[0].startswith("Reclaim (dry-run): 3 idle workloads holding 10 GPUs would be stopped; ")
    assert "Kueue backlog per ClusterQueue" in out and "vision-cq" in out
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│")]
    assert ["nvml", "not used (optional)"] in [row[:2] for row in cells]  # absent and optional: no failure
    for name in NAMES:  # whole, in a cell of its own (a folded name would be split over two rows)
        assert any(name in row for row in cells), name
    idle = _rows(cells, 5)  # the idle table at 80 columns: workload, GPUs, max activity, verdict, why
    assert idle["research/ray-hparam-sweep"].split()[3] == "idle"
    assert "max activity 0.00 ≤" in idle["research/ray-hparam-sweep"]  # the reason is a phrase with numbers
    assert " idle " in idle["platform/nb-alice"]
    assert "opted out" in idle["platform/nb-bob"]
    assert " unknown " in idle["platform/embed-batch"]  # missing telemetry is never idle
    assert " busy " in idle["platform/llm-chat"]
    planned = {name: row for name, row in _rows(cells, 6).items() if " planned " in row}  # the decisions table
    assert len(planned) == 3 and "suspend (frees" in planned["research/ray-hparam-sweep"]
    assert "idle " in planned["research/ray-hparam-sweep"] and "max activity 0.00" in planned["platform/nb-alice"]
    assert "(not shown at 80 columns: kind, tenant; gpuaas --wide shows them)" in out
    flat = " ".join(out.split())  # sentences wrap at 80 columns
    assert "3 workloads have incomplete telemetry and are never treated as idle; nothing was changed." in flat
    assert (tmp_path / "data" / "gpuaas.db").exists()
    # then the nightly rebalance in dry-run: the quota plan per cohort, nothing patched
    assert "Quota plan (dry-run)" in out and "GPUs moved" in flat
    # the cycle ends with the cost report: the funnel, outcomes, and where the HTML report is
    assert "GPU-hour funnel per tenant" in out and "no verified outcome" in flat
    last = out.strip().splitlines()[-1]
    assert last.startswith("HTML report") and Path(last.split(": ", 1)[1]).is_file()
    # Progress on stderr as plain lines (no terminal: no spinner), each long step with its time.
    assert "starting the embedded cluster…" in proc.stderr and "starting the embedded cluster: done in" in proc.stderr
    assert not list((tmp_path / "data" / "cluster").glob("**/*.pid"))
