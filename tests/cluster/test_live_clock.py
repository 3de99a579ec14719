"""``--speed`` > 1: simulated time runs ahead of the wall clock, yet flows see the newest state.

Flows query Prometheus at wall-clock ``now``. At speed 3600 the sim clock is hours ahead after
a few seconds, so sim-stamped live samples would sit in Prometheus's future and an instant
query at ``now`` would find only the backfilled history. The runner stamps live samples on the
wall clock instead; this checks it through a real Prometheus scrape.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_api_client import PrometheusConnect

from gpuaas.cluster.clock import SimClock
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.scenario import parse_scenario
from tests.scenarios import HAND_CHECKED

pytestmark = [pytest.mark.integration]


def test_fast_sim_clock_live_samples_are_at_wall_clock_now(tmp_path: Path) -> None:
    scenario = parse_scenario(HAND_CHECKED)
    with EmbeddedCluster(scenario, tmp_path, history=timedelta(minutes=10), speed=3600,
                         live_interval=0.2) as cluster:
        live_from = time.time()
        assert isinstance(cluster.clock, SimClock) and not cluster.clock.paused
        prom = PrometheusConnect(url=cluster.prometheus_url, disable_ssl=True)
        live: dict[str, float] = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not live:
            result = prom.custom_query("timestamp(DCGM_FI_PROF_GR_ENGINE_ACTIVE)", params={"time": time.time()})
            live = {(s["metric"]["Hostname"], s["metric"]["gpu"]): float(s["value"][1]) for s in result if float(s["value"][1]) >= live_from}
            time.sleep(0.5)
        # Live samples, not only the backfilled history, answer at wall-clock now...
        assert live and max(live.values()) <= time.time() + 1
        # ...while the simulation itself is far ahead of the wall clock...
        assert cluster.clock.now() - datetime.now(UTC) > timedelta(hours=1)
        assert cluster.sim.last - datetime.fromtimestamp(live_from, UTC) > timedelta(hours=1)
        # ...and they are the simulation's current GPU series, wall-stamped.
        served = [(labels, ts) for name, labels, _, ts in cluster.metrics.samples()
                  if name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
        assert served and all(ts >= live_from for _, ts in served)
        assert set(live) <= {(labels["Hostname"], labels["gpu"]) for labels, _ in served}
