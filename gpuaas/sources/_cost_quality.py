"""The requests a service served while its quality metric held, from the quality gate's step sums.

``serving_window_query`` answers, per series key (namespace, model, pod where split, finished reason) and
period, ``quality_ok:<metric>``: the requests of the 5-minute steps where quality held, and
``quality_span:<metric>``: the requests of all those steps. The steps partition the period, but each
step's ``increase`` is extrapolated on its own, and a series that lived for less than a step's samples is in
no step: so the report takes the *share* of the steps' requests that quality held for, and applies it to
the period's own ``requests``. Verified requests then never exceed requests, and add up with them.

Requests of a key that fall in no step (``quality_span`` absent or 0: a series with under two samples in
every step, e.g. a pod that lived a minute across a step's edge) cannot be judged: they are not counted as
served while quality held, and a note says how many. A smaller figure that says so, never a larger one.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from gpuaas.policy import ServiceOutcome

__all__ = ["OK", "SPAN", "requests_while_held"]

OK, SPAN = "quality_ok:", "quality_span:"
_KEYS = ["namespace", "model_name", "pod", "day", "finished_reason"]


def _gated(services: Sequence[ServiceOutcome], metric: str) -> set[tuple[str, str]]:
    """The (namespace, model) pairs the query gates on ``metric``: each service's, and its model's series
    scraped without a namespace (as ``_thresholds`` writes them)."""
    return {(ns, s.model_name or "") for s in services if s.quality is not None and s.quality.metric == metric
            for ns in (s.namespace, "")}


def requests_while_held(serving: pd.DataFrame, services: Sequence[ServiceOutcome],
                        notes: list[str]) -> pd.DataFrame:
    """``serving`` with each ``quality_ok:<metric>`` row the period's requests x the share of its steps' requests
    that quality held for, per key; the ``quality_span:`` rows are dropped. Unjudged requests are noted."""
    metrics = sorted({s.quality.metric for s in services if s.quality is not None})
    if serving.empty or not metrics:
        return serving
    stat = serving["stat"].astype(str)
    is_ok, is_span = stat.str.startswith(OK), stat.str.startswith(SPAN)
    requests = serving[stat == "requests"].groupby(_KEYS)["value"].sum()
    rows = []
    for metric in metrics:
        ok = serving[stat == OK + metric].groupby(_KEYS)["value"].sum().to_dict()
        span = serving[stat == SPAN + metric].groupby(_KEYS)["value"].sum().to_dict()
        gated = _gated(services, metric)
        unjudged: dict[tuple[str, str], float] = {}
        for key, served in requests.items():
            namespace, model, pod, day, reason = key
            if (namespace, model) not in gated:
                continue
            steps = span.get(key, 0.0)
            if steps > 0:
                held = served * min(ok.get(key, 0.0) / steps, 1.0)
            else:
                held = 0.0
                if served > 0:
                    unjudged[(namespace, model)] = unjudged.get((namespace, model), 0.0) + served
            rows.append({"namespace": namespace, "model_name": model, "pod": pod, "day": day,
                         "finished_reason": reason, "stat": OK + metric, "le": "", "value": held, "service": "", "hist": ""})
        for (namespace, model), served in sorted(unjudged.items()):
            notes.append(f"quality {metric}: {served:,.1f} requests of {namespace or '(no namespace)'}/{model} fall in "
                         "no 5-minute quality step with two samples (a series shorter-lived than a step): not "
                         "counted as served while quality held")
    kept = serving[~(is_ok | is_span)]
    return pd.concat([kept, pd.DataFrame(rows, columns=serving.columns)], ignore_index=True) if rows else kept
