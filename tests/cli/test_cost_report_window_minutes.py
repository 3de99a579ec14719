"""``gpuaas cost-report --window`` under a day is whole minutes: OpenCost's ``step`` is sent in minutes, and OpenCost
does not cut its last step at the window's end, so ``--window 100s`` sent with ``step=1m`` was charged 120 s.

Such a window ends the command before any source is read (exit 2, one line naming the flag:
``tests/cli/test_cost_report_window.py``); a window of whole minutes is sent with a step of exactly its length.
"""

from __future__ import annotations

import pytest

from gpuaas.errors import ConfigError
from gpuaas.sources.cost_window import report_periods

HELP = "; see gpuaas cost-report --help"


def test_whole_minutes_and_whole_days_are_one_step_each() -> None:
    assert report_periods(120.0, 15.0) == (1, 120.0)
    assert report_periods(5400.0, 15.0) == (1, 5400.0)
    assert report_periods(86400.0, 15.0) == (1, 86400.0)
    with pytest.raises(ConfigError, match="whole minutes, not 100 s"):
        report_periods(100.0, 15.0)

