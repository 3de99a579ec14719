"""Where a replay's quotas come from, refused at the source: the Helios VC table beside a Philly trace, the
``--quotas`` file and ``replay deadlines --gpus``.

A bad VC table must be named with its line and column, not surface later as "no job fits its tenant's quota"
blamed on the trace; a GPU count past the policy's cap (10,000,000) is refused in the policy's own words.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app

runner = CliRunner()
PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,6214e9\n"
ITP = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\nj1,0,100,bert,4000,32,1,1000\n"
VC = "philly_vc_nodes_helios.csv"

VC_TABLES: dict[str, tuple[str | bytes, str]] = {
    "negative nodes": ("vc,node num\n6214e9,-4\n", "line 2: node num: must be a whole number of nodes from 0 to "
                                                    "1,250,000, got '-4'"),
    "NaN nodes": ("vc,node num\n6214e9,nan\n", "line 2: node num: must be a whole number of nodes"),
    "nodes past the cap": ("vc,node num\n6214e9,1250001\n", "line 2: node num: must be a whole number of nodes"),
    "empty": ("", "empty file: no header row"),
    "header only": ("vc,node num\n", "no rows after the header: the VC table needs at least one VC"),
    "other columns": ("foo,bar\n6214e9,4\n", "missing columns ['node num', 'vc'] (columns found: foo, bar)"),
    "one field more": ("vc,node num\n6214e9,4\n7f04ca,4,x\n", "line 3: 3 fields, header has 2"),
    "a VC twice": ("vc,node num\n6214e9,4\n\n6214e9,8\n", "line 4: vc: VC '6214e9' is also on line 2"),
    "empty VC": ("vc,node num\n,4\n", "line 2: vc: empty VC name"),
    "binary": (b"vc,node num\n\x92\x07\xff\n", "line 2: not UTF-8 text (byte 0x92: invalid start byte)"),
}


@pytest.mark.parametrize(("content", "message"), VC_TABLES.values(), ids=VC_TABLES.keys())
def test_a_bad_vc_table_is_named_with_its_line_not_blamed_on_the_trace(tmp_path: Path, content: str | bytes,
                                                                       message: str) -> None:
    trace = tmp_path / "ph.csv"
    trace.write_text(PHILLY, encoding="utf-8")
    table = tmp_path / VC
    if isinstance(content, bytes):
        table.write_bytes(content)
    else:
        table.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["replay", "rebalance", "--trace", str(trace), "--trace-format", "philly"])
    assert result.exit_code == 1 and result.stdout == "", result.output
    assert result.stderr.startswith(f"error: {table}: {message}") and result.stderr.count("\n") == 1, result.stderr


def test_a_missing_vc_table_says_to_give_quotas(tmp_path: Path) -> None:
    trace = tmp_path / "ph.csv"
    trace.write_text(PHILLY, encoding="utf-8")
    result = runner.invoke(app, ["replay", "rebalance", "--trace", str(trace), "--trace-format", "philly"])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {tmp_path / VC}: no such file") and "--quotas" in result.stderr


@pytest.mark.parametrize(("gpus", "code"), [("100000000000", 1), ("10000001", 1), ("10000000", 0)])
def test_quotas_past_the_policy_cap_are_refused(tmp_path: Path, gpus: str, code: int) -> None:
    trace = tmp_path / "ph.csv"
    trace.write_text(PHILLY, encoding="utf-8")
    quotas = tmp_path / "q.yaml"
    quotas.write_text(f"6214e9: {gpus}\n", encoding="utf-8")
    result = runner.invoke(app, ["replay", "rebalance", "--trace", str(trace), "--trace-format", "philly",
                                 "--quotas", str(quotas), "--format", "json"])
    assert result.exit_code == code, result.output
    if code:
        assert result.stderr == (f"error: {quotas}: 6214e9: must be a whole number of GPUs from 0 to 10,000,000, "
                                 f"got {gpus}\n")


@pytest.mark.parametrize("gpus", ["99999999999", "10000001", "0"])
def test_deadline_replay_gpus_past_the_cap_is_a_usage_error(tmp_path: Path, gpus: str) -> None:
    trace = tmp_path / "ok.csv"
    trace.write_text(ITP, encoding="utf-8")
    result = runner.invoke(app, ["replay", "deadlines", "--trace", str(trace), "--gpus", gpus])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr.strip() == (f"error: Invalid value for '--gpus': must be a whole number of GPUs from 1 to "
                                     f"10,000,000 (got '{gpus}'); see gpuaas replay deadlines --help")
