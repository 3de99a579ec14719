"""Every command that reads a YAML file refuses a bad one the same way: the installed CLI as a real process.

One ``error:`` line naming the file, and the line, column and field where YAML gives them, exit 1, no
traceback, and nothing written (``cluster up`` included: no data directory, no env file). The cases are
what PyYAML parses but Python cannot build (a day February lacks, an offset past a day), bytes YAML does
not allow, nesting past the recursion limit, several problems at once, a merge of several mappings (which
readers resolve differently) in each kind of file, and the RBAC manifest of ``cluster up --rbac``, read through the
same reader as every other file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli_errors import Case, check_case

FREEZE = "freezes:\n  - name: x\n    start: {start}\n    end: {end}\n"
ROLE = "kind: ClusterRole\nmetadata: {name: r}\nrules:\n  - apiGroups: ['']\n    resources: [pods]\n"
JOBS = "capacity: {{a100: 4}}\njobs:\n  - {{name: a, gpus: 2, duration: 60, deadline: {deadline}}}\n"


def _files(tmp: Path) -> Path:
    """The inputs; GPUAAS_DATA_DIR points under ``tmp/data``, which must stay absent."""
    (tmp / "feb30.yaml").write_text(FREEZE.format(start="2026-02-30T00:00:00Z", end="2027-01-04T00:00:00Z"))
    (tmp / "no-zones.yaml").write_text(FREEZE.format(start="2026-12-20", end="2027-01-04"))
    (tmp / "offset.yaml").write_text("name: s\nstart: 2026-12-20T00:00:00+25:00\n")
    (tmp / "nul.yaml").write_bytes(b"limits: {}\x00\n")
    (tmp / "deep.yaml").write_text("x: " + "[" * 20000 + "]" * 20000 + "\n")
    (tmp / "jobs-feb30.yaml").write_text(JOBS.format(deadline="2026-02-30"))
    (tmp / "jobs-at.yaml").write_text(JOBS.format(deadline="2026-12-06T10:00:00Z"))
    (tmp / "philly.csv").write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                                    "2017-10-09 07:01:55,66.0,1,66.0,6214e9\n")
    (tmp / "rbac-twice.yaml").write_text(ROLE + "    verbs: [get]\n    verbs: [get, delete]\n")
    (tmp / "rbac-letters.yaml").write_text(ROLE + "    verbs: get\n")
    (tmp / "rbac-unclosed.yaml").write_text("reclaim: [unclosed\n")
    (tmp / "rbac-latin1.yaml").write_bytes(b"kind: ClusterRole\nmetadata: {name: r\xc5}\n")
    (tmp / "merge.yaml").write_text("reclaim:\n  <<: [{mode: dry-run}, {mode: apply, max_actions_per_run: 5}]\n")
    (tmp / "merge-top.yaml").write_text("name: s\n<<: [{a: 1}, {a: 2}]\n")
    (tmp / "jobs-merge.yaml").write_text("capacity: {a100: 4}\njobs:\n  - <<: [{name: a, gpus: 2}, {name: b}]\n"
                                         "    duration: 60\n    deadline: 120\n")
    (tmp / "queues-merge.yaml").write_text("queues:\n  - <<: [{name: a}, {name: b}]\n")
    (tmp / "rbac-merge.yaml").write_text(ROLE + "    <<: [{verbs: [get]}, {verbs: [get, delete]}]\n")
    return tmp


def _cluster_up(*args: str) -> list[str]:
    return ["cluster", "up", *args, "--env-file", "{tmp}/cluster.env"]


FEB30 = "{tmp}/feb30.yaml: line 3, column 12: freezes[0].start: 2026-02-30T00:00:00Z is not a valid timestamp: "
MERGE = ": a merge of several mappings (<<: [a, b]) is refused: YAML's merge rules keep the first one's value"
CASES = {
    "config check": Case(["config", "check", "{tmp}/feb30.yaml"], 1, [FEB30 + "day is out of range for month"]),
    "policy of the environment": Case(["reclaim"], 1, [FEB30], env={"GPUAAS_POLICY_FILE": "{tmp}/feb30.yaml"}),
    "replay deadlines --policy": Case(["replay", "deadlines", "--trace", "{tmp}/nope.csv", "--gpus", "8", "--policy",
                                       "{tmp}/feb30.yaml"], 1, [FEB30]),
    "config tenant-rules, two problems": Case(["config", "tenant-rules", "{tmp}/no-zones.yaml"], 1,
                                              ["{tmp}/no-zones.yaml: freezes[0].start: Input should have timezone "
                                               "info (and 1 more)"]),
    "plan quotas, a NUL byte": Case(["plan", "quotas", "{tmp}/nul.yaml"], 1,
                                    ["{tmp}/nul.yaml: line 1, column 11: invalid YAML: character 0x00 is not allowed"]),
    "plan deadlines, February 30": Case(["plan", "deadlines", "{tmp}/jobs-feb30.yaml"], 1,
                                        ["{tmp}/jobs-feb30.yaml: line 3, column 48: jobs[0].deadline: 2026-02-30 is "
                                         "not a valid timestamp: day is out of range for month"]),
    "plan deadlines, a timestamp": Case(["plan", "deadlines", "{tmp}/jobs-at.yaml"], 1,
                                        ["{tmp}/jobs-at.yaml: jobs[0] (a).deadline: must be a number of minutes from "
                                         "now, at most 100,000,000 either way, got 2026-12-06T10:00:00+00:00"]),
    "replay rebalance --quotas, too deep": Case(["replay", "rebalance", "--trace", "{tmp}/philly.csv",
                                                 "--trace-format", "philly", "--quotas", "{tmp}/deep.yaml"], 1,
                                                ["{tmp}/deep.yaml: line 1, column ", "invalid YAML: nested too deeply"]),
    "cluster up --scenario": Case(_cluster_up("--scenario", "{tmp}/offset.yaml"), 1,
                                  ["{tmp}/offset.yaml: line 2, column 8: start: 2026-12-20T00:00:00+25:00 is not a "
                                   "valid timestamp: its UTC offset must be less than 24 hours"]),
    "cluster up --rbac, a key twice": Case(_cluster_up("--rbac", "{tmp}/rbac-twice.yaml", "--role", "r"), 1,
                                           ["{tmp}/rbac-twice.yaml: line 7: 'verbs' is given twice"]),
    "cluster up --rbac, verbs a string": Case(_cluster_up("--rbac", "{tmp}/rbac-letters.yaml", "--role", "r"), 1,
                                              ["{tmp}/rbac-letters.yaml: ClusterRole r: rules[0].verbs: must be a "
                                               "list of strings, got 'get'"]),
    "cluster up --rbac, unclosed": Case(_cluster_up("--rbac", "{tmp}/rbac-unclosed.yaml", "--role", "r"), 1,
                                        ["{tmp}/rbac-unclosed.yaml: line 2, column 1: invalid YAML: expected ',' or "
                                         "']', but got '<stream end>'"]),
    "cluster up --rbac, not UTF-8": Case(_cluster_up("--rbac", "{tmp}/rbac-latin1.yaml", "--role", "r"), 1,
                                         ["{tmp}/rbac-latin1.yaml: RBAC manifest is not UTF-8: line 2, column 19: "
                                          "byte 0xc5"]),
    # A merge of several mappings: PyYAML keeps the last one's value of a key they share, YAML's rules the first.
    "config check, a merge of several mappings": Case(["config", "check", "{tmp}/merge.yaml"], 1,
                                                      ["{tmp}/merge.yaml: line 2, column 3: reclaim.<<" + MERGE]),
    "policy of the environment, a merge": Case(["reclaim"], 1, ["{tmp}/merge.yaml: line 2, column 3: reclaim.<<" + MERGE],
                                               env={"GPUAAS_POLICY_FILE": "{tmp}/merge.yaml"}),
    "plan deadlines, a merge": Case(["plan", "deadlines", "{tmp}/jobs-merge.yaml"], 1,
                                    ["{tmp}/jobs-merge.yaml: line 3, column 5: jobs[0].<<" + MERGE]),
    "plan quotas, a merge": Case(["plan", "quotas", "{tmp}/queues-merge.yaml"], 1,
                                 ["{tmp}/queues-merge.yaml: line 2, column 5: queues[0].<<" + MERGE]),
    "replay rebalance --quotas, a merge": Case(["replay", "rebalance", "--trace", "{tmp}/philly.csv", "--trace-format",
                                                "philly", "--quotas", "{tmp}/merge-top.yaml"], 1,
                                               ["{tmp}/merge-top.yaml: line 2, column 1: <<" + MERGE]),
    "cluster up --scenario, a merge": Case(_cluster_up("--scenario", "{tmp}/merge-top.yaml"), 1,
                                           ["{tmp}/merge-top.yaml: line 2, column 1: <<" + MERGE]),
    "cluster up --rbac, a merge": Case(_cluster_up("--rbac", "{tmp}/rbac-merge.yaml", "--role", "r"), 1,
                                       ["{tmp}/rbac-merge.yaml: line 6, column 5: rules[0].<<" + MERGE]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_yaml_file_is_one_line_naming_where_and_writes_nothing(name: str, tmp_path: Path) -> None:
    check_case(CASES[name], _files(tmp_path))
