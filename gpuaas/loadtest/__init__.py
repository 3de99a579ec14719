"""Load tests of OpenAI-compatible endpoints: open-loop Poisson sweeps and what they leave behind.

The library part of the ``load_test`` flow and ``gpuaas loadtest``: a validated config and the
loopback rule (``_config``), the seeded schedule (``_schedule``, pure), the async httpx client
(``_client``), the sweep and its rows (``_sweep``), files and plot (``_outputs``) and the
record in the store (``_record``), and a service's measured capacity from its sweep file or latest load
test (``_capacity``). The capacity rule itself is :mod:`gpuaas.policies.cost.capacity`.
"""

from __future__ import annotations

from gpuaas.loadtest._capacity import serving_capacity, sweep_problem
from gpuaas.loadtest._client import RequestResult, client_for, run_step
from gpuaas.loadtest._config import MAX_REQUEST_TOKENS, LoadTestConfig, base_url, is_loopback, parse_rates
from gpuaas.loadtest._outputs import json_safe, plot_sweep, summary, write_outputs
from gpuaas.loadtest._record import FLOW as LOAD_TEST_FLOW
from gpuaas.loadtest._record import latest_load_test, record_load_test
from gpuaas.loadtest._schedule import poisson_schedule
from gpuaas.loadtest._sweep import SWEEP_COLUMNS, SweepRun, run_sweep, step_passes, summarize_step

__all__ = [
    "LOAD_TEST_FLOW",
    "MAX_REQUEST_TOKENS",
    "SWEEP_COLUMNS",
    "LoadTestConfig",
    "RequestResult",
    "SweepRun",
    "base_url",
    "client_for",
    "is_loopback",
    "json_safe",
    "latest_load_test",
    "parse_rates",
    "plot_sweep",
    "poisson_schedule",
    "record_load_test",
    "run_step",
    "run_sweep",
    "serving_capacity",
    "sweep_problem",
    "step_passes",
    "summarize_step",
    "summary",
    "write_outputs",
]
