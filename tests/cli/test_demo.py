"""``gpuaas demo`` — what ``make demo`` runs — as a real process on a fresh data directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_demo_runs_the_main_job_on_the_embedded_cluster(tmp_path: Path) -> None:
    gpuaas = Path(sys.executable).with_name("gpuaas")
    env = {**os.environ, "GPUAAS_DATA_DIR": str(tmp_path / "data"), "COLUMNS": "200"}
    proc = subprocess.run([str(gpuaas), "demo", "--history", "2h"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "Kueue backlog per ClusterQueue" in out and "vision-cq" in out
    rows = {line.split("│")[2].strip(): line for line in out.splitlines() if line.count("│") > 6}
    assert " idle " in rows["research/ray-hparam-sweep"]
    assert " idle " in rows["platform/nb-alice"]
    assert "opted out" in rows["platform/nb-bob"]
    assert " unknown " in rows["platform/embed-batch"]  # missing telemetry is never idle
    assert " busy " in rows["platform/llm-chat"]
    planned = [line for line in out.splitlines() if " planned " in line and line.startswith("│")]  # table rows
    assert len(planned) == 3 and any("research/ray-hparam-sweep" in p and "suspend" in p for p in planned)
    assert "nothing was changed" in out
    assert (tmp_path / "data" / "gpuaas.db").exists()
    # then the nightly rebalance in dry-run: the quota plan per cohort, nothing patched
    assert "Quota plan (dry-run)" in out and "GPUs moved" in out
    # the cycle ends with the cost report: the funnel, outcomes, and where the HTML report is
    assert "GPU-hour funnel per tenant" in out and "no verified outcome" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("HTML report") and Path(last.split(": ", 1)[1]).is_file()
    assert not list((tmp_path / "data" / "cluster").glob("**/*.pid"))
