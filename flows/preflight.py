"""The preflight flow (daily, and on demand after a change to the cluster): can gpuaas still do its work there?

A change outside gpuaas fails none of the other flows: after a dcgm-exporter upgrade that relabels its
series, every GPU workload is ``unknown`` and reclaim decides nothing, run after run; a writer role
unbound fails only the next applied write. Run daily, this flow reads each source once
(``gpuaas.operations.preflight``, what ``gpuaas config preflight`` prints) and ends Failed when a check
fails, with the headline as its message, each failed check on a log line and the checks listed on
its page, so the failure notification and the runs list name what to set. It writes nothing.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from flows._hooks import FLOW_HOOKS
from flows._outcome import failed, finished
from gpuaas.operations.preflight import Verdict, headline
from gpuaas.permissions import WRITES
from gpuaas.settings import load_settings
from tasks.preflight import publish_checks, run_checks


@flow(name="preflight", log_prints=False, **FLOW_HOOKS)
def preflight(all_writes: bool = False) -> dict[str, Any]:
    """Check that the settings reach every source and that the flows may do what the policy asks.

    Args:
        all_writes: Ask about the writes of every flow, not only of those the policy applies (before switching one to apply).
    """
    settings = load_settings()
    checks = run_checks(settings, list(WRITES) if all_writes else None)
    publish_checks(checks)
    lead = headline(checks)
    doc = {"checks": [c.as_dict() for c in checks]}
    broken = [c for c in checks if c.verdict is Verdict.failed]
    for check in broken:
        get_run_logger().error("%s: %s", check.name, check.detail)
    if broken:
        return failed(doc, lead)
    return finished(doc, lead)


if __name__ == "__main__":
    preflight()
