"""Bad trace and sweep CSVs through the CLI: exit 1, one ``error:`` line naming
the file (and row/column where there is one), no traceback, nothing written to the database.

Covers ``replay reclaim`` (duty-cycle CSV), ``replay rebalance`` (Philly and ITP), ``replay
deadlines`` (ITP) and ``capacity`` (the load-test sweep): empty files, missing columns, text where
a number belongs, NaN, negative or zero durations and GPU counts, binary files, missing files. Trace
errors name the line as an editor shows it (the header is line 1, blank lines count).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"
ITP = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
DUTY = "value,timestamp_anon,container_ip\n"
SWEEP = "rate_rps,replicas,gpus,latency_p95_s\n"

CASES: dict[str, tuple[list[str], str | bytes, str]] = {
    "reclaim empty": (["replay", "reclaim", "--utilization", "{f}"], "", "empty file: no header row"),
    "reclaim wrong columns": (["replay", "reclaim", "--utilization", "{f}"], "a,b\n1,2\n", "missing column"),
    "reclaim text value": (["replay", "reclaim", "--utilization", "{f}"], DUTY + "high,1662858720.0,x\n",
                           "value: line 2: not a number: 'high'"),
    "reclaim NaN time": (["replay", "reclaim", "--utilization", "{f}"], DUTY + "0.0,nan,x\n",
                         "timestamp_anon: line 2: not a number"),
    "reclaim negative duty": (["replay", "reclaim", "--utilization", "{f}"], DUTY + "-5,1662858720.0,x\n",
                              "negative duty cycle"),
    "reclaim binary": (["replay", "reclaim", "--utilization", "{f}"], b"\xff\xfe\x00\x01", "not UTF-8: byte 0xff"),
    "philly negative duration": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas",
                                  "{q}"], PHILLY + "2017-10-09 07:01:55,-66.0,1,66.0,c\n",
                                 "line 2: duration: must be a finite number above 0, at most 1e+12, got '-66.0'"),
    "philly bad timestamp": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas", "{q}"],
                             PHILLY + "yesterday,66.0,1,66.0,c\n", "line 2: timestamp: bad timestamp 'yesterday'"),
    "philly binary": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas", "{q}"],
                      b"\xff\xfe\x00\x01", "cannot read trace: not UTF-8 text"),
    "itp missing columns": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "itp"], "job_id\nj\n",
                            "missing columns ['deadline', 'duration', 'num_gpu', 'submission_time']"),
    "itp negative GPUs": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], ITP + "j,1,1,m,5,1,-3,10\n",
                          "line 2: num_gpu: must be a whole number of GPUs above 0, at most 1,000,000, got '-3'"),
    "itp fractional GPUs": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], ITP + "j,1,1,m,5,1,1.5,10\n",
                            "line 2: num_gpu: must be a whole number of GPUs above 0, at most 1,000,000, got '1.5'"),
    "itp absurd time": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], ITP + "j,1e308,1,m,5,1,1,10\n",
                        "line 2: submission_time: must be a finite number from 0 to 1e+12, got '1e308'"),
    "itp infinite duration": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], ITP + "j,1,1,m,5,1,1,inf\n",
                              "line 2: duration: must be a finite number above 0, at most 1e+12, got 'inf'"),
    "itp zero GPUs": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"],
                      ITP + "j,1,1,m,5,1,1,10\nk,2,1,m,9,1,0,10\n",
                      "line 3: num_gpu: must be a whole number of GPUs above 0, at most 1,000,000, got '0'"),
    "itp zero GPUs, rebalance without --quotas": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "itp"],
                                                  ITP + "j,1,1,m,5,1,0,10\n",
                                                  "line 2: num_gpu: must be a whole number of GPUs above 0, at most "
                                                  "1,000,000, got '0'"),
    "itp NaN GPUs": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], ITP + "j,1,1,m,5,1,nan,10\n",
                     "line 2: num_gpu: must be a whole number of GPUs above 0, at most 1,000,000, got 'nan'"),
    "itp text GPUs": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], ITP + "j,1,1,m,5,1,two,10\n",
                      "line 2: num_gpu: not a number: 'two'"),
    "itp zero duration": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], ITP + "j,1,1,m,5,1,1,0\n",
                          "line 2: duration: must be a finite number above 0, at most 1e+12, got '0'"),
    "itp line after a blank line": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"],
                                    ITP + "j,1,1,m,5,1,1,10\n\nk,2,1,m,9,1,-1,10\n",
                                    "line 4: num_gpu: must be a whole number of GPUs above 0, at most 1,000,000, "
                                    "got '-1'"),
    "philly zero GPUs": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas", "{q}"],
                         PHILLY + "2017-10-09 07:01:55,66.0,0,0.0,c\n",
                         "line 2: num_gpus: must be a whole number of GPUs above 0, at most 1,000,000, got '0'"),
    "philly zero duration": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas", "{q}"],
                             PHILLY + "2017-10-09 07:01:55,0,1,0.0,c\n",
                             "line 2: duration: must be a finite number above 0, at most 1e+12, got '0'"),
    "itp no job fits the derived quota": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "itp"],
                                          ITP + "j,0,1,m,200,1,8,100\nk,864000,1,m,864200,1,8,100\n",
                                          "input.csv: no job fits its tenant's quota as derived from the trace "
                                          "(each file's mean GPU demand); give quotas with --quotas"),
    "itp header only": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], ITP,
                        "no rows after the header: a trace needs at least one job"),
    "itp binary": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], b"\xff\xfe\x00\x01",
                   "cannot read trace: not UTF-8 text"),
    "sweep text rate": (["capacity", "{f}", "--slo-seconds", "1"], SWEEP + "fast,1,1,0.2\n",
                        "row 1, column rate_rps: not a number: 'fast'"),
    "sweep missing column": (["capacity", "{f}", "--slo-seconds", "1"], "x\n1\n", "column rate_rps: missing"),
    "sweep absurd rate": (["capacity", "{f}", "--slo-seconds", "1"], SWEEP + "1e308,1,1,0.2\n",
                          "row 1, column rate_rps: must be a positive number, at most 1,000,000,000"),
    "sweep binary": (["capacity", "{f}", "--slo-seconds", "1"], b"\xff\xfe\x00\x01", "not a readable CSV"),
}


@pytest.mark.parametrize(("args", "content", "message"), CASES.values(), ids=CASES.keys())
def test_bad_csv_is_one_error_line_and_no_write(args: list[str], content: str | bytes, message: str,
                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "input.csv"
    if isinstance(content, bytes):
        trace.write_bytes(content)
    else:
        trace.write_text(content)
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text("c: 8\n")
    data = tmp_path / "data"
    monkeypatch.setenv("GPUAAS_DATA_DIR", str(data))
    argv = [a.replace("{f}", str(trace)).replace("{q}", str(quotas)) for a in args]
    done = CliRunner().invoke(app, argv)
    assert done.exit_code == 1 and isinstance(done.exception, SystemExit), (done.output[-2000:], done.exception)
    assert done.stderr.startswith("error: ") and "Traceback" not in done.output, done.output[-2000:]
    assert "input.csv" in done.stderr and message in " ".join(done.stderr.split()), done.stderr
    assert not (data / "gpuaas.db").exists()  # nothing written
    if "--quotas" not in args:  # the error is about the trace, never about a flag the user did not give
        assert "--quotas:" not in done.stderr, done.stderr
