"""A real Prometheus on loopback, with history backfilled through ``promtool``.

The embedded cluster, the tests and the benchmarks all query a real Prometheus so that
the PromQL gpuaas sends is checked by the real engine, not by a stand-in. History is
written as OpenMetrics text and turned into TSDB blocks with
``promtool tsdb create-blocks-from openmetrics`` before the server starts; live samples
arrive by scraping (honouring the exporter's timestamps).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType

import httpx
import yaml

from gpuaas.errors import GpuaasError

__all__ = ["Backfill", "PrometheusServer", "free_port", "require_binary", "to_openmetrics"]


_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PORT = 20000  # above the registered services an operator runs on a workstation
_RANDOM = random.SystemRandom()  # not the global generator: a test that seeds it must not give two workers one port


def _ports_below_ephemeral() -> range:
    """The ports between ``_LOWEST_PORT`` and the kernel's ephemeral range; empty where it cannot be read."""
    try:
        low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return range(0)
    return range(_LOWEST_PORT, low)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now.

    The port is handed to a process that binds it a moment later, so between the two nothing else
    may take it. The kernel hands out ports of its ephemeral range to every socket bound to port 0
    and to every outgoing connection, so a port chosen there can be gone by then; one chosen at
    random below that range is taken only by another caller of this function.
    """
    candidates = _ports_below_ephemeral()
    for port in _RANDOM.sample(candidates, min(len(candidates), 50)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_binary(name: str) -> str:
    """Path of an executable, or an error that says how to install it."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        raise GpuaasError(
            f"'{name}' is not installed; on Debian: apt-get install prometheus prometheus-pushgateway"
        )
    return path


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_openmetrics(
    samples: Iterable[tuple[str, dict[str, str], float, float]],
    types: dict[str, str] | None = None,
) -> str:
    """OpenMetrics text from ``(metric, labels, value, unix_seconds)`` tuples, ending in ``# EOF``.

    Samples of one metric must be contiguous in the output (an OpenMetrics rule promtool
    enforces), so they are grouped here whatever order they arrive in.
    """
    by_metric: dict[str, list[str]] = {}
    for name, labels, value, ts in samples:
        label_text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sorted(labels.items()))
        by_metric.setdefault(name, []).append(f"{name}{{{label_text}}} {value!r} {ts:.3f}")
    lines: list[str] = []
    for name, rows in by_metric.items():
        kind = (types or {}).get(name)
        if kind:
            lines.append(f"# TYPE {name} {kind}")
        lines.extend(rows)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


class Backfill:
    """One running ``promtool tsdb create-blocks-from openmetrics``; ``wait()`` raises if it failed.

    promtool 2.42 reads its whole input into memory and parses all of it once per 2-hour block, so
    a long history is given to it as one file per 2-hour window (``gpuaas.cluster._history``).
    """

    def __init__(self, source: Path, tsdb_dir: Path, promtool: str) -> None:
        self.source = source
        self._log = source.with_name(source.name + ".log")
        with self._log.open("wb") as log:  # a file, not a pipe: nobody reads a pipe while it runs
            self._proc = subprocess.Popen(
                [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb_dir)],
                stdout=log, stderr=subprocess.STDOUT)

    def wait(self) -> None:
        try:
            if self._proc.wait() != 0:
                tail = self._log.read_text(errors="replace").strip()[-800:]
                raise GpuaasError(f"promtool could not backfill {self.source}: {tail}")
        finally:
            self._log.unlink(missing_ok=True)

    def kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._log.unlink(missing_ok=True)


_PORT_TRIES = 3


class _PortTaken(GpuaasError):
    """Prometheus could not listen: something took its port between the choice and the start."""


PID_FILE = "prometheus.pid"


def stop_orphan(data_dir: Path) -> None:
    """Stop the server an earlier owner of ``data_dir`` left running. It runs in a session of its own, so an owner
    killed outright (``kill -9`` of ``gpuaas cluster up``) takes no signal to it, and it would keep its port and
    memory, writing beside the next one. Only a live process whose command line names this directory's TSDB is
    stopped: a pid since given to anything else is left alone. Call it before removing ``data_dir``."""
    try:
        pid = int((data_dir / PID_FILE).read_text(encoding="utf-8").strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return
    if f"--storage.tsdb.path={data_dir / 'tsdb'}".encode() not in cmdline:
        return
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.1)
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class PrometheusServer:
    """One Prometheus process with its own TSDB directory, started and stopped by us."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        scrape_targets: Sequence[str] = (),
        scrape_interval: str = "15s",
        retention: str = "60d",
        extra_scrape_configs: Sequence[dict[str, object]] = (),
        rule_files: Sequence[Path] = (),
        evaluation_interval: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self._port_is_ours = port is None  # another port may be tried when this one is taken before the start
        self.scrape_targets = list(scrape_targets)
        self.scrape_interval = scrape_interval
        self.retention = retention
        self.extra_scrape_configs = list(extra_scrape_configs)  # e.g. Kueue's HTTPS /metrics with a token
        self.rule_files = [Path(p).resolve() for p in rule_files]  # e.g. the tenant rules generated from a policy
        self.evaluation_interval = evaluation_interval  # None: Prometheus' own (1m)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path = self.data_dir / "prometheus.log"
        self._log_start = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tsdb_dir(self) -> Path:
        return self.data_dir / "tsdb"

    def backfill(self, openmetrics: str | Path) -> None:
        """Turn OpenMetrics text (or a file of it) into TSDB blocks; call before ``start``."""
        promtool = require_binary("promtool")
        self.tsdb_dir.mkdir(parents=True, exist_ok=True)
        if isinstance(openmetrics, Path):
            source = openmetrics
            cleanup = None
        else:
            handle = tempfile.NamedTemporaryFile("w", suffix=".om", dir=self.data_dir, delete=False)
            with handle:
                handle.write(openmetrics)
            source = cleanup = Path(handle.name)
        try:
            self.start_backfill(source, promtool).wait()
        finally:
            if cleanup is not None:
                cleanup.unlink(missing_ok=True)

    def start_backfill(self, source: Path, promtool: str | None = None) -> Backfill:
        """Start ``promtool`` on one OpenMetrics file, for a caller that writes the next one meanwhile."""
        self.tsdb_dir.mkdir(parents=True, exist_ok=True)
        return Backfill(source, self.tsdb_dir, promtool or require_binary("promtool"))

    def _write_config(self) -> Path:
        config: dict[str, object] = {"global": {"scrape_interval": self.scrape_interval}}
        if self.evaluation_interval:
            config["global"] = {"scrape_interval": self.scrape_interval, "evaluation_interval": self.evaluation_interval}
        if self.scrape_targets:
            config["scrape_configs"] = [
                {
                    "job_name": "gpuaas-embedded",
                    "honor_labels": True,
                    "honor_timestamps": True,
                    "static_configs": [{"targets": self.scrape_targets}],
                }
            ]
        if self.extra_scrape_configs:
            scrape = config.setdefault("scrape_configs", [])
            assert isinstance(scrape, list)
            scrape.extend(self.extra_scrape_configs)
        if self.rule_files:
            config["rule_files"] = [str(p) for p in self.rule_files]
        path = self.data_dir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    def start(self, timeout: float = 60) -> None:
        """Start the server and wait until ``/-/ready`` answers.

        A port this server chose itself can be taken between the choice and the start; then it
        starts again on another, a few times. A port the caller gave is the caller's to mend.
        """
        for _ in range(_PORT_TRIES - 1):
            try:
                return self._start_once(timeout)
            except _PortTaken:
                if not self._port_is_ours:
                    raise
                self.port = free_port()
        self._start_once(timeout)

    @property
    def _pid_path(self) -> Path:
        return self.data_dir / PID_FILE

    def _start_once(self, timeout: float) -> None:
        binary = require_binary("prometheus")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.tsdb_dir.mkdir(parents=True, exist_ok=True)
        stop_orphan(self.data_dir)
        config = self._write_config()
        self._log_start = self._log_path.stat().st_size if self._log_path.exists() else 0
        log = self._log_path.open("ab")
        self._proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.tsdb_dir}",
                f"--storage.tsdb.retention.time={self.retention}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-remote-write-receiver",
                "--web.enable-lifecycle",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self._pid_path.write_text(f"{self._proc.pid}\n", encoding="utf-8")
        try:
            self._wait_ready(self._proc, timeout)
        except BaseException:
            # Whatever interrupts the wait (a timeout, Ctrl-C), the child must not outlive us:
            # it runs in its own session, so no terminal signal reaches it.
            self.stop()
            raise

    def _wait_ready(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                message = f"prometheus exited with {proc.returncode}: {self._log_tail()}"
                if "address already in use" in self._log_since_start():
                    raise _PortTaken(message)
                raise GpuaasError(message)
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise GpuaasError(f"prometheus did not become ready within {timeout:.0f}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            return self._log_path.read_text(errors="replace")[-800:]
        except OSError:
            return "(no log)"

    def _log_since_start(self) -> str:
        try:
            with self._log_path.open("rb") as log:
                log.seek(self._log_start)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        self._pid_path.unlink(missing_ok=True)
        if proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
