"""Tell a person when a flow run failed or ended degraded: a JSON POST to ``GPUAAS_NOTIFY_WEBHOOK_URL``.

For teams without Prefect automations (``deployments/prefect/automations.yaml`` is the Prefect
way). Flow hooks, so they fire wherever the flow runs (worker, CLI, ``serve``); the webhook URL
comes from the environment or the Prefect Secret block ``gpuaas-notify-webhook-url`` and is
never logged. A notification that cannot be delivered is a warning: the run's own results (the
snapshot, the audit rows) are already stored and stay.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import httpx

from gpuaas.models import Outcome

__all__ = ["NOTIFY_HOOKS", "WEBHOOK_BLOCK", "WEBHOOK_ENV", "degraded_reason", "notification", "notify_completion",
           "notify_failure"]

WEBHOOK_ENV = "GPUAAS_NOTIFY_WEBHOOK_URL"
WEBHOOK_BLOCK = "gpuaas-notify-webhook-url"
logger = logging.getLogger("gpuaas.notify")


def degraded_reason(result: Any) -> str | None:
    """Why a completed run still needs a person (pure): a degraded snapshot, writes refused, failed actions."""
    if not isinstance(result, dict):
        return None
    reasons = []
    degraded = result.get("degraded")
    if isinstance(degraded, str) and degraded:
        reasons.append(f"degraded (snapshot {result.get('snapshot_id')}): {degraded}")
    elif degraded:  # a failed source, or none (a blind run: no GPU telemetry): then the run's headline says why
        failed = sorted(result.get("source_errors") or {})
        run = f"snapshot {result['snapshot_id']}" if result.get("snapshot_id") is not None else "run"
        why = f"{', '.join(failed)} failed" if failed else str(result.get("headline") or "see the run")
        reasons.append(f"degraded {run}: {why}")
    if result.get("writes_busy"):
        reasons.append(str(result["writes_busy"]))
    failed_actions = [d for d in result.get("decisions") or [] if d.get("result") in (Outcome.failed, Outcome.unknown)]
    if failed_actions:
        names = ", ".join(f"{d['kind']} {d['namespace']}/{d['name']}" for d in failed_actions[:5])
        reasons.append(f"{len(failed_actions)} actions failed ({names})")
    return "; ".join(reasons) or None


def _webhook_url() -> str | None:
    url = os.environ.get(WEBHOOK_ENV, "").strip()
    if url:
        return url
    from gpuaas.settings import secret_block

    return (secret_block(WEBHOOK_BLOCK) or "").strip() or None


def _run_link(flow_run_id: Any) -> str | None:
    from prefect.settings import PREFECT_UI_URL

    base = PREFECT_UI_URL.value()
    return f"{str(base).rstrip('/')}/runs/flow-run/{flow_run_id}" if base else None


def notification(flow_name: str, flow_run: Any, status: str, what: str) -> dict[str, Any]:
    """The JSON body (stable keys: scripts and chat bridges read them)."""
    return {"source": "gpuaas", "flow": flow_name, "flow_run": getattr(flow_run, "name", None),
            "flow_run_id": str(getattr(flow_run, "id", "")), "status": status, "what": what,
            "url": _run_link(getattr(flow_run, "id", ""))}


def _send(body: dict[str, Any]) -> None:
    url = _webhook_url()
    if not url:
        return
    try:
        httpx.post(url, content=json.dumps(body), headers={"Content-Type": "application/json"},
                   timeout=10).raise_for_status()
    except httpx.HTTPError as exc:
        # Never the URL itself: it often carries a token.
        logger.warning("notification for flow run %s not delivered: %s", body["flow_run"], type(exc).__name__)


def notify_failure(flow: Any, flow_run: Any, state: Any) -> None:
    """``on_failure`` / ``on_crashed`` hook: what failed is the state's message (the exception)."""
    _send(notification(flow.name, flow_run, state.name.lower(), str(state.message or state.name)))


def notify_completion(flow: Any, flow_run: Any, state: Any) -> None:
    """``on_completion`` hook: only a degraded result notifies."""
    try:
        result = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - a result that cannot be read is no reason to notify
        return
    reason = degraded_reason(result)
    if reason:
        body = notification(flow.name, flow_run, "degraded", reason)
        _emit_degraded(body)
        _send(body)


def _emit_degraded(body: dict[str, Any]) -> None:
    """The event ``deployments/prefect/automations.yaml`` reacts to (Prefect has no "degraded" state)."""
    try:
        from prefect.events import emit_event

        emit_event(event="gpuaas.flow-run.degraded", resource={"prefect.resource.id": f"prefect.flow-run.{body['flow_run_id']}"},
                   payload=body)
    except Exception as exc:  # noqa: BLE001 - the webhook still goes out
        logger.warning("degraded event not emitted: %s", type(exc).__name__)


NOTIFY_HOOKS: dict[str, Any] = {"on_failure": [notify_failure], "on_crashed": [notify_failure],
                                "on_completion": [notify_completion]}
"""``@flow(..., **NOTIFY_HOOKS)``: every gpuaas flow notifies the same way."""
