"""A long history pull says how far it has got about ten times, not once per chunk.

A real Prometheus (backfilled with one GPU's hour) is read over 48 hours in one-hour chunks, as
``replay reclaim --from-prometheus --since 2d`` reads it: the progress lines are the first chunk, one per
tenth, and the last, each with the samples read so far.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pandas as pd

from gpuaas.cluster.prometheus import PrometheusServer
from gpuaas.idle_history import read_activity_history
from gpuaas.settings import GpuaasSettings
from tests.sources.helpers import NOW, Sample, series

Factory = Callable[[list[Sample]], PrometheusServer]


def test_a_pull_of_48_chunks_says_how_far_it_got_eleven_times(prometheus_factory: Factory) -> None:
    labels = {"gpu": "0", "UUID": "GPU-0", "Hostname": "n", "namespace": "team-a", "pod": "p"}
    server = prometheus_factory(series([("DCGM_FI_DEV_GPU_UTIL", labels, 0.0)], minutes=60))
    lines: list[str] = []
    links = pd.DataFrame({"namespace": ["team-a"], "pod": ["p"], "workload": ["team-a/w"], "gpus": [1.0]})
    reading = read_activity_history(GpuaasSettings(prometheus_url=server.url), NOW - timedelta(hours=48), NOW,
                                    links=links, thresholds_pct=[5.0], progress=lines.append)
    assert reading.queries >= 48
    said = [re.match(r"history chunk (\d+)/(\d+) \(up to [\d: -]+\): (\d+) series, ([\d,]+) workload samples so far$",
                     line) for line in lines]
    assert all(said), lines
    chunks = [int(m.group(1)) for m in said if m]
    assert chunks[0] == 1 and chunks[-1] == int(said[0].group(2)) >= 48 and len(chunks) == 11, lines  # type: ignore[union-attr]
    samples = [int(m.group(4).replace(",", "")) for m in said if m]
    assert samples == sorted(samples) and samples[-1] >= 55  # the hour of samples, counted once it is read
