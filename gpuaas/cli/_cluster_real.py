"""``gpuaas cluster up --backend real``: the foreground loop around ``RealCluster``.

The same contract as the embedded backend: progress lines while it builds and starts, the
kubeconfig and Prometheus URL on stdout, the ``GPUAAS_*`` env file, a pid file for
``gpuaas cluster down``, and Ctrl-C, SIGTERM or SIGHUP stop every process it started.
"""

from __future__ import annotations

from pathlib import Path

from gpuaas.cli._common import console, err_console, progress
from gpuaas.cli._foreground import held, write_env_file
from gpuaas.cluster.scenario import Scenario

__all__ = ["run_real"]


def run_real(scenario: Scenario, run_dir: Path, *, port: int, kubeconfig: Path, env_file: Path | None,
             token: str | None, pid_paths: list[Path]) -> None:
    """Start the real cluster, print where it is, and stay until a stop signal."""
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
            trial = (pid_paths[-1].parent.parent).resolve()
            write_env_file(env_file, {**cluster.settings_env(), "GPUAAS_DATA_DIR": str(trial)})
        err_console.print(f"scenario {scenario.name!r} on the real backend; Ctrl-C or 'gpuaas cluster down' to stop")
        cluster.wait(stop)
