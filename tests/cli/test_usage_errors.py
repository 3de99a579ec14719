"""A flag's value the command itself refuses, or flags that do not go together, is a usage error: exit 2 and
one line in the form Click's own refusals take (``error: Invalid value for '--x': ...; see gpuaas CMD --help``),
never exit 1, which a script reads as "it ran and failed"."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app

runner = CliRunner()

CASES = {
    "incident-from-not-a-time": (
        ["incident", "--from", "yesterday"],
        "error: Invalid value for '--from' / '--since': expected an ISO time (2026-11-29T02:00), a duration before now (2h, 90m) "
        "or 'now' (got 'yesterday'); see gpuaas incident --help"),
    "incident-to-not-a-time": (
        ["incident", "--to", "soon"],
        "error: Invalid value for '--to' / '--until': expected an ISO time (2026-11-29T02:00), a duration before now (2h, 90m) "
        "or 'now' (got 'soon'); see gpuaas incident --help"),
    "audit-since-not-a-time": (
        ["audit", "list", "--since", "2x"],
        "error: Invalid value for '--since' / '--from': expected a duration like 2h or 7d or an ISO time (UTC unless it "
        "has an offset) (got '2x'); see gpuaas audit list --help"),
    "audit-until-not-a-time": (
        ["audit", "list", "--since", "1h", "--until", "3x"],
        "error: Invalid value for '--until' / '--to': expected a duration like 2h or 7d, an ISO time (UTC unless it has "
        "an offset) or now (got '3x'); see gpuaas audit list --help"),
    "audit-since-nan": (  # a text flag: its own message says what it takes, not "'nan' is not a number"
        ["audit", "list", "--since", "nan"],
        "error: Invalid value for '--since' / '--from': expected a duration like 2h or 7d or an ISO time (UTC unless it "
        "has an offset) (got 'nan'); see gpuaas audit list --help"),
    "required-choice-missing": (  # Click lists the choices on tab-indented lines: one line, single spaces
        ["replay", "rebalance", "--trace", "t.csv"],
        "error: Missing option '--trace-format'. Choose from: philly, itp; see gpuaas replay rebalance --help"),
    "format-not-a-choice": (  # pydantic's "Value error, " says nothing to the reader
        ["collect", "--format", "xml"],
        "error: Invalid value for '--format': 'xml' is not one of 'table', 'json'; see gpuaas collect --help"),
    "unit-not-a-choice": (
        ["replay", "reclaim", "--utilization", "u.csv", "--unit", "furlong"],
        "error: Invalid value for '--unit': 'furlong' is not one of 'auto', 'percent', 'fraction'; "
        "see gpuaas replay reclaim --help"),
    "loadtest-url-not-a-url": (
        ["loadtest", "--url", "http://[::1", "--model", "m", "--rates", "1", "--slo-seconds", "1", "--out", "o"],
        "error: Invalid value for '--url': not a URL: Invalid IPv6 URL (got 'http://[::1'); see gpuaas loadtest --help"),
    "loadtest-url-bad-port": (
        ["loadtest", "--url", "http://127.0.0.1:99999/v1", "--model", "m", "--rates", "1", "--slo-seconds", "1",
         "--out", "o"],
        "error: Invalid value for '--url': 'http://127.0.0.1:99999/v1': the port '99999' is not a number from 1 to "
        "65535; see gpuaas loadtest --help"),
    "cluster-history-not-a-duration": (
        ["cluster", "up", "--history", "xx"],
        "error: Invalid value for '--history': not a duration: 'xx' (use seconds or e.g. '90s', '30m', '6h', '2d'); "
        "see gpuaas cluster up --help"),
    "cluster-rbac-without-a-role": (
        ["cluster", "up", "--rbac", "rbac.yaml"],
        "error: --rbac needs at least one --role (a ClusterRole name in the manifest); see gpuaas cluster up --help"),
    "demo-history-not-a-duration": (
        ["demo", "--history", "xx"],
        "error: Invalid value for '--history': not a duration: 'xx' (use seconds or e.g. '90s', '30m', '6h', '2d'); "
        "see gpuaas demo --help"),
    "demo-history-zero": (
        ["demo", "--history", "0s"],
        "error: Invalid value for '--history': must be longer than 0s (got '0s'); see gpuaas demo --help"),
    **{f"replay-reclaim-{flag}-without-{needs}": (
        ["replay", "reclaim", "--utilization", "u.csv", f"--{flag}", value],
        f"error: --{flag} applies with --{needs} only: give it with --{needs}, or leave it out; "
        "see gpuaas replay reclaim --help")
       for flag, value, needs in (("detect-minutes", "5", "frontier"), ("plot", "f.png", "frontier"),
                                  ("calibrate", "0.3", "frontier"), ("refit-hours", "6", "budget"),
                                  ("history-hours", "12", "budget"), ("chunk-hours", "2", "from-prometheus"))},
    **{f"replay-reclaim-{flag}-with-frontier": (
        ["replay", "reclaim", "--utilization", "u.csv", "--frontier", f"--{flag}", *value],
        f"error: --{flag} does not apply with --frontier (it replays fixed windows, adaptive budgets and the "
        "clairvoyant limit of its own): give one or the other; see gpuaas replay reclaim --help")
       for flag, value in (("budget", ["2"]), ("adaptive", []), ("qps", ["q.csv"]), ("reclaims", []))},
    "replay-reclaim-reclaims-in-a-table": (
        ["replay", "reclaim", "--utilization", "u.csv", "--reclaims"],
        "error: --reclaims lists the reclaims in the JSON only: give it with --format json, or leave it out; "
        "see gpuaas replay reclaim --help"),
    "plan-deadlines-neither": (
        ["plan", "deadlines"], "error: give a FILE or --from-cluster; see gpuaas plan deadlines --help"),
    "plan-deadlines-both": (
        ["plan", "deadlines", "problem.yaml", "--from-cluster"],
        "error: give a FILE or --from-cluster, not both; see gpuaas plan deadlines --help"),
    # a name the API server cannot hold matches nothing: refused, not an empty answer that reads as "all quiet"
    "incident-namespace-empty": (
        ["incident", "--namespace", ""],
        "error: Invalid value for '--namespace': '' is not a Kubernetes namespace: lowercase letters, digits and '-', "
        "at most 63, starting and ending with a letter or digit; see gpuaas incident --help"),
    "incident-queue-underscore": (
        ["incident", "--queue", "Q_1"],
        "error: Invalid value for '--queue': 'Q_1' is not a Kubernetes object name: lowercase letters, digits, '-' "
        "and '.', at most 253, starting and ending with a letter or digit; see gpuaas incident --help"),
    "replay-namespace-uppercase": (
        ["replay", "reclaim", "--from-prometheus", "--namespace", "team-a", "--namespace", "Bad_NS"],
        "error: Invalid value for '--namespace': 'Bad_NS' is not a Kubernetes namespace: lowercase letters, digits "
        "and '-', at most 63, starting and ending with a letter or digit; see gpuaas replay reclaim --help"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_usage_error_exits_2_with_one_line(name: str) -> None:
    args, line = CASES[name]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # nothing started: no progress, no tables
    assert result.stderr.strip().splitlines() == [line]


@pytest.mark.parametrize(("args", "output", "given"), [
    (["config", "tenant-rules", "{in}", "-o", "{out}"], "--output", "FILE"),
    (["replay", "reclaim", "--utilization", "{in}", "--frontier", "--plot", "{out}"], "--plot", "--utilization"),
    (["replay", "reclaim", "--utilization", "part1.csv", "--utilization", "{in}", "--frontier", "--plot", "{out}"],
     "--plot", "--utilization"),
], ids=["tenant-rules", "reclaim-plot-utilization", "reclaim-plot-second-part"])
@pytest.mark.parametrize("spelled", ["same", "through-a-link"])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  args: list[str], output: str, given: str,
                                                                  spelled: str) -> None:
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "input.txt"
    source.write_text("kept\n")
    (tmp_path / "link.txt").symlink_to(source)
    out = "input.txt" if spelled == "same" else "link.txt"
    result = runner.invoke(app, [a.replace("{in}", str(source)).replace("{out}", out) for a in args])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr.strip().splitlines() == [
        f"error: {output} and {given} name the same file ({out}): writing it would overwrite the input; give "
        f"{output} another path; see gpuaas {' '.join(args[:2])} --help"]
    assert source.read_text() == "kept\n"


@pytest.mark.parametrize(("args", "flag"), [
    (["config", "tenant-rules", "{in}", "-o", "{out}"], "'--output' / '-o'"),
    (["replay", "reclaim", "--utilization", "{in}", "--frontier", "--plot", "{out}"], "'--plot'"),
], ids=["tenant-rules", "reclaim-plot"])
@pytest.mark.parametrize(("out", "why"), [
    ("folder", "is a directory; give the path of a file to write"),
    ("missing/out.txt", "folder missing does not exist; make it first, or give a path in one that does"),
    ("input.txt/out.txt", "input.txt is not a directory"),
], ids=["a-directory", "in-a-missing-folder", "under-a-file"])
def test_an_output_that_cannot_be_written_is_refused_before_anything_is_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], flag: str, out: str, why: str) -> None:
    """The same check as ``cluster up``'s env file and kubeconfig (one of ``_common``): said at once, as the flag's
    usage error, not after the work as the write's failure (exit 1) or a traceback."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "input.txt"
    source.write_text("kept\n")
    (tmp_path / "folder").mkdir()
    result = runner.invoke(app, [a.replace("{in}", str(source)).replace("{out}", out) for a in args])
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr.strip().splitlines() == [
        f"error: Invalid value for {flag}: {why} (got '{out}'); see gpuaas {' '.join(args[:2])} --help"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "input.txt"] and not any((tmp_path / "folder").iterdir())


def test_an_output_that_exists_and_may_be_written_is_not_probed_in_its_folder(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """``-o /dev/null``, or a file that exists and may be written, is accepted where its folder is read-only: the
    write makes no file in the folder, so the check does not try one there. Every folder is made unwritable here
    (the tests run as root, who may write anywhere)."""
    import tempfile

    def read_only(*args: object, **kwargs: object) -> object:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", read_only)
    policy = Path(__file__).resolve().parents[2] / "examples" / "policy.yaml"
    (tmp_path / "rules.yaml").write_text("old\n")
    for out in ("/dev/null", str(tmp_path / "rules.yaml")):
        result = runner.invoke(app, ["config", "tenant-rules", str(policy), "-o", out])
        assert result.exit_code == 0, result.output
        assert "Traceback" not in result.output
    assert (tmp_path / "rules.yaml").read_text() != "old\n"
    new = tmp_path / "new.yaml"  # a file the write would make: still refused at once
    result = runner.invoke(app, ["config", "tenant-rules", str(policy), "-o", str(new)])
    assert result.exit_code == 2 and not new.exists(), result.output
    assert result.stderr.strip().splitlines() == [
        f"error: Invalid value for '--output' / '-o': cannot write in {tmp_path}: Permission denied (got '{new}'); "
        "see gpuaas config tenant-rules --help"]


def test_an_output_whose_folder_cannot_be_looked_into_is_the_flags_usage_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Path.is_dir`` raises ``PermissionError`` under a folder that may not be searched (not as root: here it is
    made to); that was a generic error (exit 1), not the flag's usage error (exit 2)."""
    from typer._click.exceptions import UsageError

    from gpuaas.cli._common import check_outputs

    def denied(self: Path, *args: object, **kwargs: object) -> bool:
        raise PermissionError(13, "Permission denied", str(self))

    out = tmp_path / "locked" / "rules.yaml"
    for method in ("is_dir", "exists", "stat"):
        with monkeypatch.context() as patch:
            patch.setattr(Path, method, denied)
            with pytest.raises(UsageError) as caught:
                check_outputs({"--output": out}, {})
        assert caught.value.exit_code == 2
        assert caught.value.format_message() == (f"Invalid value for '--output': cannot look up {out}: "
                                                 "Permission denied"), method


_LOADTEST = ["loadtest", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--rates", "1", "--slo-seconds", "1",
             "--out", "{out}"]


@pytest.mark.parametrize(("flag", "value", "why"), [
    ("--prompt-tokens", "99999999999", "Input should be less than or equal to 1048576"),
    ("--output-tokens", "1048577", "Input should be less than or equal to 1048576"),
    ("--replicas", "10000001", "Input should be less than or equal to 10000000"),
    ("--gpus", "99999999999", "Input should be less than or equal to 10000000"),
    ("--slo-seconds", "1e308", "must be at most a day (86400)"),
    ("--max-lateness", "inf", "must be within (0, 3600]"),
    ("--rates", "5e-324", "item 1 must be at least one request a day (1.16e-05)"),
])
def test_a_loadtest_value_past_its_bound_is_a_usage_error_before_anything_starts(tmp_path: Path, flag: str,
                                                                                 value: str, why: str) -> None:
    """A prompt of 99,999,999,999 words was built before the first request (and ran out of memory); a count or an
    SLO the capacity policy refuses failed only once the first step's load was sent."""
    out = tmp_path / "out"
    result = runner.invoke(app, [*(a.replace("{out}", str(out)) for a in _LOADTEST), flag, value])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"error: Invalid value for '{flag}': {why} (got '{value}'); see gpuaas loadtest --help"]
    assert not out.exists()  # nothing made, nothing sent


@pytest.mark.parametrize(("args", "what"), [
    (["config", "tenant-rules", str(Path(__file__).parents[2] / "examples" / "policy.yaml"), "-o", "/dev/full"],
     "cannot write the rules"),
    (["replay", "reclaim", "--utilization", "{good}", "--frontier", "--plot", "/dev/full"], "cannot write the plot"),
], ids=["tenant-rules", "reclaim-plot"])
def test_an_output_the_write_itself_fails_on_is_named(tmp_path: Path, args: list[str], what: str) -> None:
    """A full disk is known only at the write (``/dev/full`` passes every check before it): the one line names the
    file, not only the system's "No space left on device"."""
    good = tmp_path / "u.csv"
    good.write_text("timestamp,pod,value\n" + "".join(f"{60 * i},p,{0 if i > 3 else 50}\n" for i in range(240)))
    result = runner.invoke(app, [a.format(good=good) for a in args])
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == f"error: /dev/full: {what} (No space left on device)"


@pytest.mark.parametrize("flag", ["--env-file", "--kubeconfig"])
def test_cluster_up_refuses_to_rename_a_file_over_a_device_or_pipe(tmp_path: Path, flag: str) -> None:
    """``cluster up`` writes its env file and kubeconfig beside and renames them into place: over ``/dev/null``, run
    as root, that replaced the system's ``/dev/null`` with a file. A pipe stands in for the device here."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    result = runner.invoke(app, ["cluster", "up", flag, str(pipe), "--history", "10m"],
                           env={"GPUAAS_DATA_DIR": str(tmp_path / "data")})
    assert result.exit_code == 2, result.output
    assert result.stderr == (f"error: Invalid value for '{flag}': {pipe} is a device or a pipe, which the file written "
                             f"beside and renamed into place would replace; give the path of a file (got '{pipe}'); "
                             "see gpuaas cluster up --help\n")
    assert stat.S_ISFIFO(pipe.stat().st_mode) and not (tmp_path / "data").exists()
