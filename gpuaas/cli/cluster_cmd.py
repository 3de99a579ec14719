"""``gpuaas cluster up|down``: run the embedded GPU cluster in the foreground, or stop it.

``up`` prints the kubeconfig path and the Prometheus and OpenCost URLs and, with
``--env-file``, writes them as ``GPUAAS_*`` lines so any gpuaas command run with that
environment targets the embedded cluster — with the scenario's policy as ``GPUAAS_POLICY_FILE``
(the tenants and services the fleet was built for: without it a cost report there counts no
outcome, and reclaim knows no tenant), and a ``GPUAAS_DATA_DIR`` of its own (``trial/`` in
the cluster directory, started afresh with each ``up``: each start is a new cluster), so that a
trial never shares a database with a real deployment on the same host. It stops on Ctrl-C, SIGTERM, SIGHUP (the
terminal closed) or ``gpuaas cluster down`` (which signals the pid in ``cluster.pid`` only when that process is the
``gpuaas cluster up`` that wrote it, started when the file says), also while it is still starting, and stops every
process it started: Prometheus runs in its own session so that a Ctrl-C reaches only ``up``, which then stops it in
order.

``up --backend real`` runs the real control plane instead (etcd, kube-apiserver and the Kueue
manager built from the Go module proxy, ``gpuaas.cluster.real``), with the same kubeconfig, env
file (the policy included) and stop signals; the embedded emulator stays the default.

A flag that would change nothing in the cluster being started (``--role`` without ``--rbac``, the
trace's flags without ``--trace``, the emulator's clock and seed on the real backend) is a usage
error rather than ignored: a trial run believed to enforce a role, or to replay at 60x, would
otherwise mislead whoever reads its results.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
import signal
import socket
import time
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from gpuaas.cli._common import (
    check_outputs,
    console,
    err_console,
    fail,
    flag_given,
    settings_or_exit,
    usage_error,
)
from gpuaas.cli._foreground import held, read_pid_file, start_time, write_env_file
from gpuaas.cli._progress import progress
from gpuaas.cli._trace_format import TraceFormat
from gpuaas.cluster.clock import MAX_HISTORY, MAX_SPEED
from gpuaas.errors import GpuaasError

__all__ = ["down", "up", "write_trial_env"]

PID_FILE = "cluster.pid"


class Backend(str, Enum):
    embedded = "embedded"
    real = "real"


TRIAL_DATA_DIR = "trial"
SCENARIOS = Path(__file__).resolve().parents[1] / "cluster" / "scenarios"


def scenario_policy(scenario: Path | None) -> Path | None:
    """The policy a scenario was written with: ``<name>-policy.yaml`` beside ``<name>.yaml`` (the built-in
    scenario's is ``default-policy.yaml``); None when there is none."""
    path = SCENARIOS / "default-policy.yaml" if scenario is None else scenario.with_name(f"{scenario.stem}-policy.yaml")
    return path.resolve() if path.is_file() else None


def write_trial_env(env_file: Path, cluster_env: Mapping[str, str], trial_dir: Path, policy_file: Path | None) -> None:
    """The env file of either backend: the cluster's own ``GPUAAS_*`` keys, the trial's data dir and its policy.

    Both backends write it here so that a shell sourcing it gets the same keys whichever ran: without
    ``GPUAAS_POLICY_FILE`` a cost report there counts no outcome and reclaim knows no tenant, which
    is said on stderr when there is no policy to name.
    """
    values = {**cluster_env, "GPUAAS_DATA_DIR": str(trial_dir.resolve())}
    if policy_file is not None:
        values["GPUAAS_POLICY_FILE"] = str(policy_file)
    else:
        err_console.print("no policy file for this scenario (pass --policy): the cost report will count no "
                          "outcome and reclaim will know no tenant", markup=False, highlight=False, soft_wrap=True)
    write_env_file(env_file, values)


def _port_refused(port: int, exc: OSError) -> typer.Exit:
    """The one line for a valid ``--port`` the machine will not let us listen on (taken, reserved, privileged)."""
    return fail(f"--port {port}: cannot listen on 127.0.0.1:{port}: {exc.strerror} "
                "(choose another port, or 0 for any free one)")


def _check_port_free(port: int) -> None:
    """Refuse a taken ``--port`` before the real backend starts etcd: kube-apiserver would fail on it only after
    that, in its own log. SO_REUSEADDR as Go's listeners set it, so a port in TIME_WAIT is not refused."""
    if not port:
        return
    try:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))
    except OSError as exc:
        raise _port_refused(port, exc) from exc


def _refuse_ignored_flags(ctx: typer.Context, backend: Backend, *, scenario: Path | None, trace: Path | None,
                          rbac: Path | None, role: list[str] | None, policy: Path | None,
                          env_file: Path | None) -> None:
    """Flags given where they would change nothing are usage errors: a run believed to enforce a role, replay a
    trace at some compression, or use a seed, that does not, would mislead whoever reads its results."""

    if role and rbac is None:
        raise usage_error("--role needs --rbac (the RBAC manifest whose ClusterRole it enforces)")
    if rbac is not None and not role:
        raise usage_error("--rbac needs at least one --role (a ClusterRole name in the manifest)")
    if trace is None:
        for flag in ("trace_format", "compress"):
            if flag_given(ctx, flag):
                raise usage_error(f"--{flag.replace('_', '-')} needs --trace (it applies to the trace's CSV)")
    elif scenario is not None:
        raise usage_error("--scenario and --trace do not go together: --trace builds the scenario from the trace")
    if policy is not None and env_file is None:
        raise usage_error("--policy needs --env-file (the policy is written there as GPUAAS_POLICY_FILE)")
    if backend is Backend.real:
        if rbac is not None:
            raise usage_error("--rbac emulates an authorizer; the real backend runs the API server's own RBAC "
                              "(bind the roles with kubectl)")
        if trace is not None:
            raise usage_error("--trace replays a time-compressed trace: use the embedded backend")
        for flag in ("speed", "seed", "history"):
            if flag_given(ctx, flag):
                raise usage_error(f"--{flag} applies to the embedded backend only: the real backend runs in wall-clock "
                                  "time, with no backfilled history and nothing seeded")
    repeated = next((name for k, name in enumerate(role or []) if name in (role or [])[:k]), None)
    if repeated is not None:  # enforced once whatever the count: a second --role of it is a slip for another role
        raise usage_error(f"role {repeated!r} given twice; name each ClusterRole of --rbac once", "--role")


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it has stopped); ``pid`` is one ``read_pid_file`` took."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _is_cluster_up(pid: int, started: int | None) -> bool:
    """Whether the running process ``pid`` is a ``gpuaas cluster up`` and, where the pid file recorded its start
    time, the very one that wrote it (not a later process given the same pid). Without ``/proc`` to ask, the pid
    file's word is all there is."""
    if not Path("/proc/self").is_dir():
        return True
    if started is not None and start_time(pid) != started:
        return False
    try:
        args = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return False
    return any(args[i:i + 2] == ["cluster", "up"] and any("gpuaas" in a for a in args[:i]) for i in range(len(args)))


def _running(pid_path: Path) -> tuple[int | None, str | None]:
    """The pid of the cluster that ``pid_path`` names, when that cluster is running; else None, and what the
    file held (None: there is no pid file). Only a pid file ``up`` wrote names a process to signal: a stale one
    (its process gone, or its pid since given to another program) or one holding anything else names none."""
    try:
        text = pid_path.read_text(errors="replace")
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{pid_path} cannot be read ({exc.strerror})"
    recorded = read_pid_file(text)
    if recorded is None:
        return None, f"{pid_path} holds {text.strip()[:40]!r}, not the pid of a running cluster"
    pid, started = recorded
    if not _alive(pid):
        return None, f"{pid_path} names pid {pid}, which is not running"
    if pid == os.getpid() or not _is_cluster_up(pid, started):
        return None, f"{pid_path} names pid {pid}, which is not the gpuaas cluster started from this data dir"
    return pid, None


def up(
    ctx: typer.Context,
    scenario: Annotated[Path | None, typer.Option("--scenario", help="Scenario YAML (default: built-in demo).")] = None,
    kubeconfig: Annotated[Path | None, typer.Option(help="Where to write the kubeconfig.")] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="API server port (0: any free port).")] = 0,
    env_file: Annotated[Path | None, typer.Option(help="Write GPUAAS_* KEY=value lines here.")] = None,
    speed: Annotated[float, typer.Option(min=0.001, max=MAX_SPEED, help=(
        "Sim seconds per wall second. Live samples are stamped on the wall clock, so flows querying "
        "Prometheus at 'now' see the newest state (rates are per wall second, i.e. x speed); object "
        "timestamps and OpenCost windows stay in sim time, ahead of the wall clock when speed > 1. At most "
        f"{MAX_SPEED:g} (a simulated day per second): the simulation steps every 2 wall seconds."))] = 1.0,
    seed: Annotated[int, typer.Option(help="Seed: same seed, same cluster.")] = 0,
    history: Annotated[str, typer.Option(help=(
        f"History to backfill, e.g. 6h, 30m; at most {MAX_HISTORY.days}d, what the embedded Prometheus "
        "keeps."))] = "6h",
    trace: Annotated[Path | None, typer.Option(help="Build the scenario from a public trace CSV.")] = None,
    trace_format: Annotated[TraceFormat, typer.Option(help="The layout of --trace.")] = TraceFormat.philly,
    compress: Annotated[float, typer.Option(min=1.0, help="Time compression of the trace.")] = 60.0,
    rbac: Annotated[Path | None, typer.Option(help=(
        "Enforce the rules of an RBAC manifest (such as the kit's rbac.yaml): requests the "
        "--role(s) do not grant get 403, as from a real API server."))] = None,
    role: Annotated[list[str] | None, typer.Option(help="ClusterRole of --rbac to enforce; repeatable.")] = None,
    policy: Annotated[Path | None, typer.Option(help=(
        "Policy file written to --env-file as GPUAAS_POLICY_FILE (default: the scenario's own, "
        "<scenario>-policy.yaml beside it; the built-in scenario's for the demo fleet)."))] = None,
    backend: Annotated[Backend, typer.Option(help=(
        "embedded: the fast, time-warped emulator; real: etcd, kube-apiserver and the Kueue manager built "
        "from the Go module proxy (first run builds them, see docs/real-cluster.md)."))] = Backend.embedded,
    token: Annotated[str | None, typer.Option(envvar="GPUAAS_CLUSTER_TOKEN", show_default=False, help=(
        "Require this bearer token on every API request (401 without it); the kubeconfig written carries "
        "it. Prefer the GPUAAS_CLUSTER_TOKEN variable: a command line is visible to other users."))] = None,
) -> None:
    """Start the embedded cluster and stay in the foreground until stopped."""
    from gpuaas.cluster.apiserver import RBACRules
    from gpuaas.cluster.runner import EmbeddedCluster, StartCancelled
    from gpuaas.cluster.scenario import default_scenario, load_scenario, parse_duration
    from gpuaas.cluster.traces import scenario_from_trace
    from gpuaas.policy import load_policy

    # Called wrong is said before anything is read, written or started.
    _refuse_ignored_flags(ctx, backend, scenario=scenario, trace=trace, rbac=rbac, role=role, policy=policy,
                          env_file=env_file)
    try:
        window = parse_duration(history, maximum=MAX_HISTORY)
    except ValueError as exc:
        raise usage_error(str(exc), "--history") from exc
    # Where the kubeconfig and the env file cannot be written, or would replace an input: said before anything
    # starts, not once the cluster has (their folders are made when they are written).
    check_outputs({"--env-file": env_file, "--kubeconfig": kubeconfig},
                  {"--scenario": scenario, "--policy": policy, "--rbac": rbac, "--trace": trace}, make_folders=True,
                  renamed=True)
    settings = settings_or_exit()
    cluster_dir = settings.cluster_dir
    pid_path = cluster_dir / PID_FILE
    other, _ = _running(pid_path)  # a stale pid file is overwritten
    if other is not None:
        raise fail(f"a cluster is already running from {cluster_dir} (pid {other}); stop it with 'gpuaas cluster down', "
                   "or start another one with its own GPUAAS_DATA_DIR")
    try:
        rules = RBACRules.from_manifest(rbac, role or []) if rbac is not None else None
        if policy is not None:
            load_policy(policy)  # a bad policy fails now, not at the first command that reads the env file
        if trace is not None:
            chosen = scenario_from_trace(trace, trace_format.value, compress=compress)
        else:
            chosen = load_scenario(scenario) if scenario else default_scenario()
    except (GpuaasError, ValueError) as exc:
        raise fail(str(exc)) from exc
    cluster_dir.mkdir(parents=True, exist_ok=True)  # only now: a file refused above leaves no data dir behind
    # The fleet's policy, for the env file: --policy, else the scenario's own (a trace has none).
    policy_file = policy.resolve() if policy is not None else (scenario_policy(scenario) if trace is None else None)
    # 'cluster down' run with the env file sourced looks in the trial data dir's cluster dir.
    trial_dir = cluster_dir / TRIAL_DATA_DIR
    run_dir = cluster_dir / "run"
    # Every start is a new cluster (a new kube-system uid): the last trial's history and audit log are another
    # cluster's, which the store refuses to mix, so the trial starts afresh with it.
    shutil.rmtree(trial_dir, ignore_errors=True)
    from gpuaas.cluster.prometheus import stop_orphan

    stop_orphan(run_dir / "prometheus")  # an earlier 'up' killed outright left it serving; its pid file goes next
    if backend is Backend.real:
        _check_port_free(port)
        shutil.rmtree(run_dir, ignore_errors=True)
        from gpuaas.cli._cluster_real import run_real

        run_real(chosen, run_dir, port=port, kubeconfig=kubeconfig or cluster_dir / "kubeconfig",
                 env_file=env_file, policy_file=policy_file, trial_dir=trial_dir, token=token,
                 pid_paths=_pid_paths(cluster_dir, env_file))
        return
    shutil.rmtree(run_dir, ignore_errors=True)
    try:
        cluster = EmbeddedCluster(chosen, run_dir, seed=seed, history=window, speed=speed, api_port=port,
                                  rbac=rules, kubeconfig=kubeconfig or cluster_dir / "kubeconfig",
                                  token=token or None)
    except OSError as exc:
        if exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES):
            raise
        raise _port_refused(port, exc) from exc

    with held(cluster, "embedded cluster", _pid_paths(cluster_dir, env_file), StartCancelled) as stop:
        with progress("starting the embedded cluster") as update:
            cluster._progress = update
            cluster.start()
        console.print(f"kubeconfig:     {cluster.kubeconfig}", highlight=False)
        console.print(f"Prometheus URL: {cluster.prometheus_url}", highlight=False)
        console.print(f"OpenCost URL:   {cluster.opencost_url}", highlight=False)
        for (namespace, name), endpoint in cluster.serving.endpoints.items():
            console.print(f"OpenAI endpoint {namespace}/{name} ({endpoint.model_name}): {endpoint.url}",
                          highlight=False, soft_wrap=True)
        if env_file is not None:
            write_trial_env(env_file, cluster.settings_env(), trial_dir, policy_file)
        err_console.print(f"scenario {chosen.name!r}, seed {seed}; Ctrl-C or 'gpuaas cluster down' to stop")
        cluster.wait(stop)


def _pid_paths(cluster_dir: Path, env_file: Path | None) -> list[Path]:
    """Where ``up`` writes its pid: 'cluster down' run with the env file sourced looks in the trial dir."""
    pid_path = cluster_dir / PID_FILE
    return [pid_path, cluster_dir / TRIAL_DATA_DIR / "cluster" / PID_FILE] if env_file is not None else [pid_path]


def down(timeout: Annotated[float, typer.Option(help="Seconds to wait for it to stop (0 or more).")] = 30.0) -> None:
    """Stop the embedded cluster started by 'gpuaas cluster up'."""
    if not math.isfinite(timeout) or timeout < 0:  # called wrong: said before anything is signalled
        raise usage_error(f"expected a number of seconds, 0 or more, got {timeout}", "--timeout")
    settings = settings_or_exit()
    pid_path = settings.cluster_dir / PID_FILE
    pid, found = _running(pid_path)
    if pid is None:
        if found is None:
            console.print("no embedded cluster is running")
            return
        try:
            pid_path.unlink(missing_ok=True)
        except OSError:
            console.print(f"no embedded cluster is running ({found})", markup=False, highlight=False, soft_wrap=True)
        else:
            console.print(f"no embedded cluster is running ({found}; removed it)", markup=False, highlight=False,
                          soft_wrap=True)
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    # 'up' removes its pid file once everything it started has stopped.
    while _alive(pid) and _running(pid_path)[0] == pid:
        if time.monotonic() >= deadline:
            raise fail(f"pid {pid} did not stop within {timeout:g}s")
        time.sleep(0.2)
    console.print(f"stopped (pid {pid})")
