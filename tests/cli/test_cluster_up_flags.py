"""``gpuaas cluster up``: what it is called with is checked before anything starts, and both backends write
the same env file.

A flag the cluster would not use (``--role`` without ``--rbac``, the trace's flags without ``--trace``,
the emulator's clock and seed on the real backend) is a usage error, exit 2, one line: a trial believed
to enforce a role or replay a trace at some speed, that does not, misleads whoever reads its results.
A ``--port`` outside 0..65535 is refused by the flag's range, not by the socket's OverflowError. The env
file names the fleet's policy whichever backend runs (docs/embedded-cluster.md, docs/real-cluster.md).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from threading import Event
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app
from gpuaas.cli.cluster_cmd import write_trial_env
from gpuaas.policy import Policy, load_policy

runner = CliRunner()

SCENARIOS = Path(__file__).resolve().parents[2] / "gpuaas" / "cluster" / "scenarios"
HELP = "; see gpuaas cluster up --help"
EMBEDDED_ONLY = ("the real backend runs in wall-clock time, with no backfilled history and nothing seeded")

CASES: dict[str, tuple[list[str], str]] = {
    "port-above-range": (["--port", "99999"],
                         "error: Invalid value for '--port': Input should be less than or equal to 65535 "
                         f"(got '99999'){HELP}"),
    "port-negative": (["--port", "-1"],
                      f"error: Invalid value for '--port': Input should be greater than or equal to 0 (got '-1'){HELP}"),
    "trace-format-unknown": (["--trace", "{tmp}/jobs.csv", "--trace-format", "bogus"],
                             "error: Invalid value for '--trace-format': 'bogus' is not one of "
                             f"'philly', 'itp'{HELP}"),
    "role-without-rbac": (["--role", "gpuaas-reader"],
                          f"error: --role needs --rbac (the RBAC manifest whose ClusterRole it enforces){HELP}"),
    "role-without-rbac-real": (["--backend", "real", "--role", "gpuaas-reader"],
                               f"error: --role needs --rbac (the RBAC manifest whose ClusterRole it enforces){HELP}"),
    "trace-format-without-trace": (["--trace-format", "itp"],
                                   f"error: --trace-format needs --trace (it applies to the trace's CSV){HELP}"),
    "compress-without-trace": (["--compress", "30"],
                               f"error: --compress needs --trace (it applies to the trace's CSV){HELP}"),
    "scenario-and-trace": (["--scenario", "{tmp}/s.yaml", "--trace", "{tmp}/jobs.csv"],
                           "error: --scenario and --trace do not go together: --trace builds the scenario from the "
                           f"trace{HELP}"),
    "policy-without-env-file": (["--policy", str(SCENARIOS / "default-policy.yaml")],
                                "error: --policy needs --env-file (the policy is written there as GPUAAS_POLICY_FILE)"
                                f"{HELP}"),
    "real-speed": (["--backend", "real", "--speed", "2"],
                   f"error: --speed applies to the embedded backend only: {EMBEDDED_ONLY}{HELP}"),
    "real-seed": (["--backend", "real", "--seed", "0"],
                  f"error: --seed applies to the embedded backend only: {EMBEDDED_ONLY}{HELP}"),
    "real-history": (["--backend", "real", "--history", "6h"],
                     f"error: --history applies to the embedded backend only: {EMBEDDED_ONLY}{HELP}"),
    "real-rbac": (["--backend", "real", "--rbac", "{tmp}/rbac.yaml", "--role", "gpuaas-reader"],
                  "error: --rbac emulates an authorizer; the real backend runs the API server's own RBAC (bind the "
                  f"roles with kubectl){HELP}"),
    "real-trace": (["--backend", "real", "--trace", "{tmp}/jobs.csv"],
                   f"error: --trace replays a time-compressed trace: use the embedded backend{HELP}"),
    # Bounded: more history than the embedded Prometheus keeps, or a clock that would outrun any date, would
    # otherwise fail later as an OverflowError (leaving a data dir behind) or in the simulation thread.
    "history-past-retention": (["--history", "61d"],
                               f"error: Invalid value for '--history': at most 60d (got '61d'){HELP}"),
    "history-past-any-date": (["--history", "99999999d"],
                              f"error: Invalid value for '--history': at most 60d (got '99999999d'){HELP}"),
    "speed-past-a-day-per-second": (["--speed", "1e308"],
                                    "error: Invalid value for '--speed': Input should be less than or equal to 86400 "
                                    f"(got '1e308'){HELP}"),
    "speed-nan": (["--speed", "nan"], f"error: Invalid value for '--speed': 'nan' is not a number{HELP}"),
    # Where the kubeconfig or the env file cannot be written: said before the cluster starts, not after it.
    # (Run in the test's directory: relative paths keep the line short of the value's cut.)
    "env-file-a-directory": (["--env-file", "."],
                             "error: Invalid value for '--env-file': is a directory; give the path of a file to write "
                             f"(got '.'){HELP}"),
    "kubeconfig-a-directory": (["--kubeconfig", "."],
                               "error: Invalid value for '--kubeconfig': is a directory; give the path of a file to "
                               f"write (got '.'){HELP}"),
    "kubeconfig-under-a-file": (["--kubeconfig", "jobs.csv/kc.yaml"],
                                "error: Invalid value for '--kubeconfig': jobs.csv is not a directory "
                                f"(got 'jobs.csv/kc.yaml'){HELP}"),
    # An output that is an input: the env file (or the kubeconfig) would replace it once the cluster started.
    "env-file-the-scenario": (["--scenario", "s.yaml", "--env-file", "s.yaml"],
                              "error: --env-file and --scenario name the same file (s.yaml): writing it would "
                              f"overwrite the input; give --env-file another path{HELP}"),
    "kubeconfig-the-rbac-manifest": (["--rbac", "rbac.yaml", "--role", "r", "--kubeconfig", "./rbac.yaml"],
                                     "error: --kubeconfig and --rbac name the same file (rbac.yaml): writing it would "
                                     f"overwrite the input; give --kubeconfig another path{HELP}"),
    "env-file-the-trace": (["--trace", "jobs.csv", "--env-file", "{tmp}/jobs.csv"],
                           "error: --env-file and --trace name the same file ({tmp}/jobs.csv): writing it would "
                           f"overwrite the input; give --env-file another path{HELP}"),
    # A role named twice is a slip (for another role, most likely): the rules would be the same with it once.
    "role-twice": (["--rbac", "rbac.yaml", "--role", "gpuaas-reader", "--role", "gpuaas-writer", "--role",
                    "gpuaas-reader"],
                   "error: Invalid value for '--role': role 'gpuaas-reader' given twice; name each ClusterRole of "
                   f"--rbac once{HELP}"),
    # In range, so the refusal is the other flag's: 0 (any free port) and 65535 are valid ports.
    "port-zero-is-valid": (["--port", "0", "--role", "r"],
                           f"error: --role needs --rbac (the RBAC manifest whose ClusterRole it enforces){HELP}"),
    "port-65535-is-valid": (["--port", "65535", "--role", "r"],
                            f"error: --role needs --rbac (the RBAC manifest whose ClusterRole it enforces){HELP}"),
}

WITHOUT_ENV_FILE = {"policy-without-env-file", "env-file-a-directory", "env-file-the-scenario",
                    "env-file-the-trace"}


def _descendants() -> set[int]:
    """Processes below this test process (a started cluster would leave etcd, Prometheus, ...), read from /proc
    so that reading them starts no process of its own."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    found: set[int] = set()
    frontier = {os.getpid()}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.fixture
def signals_kept() -> Iterator[None]:
    """``cluster up`` installs its stop handlers in the process: put pytest's back afterwards."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


@pytest.mark.parametrize("name", list(CASES))
def test_a_flag_the_cluster_would_not_use_is_a_usage_error_and_starts_nothing(name: str, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    args, line = CASES[name]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.csv").write_text("timestamp,duration,gpus\n0,60,1\n")
    (tmp_path / "s.yaml").write_text("name: s\n")
    (tmp_path / "rbac.yaml").write_text("")
    data = tmp_path / "data"
    before = _descendants()
    env_file = [] if name in WITHOUT_ENV_FILE else ["--env-file", str(tmp_path / "x.env")]
    result = runner.invoke(app, ["cluster", "up", *[a.format(tmp=tmp_path) for a in args], *env_file],
                           env={"GPUAAS_DATA_DIR": str(data)})
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [line.format(tmp=tmp_path)]
    assert "Traceback" not in result.output
    # Nothing read, written or started: no data dir (no pid file, no kubeconfig), no env file, no process.
    assert not data.exists()
    assert not (tmp_path / "x.env").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.csv", "rbac.yaml", "s.yaml"]  # no .tmp either
    assert _descendants() <= before


class _StandIn:
    """Stands in for either backend's process tree: starts nothing, and its ``wait`` returns as after a stop.
    The env file is what is tested: the keys the cluster itself serves come from ``settings_env``."""

    def __init__(self, scenario: Any, run_dir: Path, **kwargs: Any) -> None:
        self.kubeconfig = kwargs["kubeconfig"]
        self._progress: Any = None
        self.api_url = "https://127.0.0.1:1"
        self.prometheus_url = "http://127.0.0.1:2"
        self.opencost_url = "http://127.0.0.1:3"
        self.serving = SimpleNamespace(endpoints={})

    def settings_env(self) -> dict[str, str]:
        return {"GPUAAS_KUBECONFIG": str(self.kubeconfig), "GPUAAS_PROMETHEUS_URL": self.prometheus_url}

    def start(self) -> None:
        pass

    def wait(self, stop: Event) -> None:
        pass

    def cancel(self) -> None:
        pass

    def stop(self) -> None:
        pass


def _env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def _up_with_stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, backend: str,
                      *args: str) -> tuple[Any, dict[str, str]]:
    import gpuaas.cluster.real
    import gpuaas.cluster.runner

    monkeypatch.setattr(gpuaas.cluster.real, "RealCluster", _StandIn)
    monkeypatch.setattr(gpuaas.cluster.runner, "EmbeddedCluster", _StandIn)
    env_file = tmp_path / "trial.env"
    result = runner.invoke(app, ["cluster", "up", "--backend", backend, "--env-file", str(env_file), *args],
                           env={"GPUAAS_DATA_DIR": str(tmp_path / "data")})
    assert result.exit_code == 0, result.output
    return result, _env(env_file)


@pytest.mark.parametrize("backend", ["embedded", "real"])
def test_each_backends_env_file_names_the_scenarios_policy(backend: str, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           signals_kept: None) -> None:
    result, values = _up_with_stand_in(monkeypatch, tmp_path, backend)
    assert Path(values["GPUAAS_POLICY_FILE"]) == (SCENARIOS / "default-policy.yaml").resolve()
    assert isinstance(load_policy(Path(values["GPUAAS_POLICY_FILE"])), Policy)
    assert values["GPUAAS_DATA_DIR"] == str((tmp_path / "data" / "cluster" / "trial").resolve())
    assert values["GPUAAS_KUBECONFIG"] == str(tmp_path / "data" / "cluster" / "kubeconfig")
    assert "no policy file" not in result.stderr


@pytest.mark.parametrize("backend", ["embedded", "real"])
def test_each_backends_env_file_names_the_policy_given(backend: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch, signals_kept: None) -> None:
    policy = tmp_path / "mine.yaml"
    policy.write_text((SCENARIOS / "default-policy.yaml").read_text())
    _, values = _up_with_stand_in(monkeypatch, tmp_path, backend, "--policy", str(policy))
    assert values["GPUAAS_POLICY_FILE"] == str(policy.resolve())


@pytest.mark.parametrize("backend", ["embedded", "real"])
def test_a_scenario_without_a_policy_is_said_and_the_key_left_out(backend: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  signals_kept: None) -> None:
    scenario = tmp_path / "lone.yaml"  # no lone-policy.yaml beside it
    scenario.write_text((SCENARIOS / "default.yaml").read_text())
    result, values = _up_with_stand_in(monkeypatch, tmp_path, backend, "--scenario", str(scenario))
    assert "GPUAAS_POLICY_FILE" not in values
    assert ("no policy file for this scenario (pass --policy): the cost report will count no outcome and reclaim "
            "will know no tenant") in result.stderr.splitlines()


def test_write_trial_env_writes_the_cluster_keys_the_data_dir_and_the_policy(tmp_path: Path) -> None:
    policy = (SCENARIOS / "default-policy.yaml").resolve()
    write_trial_env(tmp_path / "a.env", {"GPUAAS_KUBECONFIG": "/k"}, tmp_path / "trial", policy)
    assert _env(tmp_path / "a.env") == {"GPUAAS_KUBECONFIG": "/k", "GPUAAS_DATA_DIR": str(tmp_path / "trial"),
                                        "GPUAAS_POLICY_FILE": str(policy)}
    write_trial_env(tmp_path / "b.env", {"GPUAAS_KUBECONFIG": "/k"}, tmp_path / "trial", None)
    assert _env(tmp_path / "b.env") == {"GPUAAS_KUBECONFIG": "/k", "GPUAAS_DATA_DIR": str(tmp_path / "trial")}


ITP = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"
PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"
SPAN = "63,072,000 s (two years)"


@pytest.mark.parametrize(("layout", "text", "message"), [
    ("itp", ITP + "j,0,1,m,10,1,1,1e10\n", f"line 2: duration: a replay holds runs of at most {SPAN}, got '1e10'"),
    ("itp", ITP + "j,0,1,m,10,1,1,10\nk,1,1,m,1e9,1,1,10\n",
     f"line 3: deadline: a replay holds times up to {SPAN} after the trace's first submission, got '1e9'"),
    ("philly", PHILLY + "2017-09-04 10:30:41,10,1,1,vc\n2019-09-04 10:30:42,10,1,1,vc\n",
     f"line 3: timestamp: a replay holds times up to {SPAN} after the trace's first submission, got "
     "'2019-09-04 10:30:42'"),
], ids=["itp-long-run", "itp-late-deadline", "philly-late"])
def test_a_trace_past_what_a_replay_holds_is_refused_before_anything_starts(
        layout: str, text: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        signals_kept: None) -> None:
    """``cluster up --trace`` holds the span the replays hold (the trace readers' rule): one line, exit 1, and no
    data dir, env file or process. The backends are stood in for, so that a trace let through starts nothing."""
    import gpuaas.cluster.runner

    monkeypatch.setattr(gpuaas.cluster.runner, "EmbeddedCluster", _StandIn)
    trace = tmp_path / "jobs.csv"
    trace.write_text(text)
    data = tmp_path / "data"
    before = _descendants()
    result = runner.invoke(app, ["cluster", "up", "--trace", str(trace), "--trace-format", layout,
                                 "--env-file", str(tmp_path / "x.env")], env={"GPUAAS_DATA_DIR": str(data)})
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [f"error: {trace}: {message}"]
    assert not data.exists() and not (tmp_path / "x.env").exists()
    assert _descendants() <= before


class _FailingStandIn(_StandIn):
    """A cluster whose simulation stops by itself once it runs."""

    def wait(self, stop: Event) -> None:
        from gpuaas.cluster.runner import SimulationFailed

        raise SimulationFailed("the simulation stopped at 9999-12-31 23:59:59 simulated time: OverflowError: "
                               "date value out of range")


def test_a_simulation_that_stops_by_itself_ends_up_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 signals_kept: None) -> None:
    import gpuaas.cluster.runner

    monkeypatch.setattr(gpuaas.cluster.runner, "EmbeddedCluster", _FailingStandIn)
    result = runner.invoke(app, ["cluster", "up"], env={"GPUAAS_DATA_DIR": str(tmp_path / "data")})
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "error: the simulation stopped at 9999-12-31 23:59:59 simulated time: OverflowError: date value out of range")
    assert "Traceback" not in result.output
    assert not (tmp_path / "data" / "cluster" / "cluster.pid").exists()


def test_an_output_that_cannot_be_replaced_leaves_no_partial_file(tmp_path: Path) -> None:
    """The env file and the kubeconfig (which holds the token) are written aside and renamed: when the rename
    fails, the file written aside is removed, not left beside the target."""
    from gpuaas.cli._foreground import write_env_file
    from gpuaas.cluster.apiserver import ApiServer, ObjectStore

    target = tmp_path / "out"
    target.mkdir()
    with pytest.raises(IsADirectoryError):
        write_env_file(target, {"GPUAAS_KUBECONFIG": "/k"})
    server = ApiServer(ObjectStore(), token="secret-token")
    try:
        with pytest.raises(IsADirectoryError):
            server.write_kubeconfig(target)
    finally:
        server.stop()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
