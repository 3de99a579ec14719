"""``gpuaas cluster up --backend real``: the foreground loop around ``RealCluster``.

The same contract as the embedded backend: progress lines while it builds and starts, the
kubeconfig and Prometheus URL on stdout, the ``GPUAAS_*`` env file (written by the same code as the
embedded backend's, so it names the same policy), a pid file for
``gpuaas cluster down``, and Ctrl-C, SIGTERM or SIGHUP stop every process it started.
"""

from __future__ import annotations

from pathlib import Path

from gpuaas.cli._common import console, err_console
from gpuaas.cli._foreground import held
from gpuaas.cli._progress import progress
from gpuaas.cli.cluster_cmd import write_trial_env
from gpuaas.cluster.scenario import Scenario

__all__ = ["run_real"]


def run_real(scenario: Scenario, run_dir: Path, *, port: int, kubeconfig: Path, env_file: Path | None,
             policy_file: Path | None, trial_dir: Path, token: str | None, pid_paths: list[Path]) -> None:
    """Start the real cluster, print where it is, and stay until a stop signal.

    ``policy_file`` and ``trial_dir`` go to the env file as the embedded backend writes them
    (``write_trial_env``): a shell sourcing it targets this cluster with the fleet's policy.
    """
    from gpuaas.cluster.real import RealCluster, StartCancelled

    cluster = RealCluster(scenario, run_dir, api_port=port, kubeconfig=kubeconfig, token=token or None)
    with held(cluster, "real cluster", pid_paths, StartCancelled) as stop:
        with progress("starting the real cluster") as update:
            cluster._progress = update
            cluster.start()
        console.print(f"kubeconfig:     {cluster.kubeconfig}", highlight=False)
        console.print(f"API server:     {cluster.api_url}", highlight=False)
        console.print(f"Prometheus URL: {cluster.prometheus_url}", highlight=False)
        if env_file is not None:
            write_trial_env(env_file, cluster.settings_env(), trial_dir, policy_file)
        err_console.print(f"scenario {scenario.name!r} on the real backend; Ctrl-C or 'gpuaas cluster down' to stop")
        cluster.wait(stop)
