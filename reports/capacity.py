"""Rows and markdown for a capacity result: the ``gpuaas capacity``/``loadtest`` tables and the flow's artifact. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuaas.policies.cost import CapacityResult

__all__ = ["capacity_headline", "capacity_markdown", "capacity_summary_rows", "load_test_headline", "step_rows"]


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


def _slo(capacity: Mapping[str, Any]) -> str:
    """``p95 <= 1 s``, ``and quality >= 0.99`` added where a quality floor was set."""
    floor = capacity.get("min_quality")
    return (f"{capacity['slo_quantile']} <= {capacity['slo_seconds']:g} s"
            + (f" and quality >= {floor:g}" if floor is not None else ""))


def _answer(capacity: Mapping[str, Any], then: str, retry: str) -> str:
    """What the sweep sustains and where it stopped, ending with the next step: ``retry`` when no rate held,
    ``then`` (sizing a demand) when a rate failed and no forecast was given.

    ``capacity``: ``CapacityResult.to_dict()``, as both commands print it in JSON (``steps`` lowest rate first)."""
    if not capacity["met"]:
        steps = capacity.get("steps") or []
        why = f" ({steps[0]['reason']})" if steps and steps[0].get("reason") else ""
        return (f"no sustainable rate: the lowest measured rate, {capacity['knee_rate_rps']:g} rps, already misses "
                f"{_slo(capacity)}{why}; {retry}")
    answer = (f"{capacity['sustainable_rate_rps']:g} rps sustained at {_slo(capacity)} "
              f"({capacity['per_replica_rps']:.4g} per replica, {capacity['per_gpu_rps']:.4g} per GPU)")
    if capacity["knee_rate_rps"] is None:
        n = len(capacity.get("steps") or [])
        held = "the one measured rate held" if n == 1 else f"every one of the {_rates(capacity)} held"
        answer += f", {held}: the limit is higher, measure faster rates"
    elif _client_limited_knee(capacity):  # the climb stopped at the load generator: no server limit was measured
        answer += (f"; at {capacity['knee_rate_rps']:g} rps the load generator could not keep its schedule (a client "
                   "limit, not the server's): the server's own limit is not measured")
    else:
        answer += f"; {capacity['knee_rate_rps']:g} rps was the first rate to miss it"
    if capacity.get("forecast_rps") is not None:
        return (answer + f"; {capacity['forecast_rps']:g} rps of demand needs {capacity['replicas_needed']} replicas "
                f"({capacity['gpus_needed']} GPUs)")
    return answer + (f"; {then}" if then and capacity["knee_rate_rps"] is not None else "")


def _client_limited_knee(capacity: Mapping[str, Any]) -> bool:
    """Whether the step that stopped the climb was one where the client, not the server, fell behind."""
    return any(s.get("client_limited") and s.get("rate_rps") == capacity["knee_rate_rps"]
               for s in capacity.get("steps") or [])


def _rates(capacity: Mapping[str, Any]) -> str:
    """``5 measured rates`` (``1 measured rate``): the sweep's steps, as the headline counts them."""
    n = len(capacity.get("steps") or [])
    return f"{n} measured rate{'' if n == 1 else 's'}"


def capacity_headline(capacity: Mapping[str, Any]) -> str:
    """``gpuaas capacity``'s first line: the sustainable rate and what stopped the climb, in one sentence.

    Why here: the table lists every rate; the reader wants the answer, and the step after it (the replicas a
    demand needs, ``--forecast-rps``), first."""
    answer = _answer(capacity, "the replicas a demand needs: the same command with --forecast-rps RPS",
                     "measure lower rates or relax --slo-seconds")
    return f"Capacity: {answer}."


def load_test_headline(result: Mapping[str, Any]) -> str:
    """``gpuaas loadtest``'s first line: how much load was sent and what the endpoint sustained.

    ``result``: the load_test flow's return value (``LoadTestResult.to_json()``); the next step sizes a demand
    from the sweep it wrote, with ``gpuaas capacity``."""
    capacity = result["capacity"]
    sweep = (result.get("files") or {}).get("sweep")
    floor = capacity.get("min_quality")
    then = (f"the replicas a demand needs: gpuaas capacity {sweep} --slo-quantile {capacity['slo_quantile']} "
            f"--slo-seconds {capacity['slo_seconds']:g}" + (f" --min-quality {floor:g}" if floor is not None else "")
            + " --forecast-rps RPS") if sweep else ""
    stopped = f", {result['stopped']}" if result.get("stopped") else ""
    if result.get("unreached"):  # the sweep measured the URL, not a server: that leads, before any latency
        return (f"Load test: none of {result['requests']:,} requests at {_rates(capacity)} reached the server "
                f"({result['unreached']}){stopped}; is it up at {result.get('url') or 'the --url given'}?")
    answer = _answer(capacity, then, "try lower --rates or relax --slo-seconds")
    return f"Load test: {result['requests']:,} requests at {_rates(capacity)}{stopped}; {answer}."
