"""Rows and markdown for a capacity result: the ``gpuaas capacity``/``loadtest`` tables and the flow's artifact. Pure."""

from __future__ import annotations

from typing import Any

from gpuaas.policies.cost import CapacityResult

__all__ = ["capacity_markdown", "capacity_summary_rows", "step_rows"]


def _num(value: float | None, fmt: str = "{:.3g}") -> str:
    return "-" if value is None else fmt.format(value)


def step_rows(result: CapacityResult) -> list[dict[str, Any]]:
    """One row per measured rate, lowest first, with its verdict."""
    return [
        {
            "rate rps": f"{s.rate_rps:g}",
            "replicas": f"{s.replicas:g}",
            "GPUs": f"{s.gpus:g}",
            f"latency {result.slo_quantile} s": _num(s.latency_s),
            "quality": _num(s.quality),
            "counted": "yes" if s.counted else "no",
            "verdict": s.reason,
        }
        for s in result.steps
    ]


def capacity_summary_rows(result: CapacityResult) -> list[dict[str, Any]]:
    """The answer as label/value rows."""
    rows = [
        ("SLO", f"{result.slo_quantile} <= {result.slo_seconds:g} s"
         + (f", quality >= {result.min_quality:g}" if result.min_quality is not None else "")),
        ("sustainable rate (rps)", _num(result.sustainable_rate_rps, "{:g}")),
        ("per replica (rps)", _num(result.per_replica_rps, "{:.4g}")),
        ("per GPU (rps)", _num(result.per_gpu_rps, "{:.4g}")),
        ("first rate that failed (rps)", _num(result.knee_rate_rps, "{:g}")),
    ]
    if result.forecast_rps is not None:
        rows += [("forecast (rps)", f"{result.forecast_rps:g}"),
                 ("replicas needed", _num(result.replicas_needed, "{}")),
                 ("GPUs needed", _num(result.gpus_needed, "{}"))]
    rows.append(("why", result.reason))
    return [{"": k, "value": v} for k, v in rows]


def capacity_markdown(result: CapacityResult, title: str = "Sustainable capacity") -> str:
    lines = [f"## {title}", "", "| | value |", "|---|---|"]
    lines += [f"| {r['']} | {r['value']} |" for r in capacity_summary_rows(result)]
    steps = step_rows(result)
    if steps:
        lines += ["", "| " + " | ".join(steps[0]) + " |", "|" + "---|" * len(steps[0])]
        lines += ["| " + " | ".join(str(v) for v in r.values()) + " |" for r in steps]
    return "\n".join(lines) + "\n"
