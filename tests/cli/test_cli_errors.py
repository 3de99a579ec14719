"""No traceback for any input on any command: the installed CLI as a real process, fed a corpus of bad input.

Each case checks the exit code (1 failed, 2 usage), that stderr is one line naming what was
wrong, that no "Traceback" appears anywhere, and that nothing was written (no data directory,
no database, no env file, no pid file). The last tests pin the top-level handler itself, for
errors no command maps on its own, a data-directory variable set to nothing, and the progress line
of a step that ends in an error.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuaas.cli._common import handle_errors
from gpuaas.cli._progress import progress
from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    args: list[str]
    code: int
    says: list[str]
    """Substrings the one stderr line must contain (``{tmp}`` is the case's temp dir)."""
    env: dict[str, str] | None = None


def _files(tmp: Path) -> Path:
    """The corpus's inputs; GPUAAS_DATA_DIR points under ``tmp/data``, which must stay absent."""
    (tmp / "a-dir").mkdir()
    (tmp / "empty.csv").write_text("")
    (tmp / "wrong.csv").write_text("when,gpu,busy\n1,a,3\n")
    (tmp / "good.csv").write_text("timestamp,pod,value\n0,p,1\n60,p,2\n")
    (tmp / "latin1.yaml").write_bytes(b"reclaim:\n  mode: dry-run  # r\xe9glage\n")
    (tmp / "latin1.csv").write_bytes(b"timestamp,pod,value\n0,caf\xe9,1\n")
    (tmp / "a-file").write_text("not a directory\n")
    (tmp / "list.yaml").write_text("- a\n- b\n")
    (tmp / "twice.yaml").write_text("reclaim:\n  mode: dry-run\n  mode: apply\n")
    for name, cluster in (("bad-server.yaml", '{server: "http://[::1"}'),
                          ("bad-ca-data.yaml", '{server: "https://127.0.0.1:9", certificate-authority-data: "!!!x"}')):
        (tmp / name).write_text(f"apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters: [{{name: c, cluster: "
                                f"{cluster}}}]\nusers: [{{name: u, user: {{token: t}}}}]\n"
                                "contexts: [{name: x, context: {cluster: c, user: u}}]\n")
    return tmp


CASES = {
    "since-overflow": Case(["audit", "list", "--since", "99999999d"], 2, ["--since", "99999999d", "out of range"]),
    "data-dir-unwritable": Case(["db", "upgrade"], 1, ["{tmp}/a-file/data", "Not a directory"],
                                env={"GPUAAS_DATA_DIR": "{tmp}/a-file/data"}),
    "policy-missing": Case(["config", "check", "{tmp}/nope.yaml"], 1, ["{tmp}/nope.yaml", "No such file"]),
    "policy-is-a-directory": Case(["config", "check", "{tmp}/a-dir"], 1, ["{tmp}/a-dir", "directory"]),
    "policy-not-utf8": Case(["config", "check", "{tmp}/latin1.yaml"], 1,
                            ["{tmp}/latin1.yaml", "not UTF-8", "line 2"]),
    "policy-env-not-utf8": Case(["audit", "list"], 1, ["{tmp}/latin1.yaml", "not UTF-8"],
                                env={"GPUAAS_POLICY_FILE": "{tmp}/latin1.yaml"}),
    "csv-missing": Case(["replay", "reclaim", "--utilization", "{tmp}/nope.csv"], 1, ["{tmp}/nope.csv", "no such"]),
    "csv-is-a-directory": Case(["replay", "reclaim", "--utilization", "{tmp}/a-dir"], 1,
                               ["{tmp}/a-dir", "directory"]),
    "csv-empty": Case(["replay", "reclaim", "--utilization", "{tmp}/empty.csv"], 1, ["{tmp}/empty.csv", "no header row"]),
    "csv-wrong-columns": Case(["replay", "reclaim", "--utilization", "{tmp}/wrong.csv"], 1,
                              ["{tmp}/wrong.csv", "timestamp", "columns found: when, gpu, busy"]),
    "qps-wrong-columns": Case(["replay", "reclaim", "--utilization", "{tmp}/good.csv", "--qps", "{tmp}/wrong.csv"],
                              1, ["{tmp}/wrong.csv", "columns found"]),
    "policy-name-with-brackets": Case(["config", "check", "{tmp}/[/x]"], 1, ["{tmp}/[/x]", "No such file"]),
    "policy-name-with-an-escape": Case(["config", "check", "{tmp}/\x1b[2Jx.yaml"], 1,
                                       ["{tmp}/\\x1b[2Jx.yaml", "No such file"]),
    "policy-key-twice": Case(["config", "check", "{tmp}/twice.yaml"], 1,
                             ["{tmp}/twice.yaml", "line 3: 'mode' is given twice"]),
    "kubeconfig-not-one": Case(["replay", "reclaim", "--from-prometheus", "--since", "1h"], 1,
                               ["{tmp}/list.yaml", "not a kubeconfig"],
                               env={"GPUAAS_KUBECONFIG": "{tmp}/list.yaml", "GPUAAS_PROMETHEUS_URL": "http://127.0.0.1:9"}),
    # A kubeconfig of the right shape with one bad value: the value is named, not the file called no kubeconfig.
    "kubeconfig-bad-server": Case(["replay", "reclaim", "--from-prometheus", "--since", "1h"], 1,
                                  ["{tmp}/bad-server.yaml", "the server of cluster 'c': not a URL: Invalid IPv6 URL"],
                                  env={"GPUAAS_KUBECONFIG": "{tmp}/bad-server.yaml",
                                       "GPUAAS_PROMETHEUS_URL": "http://127.0.0.1:9"}),
    "kubeconfig-bad-ca-data": Case(["replay", "reclaim", "--from-prometheus", "--since", "1h"], 1,
                                   ["{tmp}/bad-ca-data.yaml", "the certificate-authority-data of cluster 'c': not base64"],
                                   env={"GPUAAS_KUBECONFIG": "{tmp}/bad-ca-data.yaml",
                                        "GPUAAS_PROMETHEUS_URL": "http://127.0.0.1:9"}),
    "kubeconfig-missing": Case(["replay", "reclaim", "--from-prometheus", "--since", "1h"], 1,
                               ["{tmp}/nope.yaml", "no such file", "GPUAAS_KUBECONFIG"],
                               env={"GPUAAS_KUBECONFIG": "{tmp}/nope.yaml", "GPUAAS_PROMETHEUS_URL": "http://127.0.0.1:9"}),
    "kubeconfig-default-missing": Case(["replay", "reclaim", "--from-prometheus", "--since", "1h"], 1,
                                       ["{tmp}/nope-env.yaml", "no such file"],
                                       env={"KUBECONFIG": "{tmp}/nope-env.yaml",
                                            "GPUAAS_PROMETHEUS_URL": "http://127.0.0.1:9"}),
    "csv-not-utf8": Case(["replay", "reclaim", "--utilization", "{tmp}/latin1.csv"], 1,
                         ["{tmp}/latin1.csv", "not UTF-8"]),
    # Usage errors (exit 2): one line with the flag, what was given and where help is, not Typer's panel.
    "flag-not-a-number": Case(["replay", "reclaim", "--budget", "nan"], 2,
                              ["'--budget'", "'nan' is not a number", "see gpuaas replay reclaim --help"]),
    "flag-out-of-range": Case(["replay", "reclaim", "--budget=5000"], 2,
                              ["'--budget'", "less than or equal to 1440", "(got '5000')"]),
    "flag-not-an-integer": Case(["audit", "list", "--limit", "zero"], 2,
                                ["'--limit'", "(got 'zero')", "see gpuaas audit list --help"]),
    "port-out-of-range": Case(["cluster", "up", "--port", "99999", "--env-file", "{tmp}/cluster.env"], 2,
                              ["'--port'", "less than or equal to 65535", "(got '99999')", "see gpuaas cluster up --help"]),
    "flag-unknown": Case(["reclaim", "--bogus"], 2, ["No such option: --bogus", "see gpuaas reclaim --help"]),
    "command-unknown": Case(["bogus"], 2, ["No such command 'bogus'", "see gpuaas --help"]),
}


def _run(args: list[str], tmp: Path, extra: dict[str, str] | None = None, *, memory: int | None = None,
         timeout: float = 120, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``memory``: the bytes of address space the command may take (a command that read forever fails there)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), "HOME": str(tmp),
           "GPUAAS_DATA_DIR": str(tmp / "data"), "GPUAAS_NVML": "off", "PREFECT_HOME": str(tmp / "prefect"),
           "COLUMNS": "80"}
    env.update({k: v.format(tmp=tmp) for k, v in (extra or {}).items()})

    def cap() -> None:
        assert memory is not None
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", *[a.format(tmp=tmp) for a in args]],
                          env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp, input=stdin,
                          preexec_fn=None if memory is None else cap)


def _check(proc: subprocess.CompletedProcess[str], code: int, says: list[str]) -> str:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    line = proc.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line, proc.stderr
    for text in says:
        assert text in line, (text, line)
    return line


def _words(text: str) -> str:
    """``text`` with its line breaks as spaces: the output wraps at 80 columns wherever a temporary path ends."""
    return " ".join(text.split())


def check_case(case: Case, tmp: Path) -> None:
    """Run ``case`` in ``tmp``, its input files written there: its one line, its exit code, nothing written."""
    before = sorted(p.relative_to(tmp) for p in tmp.rglob("*"))
    proc = _run(case.args, tmp, case.env)
    _check(proc, case.code, [s.format(tmp=tmp) for s in case.says])
    assert sorted(p.relative_to(tmp) for p in tmp.rglob("*")) == before, "the command wrote something"


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_writes_nothing(name: str, tmp_path: Path) -> None:
    check_case(CASES[name], _files(tmp_path))


MEMORY_FOR_A_SMALL_INPUT = 600 * 2**20


ENDLESS = {
    "policy": (["config", "check", "{f}"], "policy file is"),
    "quota problem": (["plan", "quotas", "{f}"], "quota problem is"),
    "deadline problem": (["plan", "deadlines", "{f}"], "deadline problem is"),
    "sweep": (["capacity", "{f}", "--slo-seconds", "1"], "is"),
    "trace": (["replay", "deadlines", "--trace", "{f}", "--gpus", "8"], "is"),
    "utilization": (["replay", "reclaim", "--utilization", "{f}"], "is"),
}


@pytest.mark.parametrize("kind", list(ENDLESS))
def test_a_file_that_never_ends_is_refused_unread_naming_it(kind: str, tmp_path: Path) -> None:
    """``/dev/zero`` as an input never ends, and read whole would end in ``MemoryError``: each shared reader (YAML,
    CSV) refuses a device before reading it. Run with 1.5 GiB of address space, so that a reader that reads it anyway fails fast
    rather than taking the machine's memory."""
    args, subject = ENDLESS[kind]
    tmp = _files(tmp_path)
    before = sorted(p.relative_to(tmp) for p in tmp.rglob("*"))
    proc = _run([a.replace("{f}", "/dev/zero") for a in args], tmp, memory=3 * 2**29, timeout=60)
    line = _check(proc, 1, ["/dev/zero"])
    assert line == f"error: /dev/zero: {subject} a character device, not a regular file: give the file itself"
    assert sorted(p.relative_to(tmp) for p in tmp.rglob("*")) == before, "the command wrote something"


def test_a_pipe_is_read_to_its_end_within_the_limit_and_never_hangs(tmp_path: Path) -> None:
    """A planner problem piped in (``/dev/stdin``, ``<(…)``) is read; one that sends more than such a file may hold
    is refused in one line; a named pipe nobody writes reads as an empty file (refused: a problem holds jobs)
    instead of hanging."""
    tmp = _files(tmp_path)
    problem = "capacity: {a100: 4}\njobs:\n  - {name: a, gpus: 2, duration: 60, deadline: 120}\n"
    piped = _run(["plan", "deadlines", "/dev/stdin"], tmp, stdin=problem, timeout=60)
    assert piped.returncode == 0 and "The one deadline holds" in _words(piped.stdout), piped.stderr
    endless = _run(["plan", "deadlines", "/dev/stdin"], tmp, stdin="#" * (64 * 2**20 + 1), memory=3 * 2**29,
                   timeout=60)
    line = _check(endless, 1, ["/dev/stdin"])
    assert line.endswith("deadline problem is larger than the 64 MiB an input file of this kind may hold: is it the "
                         "right file?")
    os.mkfifo(tmp / "fifo")
    unwritten = _run(["plan", "deadlines", str(tmp / "fifo")], tmp, timeout=60)
    assert _check(unwritten, 1, []) == f"error: {tmp / 'fifo'}: must be a mapping with 'capacity' and 'jobs'"


@pytest.mark.parametrize("how", ["config check", "GPUAAS_POLICY_FILE"])
def test_a_policy_that_is_not_a_regular_file_is_refused_not_read_as_empty(how: str, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A named pipe whose writer has not started reads as an empty file: as a policy, the defaults, without the
    file's freezes and caps, and ``config check`` said ok. A policy is read from a regular file only, or a link to
    one (a ConfigMap's mounted key): a pipe, named or ``/dev/stdin``, is refused in one line naming it, exit 1, by
    the check and by every command that loads the settings, before any run."""
    tmp = _files(tmp_path)
    os.mkfifo(tmp / "policy.fifo")
    (tmp / "linked.yaml").symlink_to(tmp / "policy.fifo")
    (tmp / "policy.yaml").write_text("tenants:\n  - name: a\n")
    (tmp / "mounted.yaml").symlink_to(tmp / "policy.yaml")

    def run(path: str, *command: str) -> subprocess.CompletedProcess[str]:
        if how == "config check":
            return _run(["config", "check", path], tmp, stdin="tenants: []\n", timeout=60)
        return _run(list(command), tmp, {"GPUAAS_POLICY_FILE": path}, stdin="tenants: []\n", timeout=60)

    for path in (str(tmp / "policy.fifo"), str(tmp / "linked.yaml"), "/dev/stdin"):
        line = _check(run(path, "reclaim"), 1, [])
        assert line == f"error: {path}: policy file is a pipe, not a regular file: give the file itself", line
    assert not (tmp / "data").exists()
    if how == "config check":
        mounted = run(str(tmp / "mounted.yaml"))
        assert mounted.returncode == 0 and "1 tenants" in _words(mounted.stdout), mounted.stderr
    else:
        monkeypatch.setenv("GPUAAS_POLICY_FILE", str(tmp / "mounted.yaml"))
        assert [t.name for t in load_settings().policy.tenants] == ["a"]


SMALL = {
    "sweep": (["capacity", "{tmp}/sweep.csv", "--slo-seconds", "1"], "1 rps sustained"),
    "policy": (["config", "check", "{tmp}/policy.yaml"], "1 tenants"),
}


@pytest.mark.parametrize("kind", list(SMALL))
def test_a_small_input_is_read_in_little_memory(kind: str, tmp_path: Path) -> None:
    """A small input takes memory for its size, not for the most a file of its kind may hold (1 GiB for a CSV,
    64 MiB for YAML: ``read(limit + 1)`` would allocate that before reading a byte). Run with 600 MiB of address
    space (the command takes some 250 MiB of it with nothing read), which a read sized by the CSV limit
    overflows (``tests/test_yaml_reader.py`` holds the YAML reader to its input's size too)."""
    tmp = _files(tmp_path)
    (tmp / "sweep.csv").write_text("rate_rps,replicas,gpus,latency_p50_s,latency_p95_s,latency_p99_s,quality\n"
                                   "1,1,1,0.1,0.2,0.3,1.0\n")
    (tmp / "policy.yaml").write_text("tenants:\n  - name: a\n    weight: 2\n")
    args, says = SMALL[kind]
    proc = _run(args, tmp, memory=MEMORY_FOR_A_SMALL_INPUT, timeout=60)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert says in _words(proc.stdout), proc.stdout


def test_dev_null_is_an_empty_policy_not_a_device(tmp_path: Path) -> None:
    """``config check /dev/null`` (a script's "no policy") reads as an empty file; ``/dev/zero``, a device that
    never ends, is refused."""
    tmp = _files(tmp_path)
    proc = _run(["config", "check", "/dev/null"], tmp, timeout=60)
    assert proc.returncode == 0 and "0 tenants" in _words(proc.stdout), proc.stderr
    zero = _run(["config", "check", "/dev/zero"], tmp, timeout=60)
    _check(zero, 1, ["/dev/zero", "a character device"])


@pytest.mark.parametrize("backend", [["--history", "10m"], ["--backend", "real"]], ids=["embedded", "real"])
def test_cluster_up_on_a_busy_port_names_the_port_and_leaves_nothing(tmp_path: Path, backend: list[str]) -> None:
    """The port is valid, the machine refuses it: exit 1, one line naming --port and the port, on either backend
    (the real one before it starts etcd: its API server would say so only in its own log)."""
    tmp = _files(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = _run(["cluster", "up", "--port", str(port), *backend, "--env-file", "{tmp}/cluster.env"], tmp)
    line = _check(proc, 1, [f"--port {port}", "in use"])
    assert line == (f"error: --port {port}: cannot listen on 127.0.0.1:{port}: Address already in use "
                    "(choose another port, or 0 for any free one)")
    assert not (tmp / "cluster.env").exists()
    assert not list((tmp / "data").rglob("cluster.pid")) and not list((tmp / "data").rglob("kubeconfig"))


def test_cluster_up_stops_the_prometheus_a_killed_cluster_up_left_running(tmp_path: Path) -> None:
    """``kill -9`` of ``cluster up`` leaves its Prometheus serving (a session of its own): the next ``up`` stops it
    before it clears the run directory, even one that fails after that (here on a busy port)."""
    tmp = _files(tmp_path)
    left = PrometheusServer(tmp / "data" / "cluster" / "run" / "prometheus")
    left.start()
    orphan = left._proc
    assert orphan is not None
    try:
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            _run(["cluster", "up", "--port", str(busy.getsockname()[1]), "--history", "10m"], tmp)
        assert orphan.wait(timeout=30) is not None
    finally:
        left.stop()


def test_no_arguments_still_print_the_help(tmp_path: Path) -> None:
    proc = _run(["replay"], _files(tmp_path))
    assert proc.returncode == 2 and proc.stderr == ""
    assert "Usage: gpuaas replay" in proc.stdout and "reclaim" in proc.stdout


@pytest.mark.parametrize("raise_it, says", [
    (lambda: open("/nonexistent-gpuaas/x.yaml"), ["No such file or directory", "/nonexistent-gpuaas/x.yaml"]),
    (lambda: b"\xff".decode("utf-8"), ["UnicodeDecodeError", "invalid start byte"]),
    (lambda: int("twelve"), ["ValueError", "twelve"]),
    (lambda: 10.0 ** 400, ["OverflowError", "out of range"]),
], ids=["oserror", "unicode", "valueerror", "overflow"])
def test_the_top_level_handler_maps_what_no_command_caught(
    raise_it: Callable[[], object], says: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited, handle_errors():
        raise_it()
    assert exited.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    for text in says:
        assert text in err, (text, err)


def test_a_data_directory_variable_set_to_nothing_is_the_default_not_the_current_directory(tmp_path: Path) -> None:
    """``GPUAAS_DATA_DIR=`` (a deployment's template left blank) is unset: ``Path("")`` would be where the command ran."""
    proc = _run(["db", "upgrade"], tmp_path, {"GPUAAS_DATA_DIR": ""})
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "gpuaas.db").exists()
    assert (tmp_path / ".local" / "share" / "gpuaas" / "gpuaas.db").is_file()  # under HOME, as when unset


def test_a_step_that_ends_in_an_error_says_so_not_done(capsys: pytest.CaptureFixture[str]) -> None:
    """The progress line a step ends with, off a terminal: ``done`` just above an ``error:`` line reads as success."""
    with progress("reading"):
        pass
    with pytest.raises(RuntimeError), progress("writing"):
        raise RuntimeError("boom")
    with progress("running a flow") as step:
        step.failed = True  # a flow run that ended Failed: its error is printed after the step, by the command
    lines = capsys.readouterr().err.splitlines()
    assert lines[0::2] == ["reading…", "writing…", "running a flow…"]
    assert lines[1].startswith("reading: done in ")
    assert lines[3].startswith("writing: failed after ") and lines[5].startswith("running a flow: failed after ")
