"""How much of a report's window its data covers: the note that says so, whether a period is whole, and
which figures a row without any telemetry cannot have.

The reader (``gpuaas.sources.cost_window``) hands the span of the GPU telemetry in each period as
Prometheus' ``SourceStatus.details``: ``data_from`` (the first telemetry in the window),
``span_step_s`` (the resolution of the span) and ``covered_s:<period>`` (seconds from the period's
first to its last telemetry, one step included), and ``gpu_metrics`` (the metrics the telemetry is read
from, for a note that names them). Inputs built without them (by hand, in tests) say nothing about
coverage: every figure is then taken as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpuaas.phrases import DEFAULT_CURRENCY, zero_money

if TYPE_CHECKING:
    from gpuaas.models import CostInputs
    from gpuaas.policies.cost.report import CostReport

__all__ = ["COMPLETE_SHARE", "TELEMETRY_FIGURES", "Coverage", "blind", "comparison_note", "coverage_note",
           "covered_share", "data_short_s", "no_telemetry_line", "period_complete", "read_coverage",
           "unknown_without_telemetry"]

COMPLETE_SHARE = 0.9
"""A period whose data spans at least this share of its length is compared with the next one. A change
against a period that held 2 minutes of data would read +100,000 %; one whose telemetry started an hour
into a day (a restart, a short outage) still compares, off by at most a tenth, which a reader can see
in the previous period's figures."""

TELEMETRY_FIGURES = ("busy_gpu_hours", "productive_gpu_hours", "in_progress_gpu_hours", "idle_gpu_hours",
                     "active_gpu_hours", "waste_cost")
"""What only GPU telemetry can tell: unknown (None) for a row whose GPU-hours had none of it."""


@dataclass(frozen=True)
class Coverage:
    """The span of telemetry in a window, per period; None where the inputs do not say."""

    covered_s: float
    """Seconds of the window from each period's first to its last telemetry, summed."""
    per_period: dict[int, float]
    step_s: float
    """The resolution of the span: a shortfall under one step is no shortfall."""
    data_from: datetime | None
    metrics: str | None = None
    """The GPU metrics the telemetry was looked for in (``A or B``); None where the inputs do not say."""


def read_coverage(inputs: CostInputs) -> Coverage | None:
    """The telemetry span the reader recorded with Prometheus' status; None when it recorded none."""
    status = inputs.sources.get("prometheus")
    details = dict(status.details) if status is not None else {}
    if "span_step_s" not in details:
        return None
    per = {int(k.split(":", 1)[1]): float(v) for k, v in details.items() if k.startswith("covered_s:")}
    start = details.get("data_from")
    return Coverage(sum(per.values()), per, float(details["span_step_s"]),
                    datetime.fromisoformat(start) if start else None, details.get("gpu_metrics") or None)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds >= 3600 else f"{seconds / 60:,.0f} min"


def no_telemetry_line(metrics: str | None, window_s: float | None = None) -> str:
    """"no GPU telemetry in Prometheus (A or B) in the 6.0 h window": what the run lacks, naming where it
    looked, so that a reader can tell a renamed or missing exporter from a quiet fleet."""
    where = f"Prometheus ({metrics})" if metrics else "Prometheus"
    return f"no GPU telemetry in {where} in the {_hours(window_s) + ' ' if window_s else ''}window"


def coverage_note(cov: Coverage, window_s: float, currency: str = DEFAULT_CURRENCY) -> str | None:
    """"data covers 6.0 h of the 24.0 h window, from 2026-11-01 04:31 UTC ..." where the telemetry spans less
    than the window by a step or more; None where it spans all of it. ``currency``: the ISO 4217 code of the money."""
    if window_s - cov.covered_s < cov.step_s:
        return None
    if cov.data_from is None:
        # the costs and the outcomes come from other sources: only what the telemetry measures is unknown
        return (f"{no_telemetry_line(cov.metrics, window_s)}: busy, productive, in-progress, idle and active "
                "GPU-hours and the waste are unknown, not 0")
    return (f"data covers {_hours(cov.covered_s)} of the {_hours(window_s)} window, from "
            f"{cov.data_from:%Y-%m-%d %H:%M} UTC: the figures are those of that part, and a period without "
            f"telemetry shows no data, not {zero_money(currency)}")


def covered_share(report: CostReport) -> float | None:
    """The share of the window the report's data spans; None when the report does not say."""
    if report.covered_s is None or report.window_s <= 0:
        return None
    return min(report.covered_s / report.window_s, 1.0)


def blind(row: Any) -> bool:
    """Whether a row held GPU-hours and none of them had telemetry (all unknown): its busy and idle hours are
    then not 0 but unknown, and so is its waste."""
    allocated = float(row["allocated_gpu_hours"] or 0.0)
    return allocated > 0 and allocated - float(row["unknown_gpu_hours"] or 0.0) <= 1e-9 * allocated


def unknown_without_telemetry(figures: dict[str, Any], row: Any, what: str, notes: list[str],
                              window_blind: bool = False) -> None:
    """``figures``' ``TELEMETRY_FIGURES`` set to None where ``row`` is ``blind``, with a note naming ``what``; with
    ``window_blind`` (no telemetry anywhere in the window) every row's, without a note: the window's says it,
    and a row that held no GPU-hours by the cost source's account is no better known without telemetry."""
    if not window_blind and not blind(row):
        return
    figures.update(dict.fromkeys([k for k in TELEMETRY_FIGURES if k in figures], None))
    if not window_blind:
        notes.append(f"{what}: no GPU telemetry for any of its GPU-hours: busy, productive, idle and active "
                     "GPU-hours and the waste are unknown, not 0")


def data_short_s(report: CostReport) -> float | None:
    """Seconds of the window the report's telemetry spans, where that is short of the window by a step or more
    (the headline then states them, not the window asked for); None where it spans the window, spans none of
    it (no telemetry: a figure of its own), or the report does not say."""
    if report.covered_s is None or report.span_step_s is None or report.covered_s <= 0:
        return None
    return report.covered_s if report.window_s - report.covered_s >= report.span_step_s else None


def period_complete(report: CostReport) -> bool:
    """Whether a report's data spans (nearly) all of its window (``COMPLETE_SHARE``), so that a change against
    it means something. A report that does not say how much it spans (built by hand, or from an older JSON
    document) is judged on its first period: complete when that period has cost or outcomes."""
    share = covered_share(report)
    if share is not None:
        return share >= COMPLETE_SHARE
    first = [d for d in report.daily if d["day"] == 0]
    return any((d.get("total_cost") or 0) > 0 or (d.get("verified_outcomes") or 0) > 0 for d in first)


def comparison_note(previous: CostReport) -> str | None:
    """Why the report is not compared with ``previous``; None when it is (``period_complete``)."""
    if period_complete(previous):
        return None
    share = covered_share(previous)
    held = f"data for {100 * share:.0f} % of its length" if share is not None else "no data from its start"
    return (f"no change against the previous period ({previous.start:%Y-%m-%d %H:%M} – {previous.end:%Y-%m-%d %H:%M}"
            f" UTC): it holds {held}, under the {100 * COMPLETE_SHARE:.0f} % a comparison needs (a percentage "
            "against part of a period would mislead)")
