"""A service's money per period adds up to its money over the window, to the cent.

Why: each period's cost rounded on its own, three days of $10.004 print $10.00, $10.00 and $10.00 under a
window's $30.01: a reviewer adding the daily rows would be a cent short of the service's row.
"""

from __future__ import annotations

from datetime import timedelta

import pandas as pd

from gpuaas.models import COST_COLS, GPU_COLS, SERVING_COLS, CostInputs
from gpuaas.policies.cost import build_cost_report
from tests.policies.test_cost_report import END, POLICY

START = END - timedelta(days=3)


def _three_days(chat_per_day: float, etl_per_day: float) -> CostInputs:
    """chat's pod costs ``chat_per_day`` a day (GPU, plus $0.5 of CPU and RAM), etl's head ``etl_per_day``, for
    three days; chat served 100 requests a day, all within its SLO."""
    gpu = pd.DataFrame([(ns, pod, d, 10.0, 8.0, 3.0) for d in range(3)
                        for ns, pod in (("a", "chat-predictor-0"), ("b", "etl-x-head"))], columns=GPU_COLS)
    cost = pd.DataFrame([("a", "deployment", "chat-predictor", "chat-predictor-0", d, 10.0, chat_per_day,
                          chat_per_day + 0.5) for d in range(3)]
                        + [("b", "raycluster", "etl-x", "etl-x-head", d, 1.0, etl_per_day, etl_per_day)
                           for d in range(3)], columns=COST_COLS)
    serving = pd.DataFrame([row for d in range(3) for row in (("a", "m", d, "requests", "stop", "", 100.0),
                                                               ("a", "m", d, "latency_bucket", "", "2.0", 100.0),
                                                               ("a", "m", d, "latency_bucket", "", "+Inf", 100.0))],
                           columns=SERVING_COLS)
    return CostInputs(START, END, 3, gpu, cost, serving, [])


def test_the_periods_money_adds_up_to_the_services() -> None:
    report = build_cost_report(_three_days(10.004, 1.0067), POLICY)
    for svc in report.services:
        days = [d for d in report.daily if d["service"] == svc["service"]]
        assert len(days) == 3
        for column in ("gpu_cost", "total_cost"):
            assert round(sum(d[column] for d in days) * 100) == round(svc[column] * 100), (svc["service"], column)
            # each period within a cent of its own figure
            assert all(abs(d[column] - (10.004 if svc["service"] == "chat" else 1.0067)
                           - (0.5 if column == "total_cost" and svc["service"] == "chat" else 0.0)) <= 0.01
                       for d in days if svc["service"] != "quiet")
    chat = [d for d in report.daily if d["service"] == "chat"]
    assert [d["gpu_cost"] for d in chat] == [10.01, 10.0, 10.0]  # $30.01 shared out: the first day's remainder
    assert [d["cost_per_outcome"] for d in chat] == [round(d["total_cost"] / 100, 6) for d in chat]
