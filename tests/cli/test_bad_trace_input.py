"""Bad trace and sweep CSVs through the CLI: exit 1, one ``error:`` line naming
the file (and row/column where there is one), no traceback, nothing written to the database.

Covers ``replay reclaim`` (duty-cycle CSV), ``replay rebalance`` (Philly and ITP), ``replay
deadlines`` (ITP) and ``capacity`` (the load-test sweep): empty files, missing columns, text where
a number belongs, NaN, negative or zero durations and GPU counts, binary files, missing files, rows with
more or fewer fields than the header. Errors name the line as an editor shows it (the header is line 1,
blank lines count).
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
SWEEP_Q = "rate_rps,replicas,gpus,latency_p50_s,latency_p95_s,latency_p99_s,quality\n"

CASES: dict[str, tuple[list[str], str | bytes, str]] = {
    "reclaim empty": (["replay", "reclaim", "--utilization", "{f}"], "", "empty file: no header row"),
    "reclaim wrong columns": (["replay", "reclaim", "--utilization", "{f}"], "a,b\n1,2\n", "missing column"),
    "reclaim text value": (["replay", "reclaim", "--utilization", "{f}"], DUTY + "high,1662858720.0,x\n",
                           "line 2: value: not a number: 'high'"),
    "reclaim NaN time": (["replay", "reclaim", "--utilization", "{f}"], DUTY + "0.0,nan,x\n",
                         "line 2: timestamp_anon: not a number"),
    "reclaim negative duty": (["replay", "reclaim", "--utilization", "{f}"], DUTY + "0,1662858720.0,x\n-5,1662858780.0,x\n",
                              "line 3: value: negative duty cycle, got '-5'"),
    "reclaim duty above 100 %": (["replay", "reclaim", "--utilization", "{f}"],
                                 DUTY + "50,1662858720.0,x\n500,1662858780.0,x\n",
                                 "line 3: value: duty cycle above 100 % ('500' read as a percentage); is --unit right?"),
    "reclaim negative time": (["replay", "reclaim", "--utilization", "{f}"], DUTY + "0.0,-1662858720.0,x\n",
                              "line 2: timestamp_anon: must be a finite number from 0 to 253402300799 (Unix seconds to "
                              "the end of the year 9999), got '-1662858720.0'"),
    # A date ends with the year 9999, and the replay prints its times as dates (the refits, --reclaims).
    "reclaim time after the year 9999": (["replay", "reclaim", "--utilization", "{f}"],
                                         "timestamp,pod,value\n300000000000,a,0\n300000000060,a,0\n",
                                         "line 2: timestamp: must be a finite number from 0 to 253402300799 (Unix "
                                         "seconds to the end of the year 9999), got '300000000000'"),
    # --budget refits every --refit-hours across the span: 3e9 s at 0.01 h would never end.
    "reclaim samples over two years apart": (["replay", "reclaim", "--utilization", "{f}"],
                                             "timestamp,pod,value\n0,a,0\n3000000000,a,0\n",
                                             "line 3: timestamp: a replay holds samples up to 63,072,000 s (two "
                                             "years) after the first ('0'), got '3000000000'"),
    "reclaim binary": (["replay", "reclaim", "--utilization", "{f}"], b"\xff\xfe\x00\x01",
                       "line 1: not UTF-8 text (byte 0xff: invalid start byte)"),
    "reclaim not UTF-8 on line 3": (["replay", "reclaim", "--utilization", "{f}"],
                                    (DUTY + "0.0,1662858720.0,x\n0.0,1662858780.0,").encode() + b"\xda\n",
                                    "line 3: not UTF-8 text (byte 0xda: invalid continuation byte)"),
    "reclaim one field more": (["replay", "reclaim", "--utilization", "{f}"], DUTY + "0.0,1662858720.0,abc,extra\n",
                               "line 2: 4 fields, header has 3"),
    "reclaim one field less": (["replay", "reclaim", "--utilization", "{f}"],
                               DUTY + "0.0,1662858720.0,abc\n0.0,1662858780.0\n", "line 3: 2 fields, header has 3"),
    "reclaim a column named twice": (["replay", "reclaim", "--utilization", "{f}"], "value,value,timestamp,pod\n1,0,1,p\n",
                                     "line 1: value: a second column of this name"),
    "philly negative duration": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas",
                                  "{q}"], PHILLY + "2017-10-09 07:01:55,-66.0,1,66.0,c\n",
                                 "line 2: duration: must be a finite number above 0, at most 1e+12, got '-66.0'"),
    "philly bad timestamp": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas", "{q}"],
                             PHILLY + "yesterday,66.0,1,66.0,c\n", "line 2: timestamp: bad timestamp 'yesterday'"),
    "philly binary": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas", "{q}"],
                      b"\xff\xfe\x00\x01", "line 1: not UTF-8 text (byte 0xff: invalid start byte)"),
    "philly one field more": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas", "{q}"],
                              PHILLY + "2017-10-09 07:01:55,66.0,1,66.0,c,extra\n", "line 2: 6 fields, header has 5"),
    "philly empty cluster": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "philly", "--quotas", "{q}"],
                             PHILLY + "2017-10-09 07:01:55,66.0,1,66.0,\n", "line 2: cluster: empty VC name"),
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
                   "line 1: not UTF-8 text (byte 0xff: invalid start byte)"),
    "itp one field more": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], ITP + "j,1,1,m,5,1,1,10,extra\n",
                           "line 2: 9 fields, header has 8"),
    "itp one field less, after a blank line": (["replay", "rebalance", "--trace", "{f}", "--trace-format", "itp"],
                                               ITP + "j,1,1,m,5,1,1,10\n\nk,2,1,m,9,1,1\n",
                                               "line 4: 7 fields, header has 8"),
    "sweep text rate": (["capacity", "{f}", "--slo-seconds", "1"], SWEEP + "fast,1,1,0.2\n",
                        "row 1, column rate_rps: not a number: 'fast'"),
    "sweep missing column": (["capacity", "{f}", "--slo-seconds", "1"], "x\n1\n", "column rate_rps: missing"),
    "sweep absurd rate": (["capacity", "{f}", "--slo-seconds", "1"], SWEEP + "1e308,1,1,0.2\n",
                          "row 1, column rate_rps: must be a positive number, at most 1,000,000,000"),
    "sweep binary": (["capacity", "{f}", "--slo-seconds", "1"], b"\xff\xfe\x00\x01",
                     "line 1: not UTF-8 text (byte 0xff: invalid start byte)"),
    # One field more on every row: read as an index column, the cells would shift one column left and pass.
    "sweep one field more on every row": (["capacity", "{f}", "--slo-seconds", "1"],
                                          SWEEP_Q + "1,1,1,0.1,0.2,0.3,1.0,1\n2,2,1,1,0.4,0.5,1.0,1\n",
                                          "line 2: 8 fields, header has 7"),
    "sweep one field more on one row": (["capacity", "{f}", "--slo-seconds", "1"],
                                        SWEEP_Q + "1,1,1,0.1,0.2,0.3,1.0\n2,1,1,0.2,0.4,0.5,1.0,9\n",
                                        "line 3: 8 fields, header has 7"),
    "sweep quote left open": (["capacity", "{f}", "--slo-seconds", "1"], SWEEP + '"1,1,1,0.2\n',
                              "line 2: not a readable CSV"),
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
