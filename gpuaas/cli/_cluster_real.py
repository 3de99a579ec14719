"""``gpuaas cluster up --backend real``: the foreground loop around ``RealCluster``.

The same contract as the embedded backend: progress lines while it builds and starts, the
kubeconfig and Prometheus URL on stdout, the ``GPUAAS_*`` env file, a pid file for
``gpuaas cluster down``, and Ctrl-C, SIGTERM or SIGHUP stop every process it started.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from types import FrameType

from gpuaas.cli._common import console, err_console, fail, progress
from gpuaas.cluster.scenario import Scenario
from gpuaas.errors import GpuaasError

__all__ = ["run_real"]


def run_real(scenario: Scenario, run_dir: Path, *, port: int, kubeconfig: Path, env_file: Path | None,
             token: str | None, pid_paths: list[Path]) -> None:
    """Start the real cluster, print where it is, and stay until a stop signal."""
    from gpuaas.cluster.real import RealCluster, StartCancelled

    stop = threading.Event()
    cluster = RealCluster(scenario, run_dir, api_port=port, kubeconfig=kubeconfig, token=token or None)

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()
        cluster.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _on_signal)
    for path in pid_paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(str(os.getpid()))
    try:
        with progress("starting the real cluster") as update:
            cluster._progress = update
            cluster.start()
        console.print(f"kubeconfig:     {cluster.kubeconfig}", highlight=False)
        console.print(f"API server:     {cluster.api_url}", highlight=False)
        console.print(f"Prometheus URL: {cluster.prometheus_url}", highlight=False)
        if env_file is not None:
            env_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = env_file.with_name(env_file.name + ".tmp")
            trial = (pid_paths[-1].parent.parent).resolve()
            values = {**cluster.settings_env(), "GPUAAS_DATA_DIR": str(trial)}
            tmp.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
            tmp.replace(env_file)
            console.print(f"environment:    {env_file}", highlight=False)
        err_console.print(f"scenario {scenario.name!r} on the real backend; Ctrl-C or 'gpuaas cluster down' to stop")
        cluster.wait(stop)
    except StartCancelled:
        pass
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    finally:
        cluster.stop()
        for path in pid_paths:
            try:
                if int(path.read_text().strip()) == os.getpid():
                    path.unlink(missing_ok=True)
            except (OSError, ValueError):
                pass
    err_console.print("real cluster stopped")
