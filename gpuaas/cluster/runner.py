"""``EmbeddedCluster``: the API server, Kueue, a real Prometheus and OpenCost, started together.

Start-up order: the fleet is installed and ``history`` is replayed at full speed on a paused
clock (60 s steps), streaming the samples to an OpenMetrics file that ``promtool`` turns into
TSDB blocks; then the servers start and the clock runs.

Live samples reach Prometheus by **scraping** a loopback ``/metrics`` endpoint that serves the
simulation's latest step with explicit timestamps (sim time), under ``honor_timestamps``.
Scraping was chosen over remote write because it needs nothing but the text format (remote
write needs protobuf + snappy), it is how dcgm-exporter, Kueue, vLLM and OpenCost are
collected in production, and a target that stops answering shows up in Prometheus as ``up == 0``.

**Which clock stamps live samples.** Under a ``SimClock`` (``gpuaas cluster up``) each live
step is stamped with the *wall-clock* instant it was computed, not its sim time. With
``--speed`` > 1 sim time runs ahead of the wall clock (and behind it with ``--speed`` < 1), and
flows query Prometheus at wall-clock ``now``: sim-stamped samples would lie in the future and a
``[15m]`` window would miss them. Wall stamps keep the newest state at ``now``; a simulated
hour then fits in 60/speed wall minutes of series, so counters' ``rate()`` is per wall second
(``speed`` times the simulated rate). The history is backfilled in sim time, which equals wall
time up to the start of the live clock, and live stamps are always after it: Prometheus refuses
samples older than its newest block. Object timestamps (``creationTimestamp``, Kueue
conditions) and OpenCost windows stay in sim time, so with ``--speed`` > 1 they run ahead of
the wall clock. Under a ``ManualClock`` (tests) samples keep their sim time, so a stepped run
is deterministic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from gpuaas.cluster._history import backfill_history, history_steps, thin
from gpuaas.cluster.apiserver import ApiServer, ObjectStore, RBACRules
from gpuaas.cluster.clock import MAX_HISTORY, Clock, SimClock
from gpuaas.cluster.kueue import KueueController
from gpuaas.cluster.metrics_server import MetricsServer
from gpuaas.cluster.opencost import OpenCostServer, fleet_nodes
from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.cluster.scenario import Scenario
from gpuaas.cluster.serving import ServingEndpoints
from gpuaas.cluster.simulation import Simulation
from gpuaas.cluster.telemetry import Sample
from gpuaas.errors import PermanentError

__all__ = ["EmbeddedCluster", "MetricsEndpoint", "SimulationFailed", "StartCancelled"]


class MetricsEndpoint(MetricsServer):
    """The simulation's latest samples, for Prometheus to scrape."""

    def __init__(self, sim: Simulation, lock: threading.Lock) -> None:
        super().__init__(self.samples, lock)
        self._sim = sim
        self.wall_stamp: float | None = None

    def samples(self) -> list[Sample]:
        """The latest step, stamped ``wall_stamp`` once the live loop sets it (see the module doc)."""
        if self.wall_stamp is None:
            return self._sim.current
        return [(name, labels, value, self.wall_stamp) for name, labels, value, _ in self._sim.current]


class SimulationFailed(PermanentError):
    """The live simulation raised: the cluster no longer moves, so it is stopped rather than served frozen."""


class StartCancelled(Exception):  # noqa: N818 - it is not an error: the operator asked for it
    """``cancel()`` was called while the cluster was starting; what had started is stopped."""


class EmbeddedCluster:
    """Everything on loopback; a context manager that stops what it started, in reverse order."""

    def __init__(self, scenario: Scenario, data_dir: Path, *, seed: int = 0,
                 history: timedelta = timedelta(hours=6), clock: Clock | None = None, speed: float = 1.0,
                 api_port: int = 0, opencost_port: int = 0, prometheus_port: int | None = None,
                 kubeconfig: Path | None = None, live_interval: float = 2.0, rbac: RBACRules | None = None,
                 progress: Any = None, disabled_api_versions: Collection[str] = (), token: str | None = None,
                 coarse_step: timedelta | None = None, fine_history: timedelta = timedelta(hours=1),
                 scrape_interval: timedelta = timedelta(seconds=5)) -> None:
        self.scenario = scenario
        self.data_dir = Path(data_dir)
        self.seed = seed
        self.history = history
        self.step = scenario.telemetry.step
        # History older than fine_history is replayed at coarse_step (gpuaas.cluster._history); None: all fine.
        self.coarse_step, self.fine_history = coarse_step, fine_history
        self.clock: Clock = clock or SimClock(datetime.now(UTC) - history, speed, paused=True)
        self.lock = threading.Lock()
        self.store = ObjectStore(self.clock.now)
        self.kueue = KueueController(self.store, self.clock.now)
        self.sim = Simulation(scenario, self.store, self.kueue, self.clock, seed)
        # disabled_api_versions: e.g. {"kueue.x-k8s.io/v1beta2"}, a cluster with an older Kueue.
        self.api = ApiServer(self.store, port=api_port, rbac=rbac, visibility=self.kueue.pending_workloads,
                             disabled_versions=disabled_api_versions, token=token)  # token: 401 without it
        self.opencost = OpenCostServer(self.sim.ledger, self.clock.now, self.lock, port=opencost_port,
                                       nodes=fleet_nodes(scenario, self.sim.epoch))  # priced: it answers __idle__
        self.metrics = MetricsEndpoint(self.sim, self.lock)
        self.serving = ServingEndpoints(scenario)  # OpenAI endpoints per InferenceService (gpuaas.cluster.serving)
        self.prometheus = PrometheusServer(self.data_dir / "prometheus", port=prometheus_port,
                                           scrape_targets=[self.metrics.target, *self.serving.targets],
                                           scrape_interval=f"{int(scrape_interval.total_seconds())}s",
                                           retention=f"{MAX_HISTORY.days}d")
        self.kubeconfig = Path(kubeconfig) if kubeconfig else self.data_dir / "kubeconfig"
        self._live_interval = live_interval
        self._progress = progress or (lambda message: None)
        self._stop = threading.Event()
        self._loop: threading.Thread | None = None
        self._failure: SimulationFailed | None = None
        self._started: list[Any] = []

    @property
    def prometheus_url(self) -> str:
        return self.prometheus.url

    @property
    def opencost_url(self) -> str:
        return self.opencost.url

    @property
    def api_url(self) -> str:
        return self.api.url

    def settings_env(self) -> dict[str, str]:
        """The ``GPUAAS_*`` settings that point gpuaas at this cluster (for ``--env-file`` and tests)."""
        return {
            "GPUAAS_KUBECONFIG": str(self.kubeconfig),
            "GPUAAS_PROMETHEUS_URL": self.prometheus_url,
            "GPUAAS_OPENCOST_URL": self.opencost_url,
            "GPUAAS_METRICS__SAMPLE_INTERVAL_SECONDS": f"{self.step.total_seconds():g}",
            **self.serving.env(),
        }

    # --- history -------------------------------------------------------------------------
    def _history_steps(self) -> Iterator[list[Sample]]:
        with self.lock:
            yield list(self.sim.tick())
        done = timedelta(0)
        for i, (dt, on_grid) in enumerate(history_steps(self.history, self.step, self.coarse_step, self.fine_history)):
            self._check_cancelled()
            with self.lock:
                samples = thin(list(self.sim.step(dt)), on_grid)
            yield samples
            done += dt
            if i % 30 == 29:
                self._progress(f"replaying history: {done} of {self.history}")

    def _backfill(self) -> None:
        self.kueue.attach()
        backfill_history(self._history_steps(), self.prometheus, self.data_dir, self._progress)

    # --- lifecycle -----------------------------------------------------------------------
    def start(self) -> EmbeddedCluster:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._backfill()
            self.serving.sync(self.kueue.gpu_assignments())
            for name, part in (("API server", self.api), ("OpenCost", self.opencost), ("metrics", self.metrics),
                               ("serving endpoints", self.serving), ("Prometheus", self.prometheus)):
                self._check_cancelled()
                self._progress(f"starting {name}")
                part.start()
                self._started.append(part)
            self.api.write_kubeconfig(self.kubeconfig)
            if isinstance(self.clock, SimClock):
                self.clock.resume()
            self._loop = threading.Thread(target=self._run_live, name="simulation", daemon=True)
            self._loop.start()
        except BaseException:
            self.stop()
            raise
        return self

    def cancel(self) -> None:
        """Ask a ``start()`` in progress to give up (signal-handler safe); ``stop()`` still follows."""
        self._stop.set()

    def _check_cancelled(self) -> None:
        if self._stop.is_set():
            raise StartCancelled("the embedded cluster was stopped while starting")

    def _run_live(self) -> None:
        """Keep the simulation up to the clock; a ManualClock only moves when a test moves it.

        What it raises ends it with ``failure`` set, which ``wait`` raises in the foreground (one line, and the
        cluster stopped), rather than a traceback from the thread and a cluster served frozen."""
        wall_stamps = isinstance(self.clock, SimClock)
        try:
            while not self._stop.wait(self._live_interval):
                with self.lock:
                    if self.clock.now() - self.sim.last >= timedelta(seconds=1):
                        self.sim.tick()
                    self.serving.sync(self.kueue.gpu_assignments())
                    if wall_stamps:  # the state holds until the next step: it is current now
                        self.metrics.wall_stamp = time.time()
        except Exception as exc:  # noqa: BLE001 - any of it ends the simulation; wait() says why
            self._failure = SimulationFailed(
                f"the simulation stopped at {self.sim.last:%Y-%m-%d %H:%M:%S} simulated time: "
                f"{type(exc).__name__}: {exc}")
            self._stop.set()

    @property
    def failure(self) -> SimulationFailed | None:
        """Why the live simulation stopped by itself; None while it runs (or once stopped on request)."""
        return self._failure

    def advance(self, dt: timedelta) -> list[Sample]:
        """Move a manual clock and the simulation by ``dt`` (tests)."""
        with self.lock:
            samples = self.sim.step(dt)
            self.serving.sync(self.kueue.gpu_assignments())
            return samples

    def stop(self) -> None:
        self._stop.set()
        if self._loop is not None:
            self._loop.join(timeout=10)
        while self._started:
            part = self._started.pop()
            try:
                part.stop()
            except Exception:  # noqa: BLE001 - keep stopping the rest
                pass

    def wait(self, stop: threading.Event) -> None:
        """Block until ``stop`` is set (the CLI's foreground loop); ``SimulationFailed`` if the simulation stops
        by itself meanwhile."""
        while not stop.wait(0.5):
            if self._failure is not None:
                raise self._failure

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
