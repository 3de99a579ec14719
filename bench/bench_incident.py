"""Incident-review benchmark: the review of a long window at the full fleet's queue count.

The review reads only the per-queue and per-tenant aggregates (200 ClusterQueues, 200 tenants, one
row each per 5-minute collect) and the audit rows of the window; this times the pure part (the incident
operation's ``plan``) and the report (markdown, plot; the first includes importing matplotlib) for windows of 1 hour, 1 day and the 14-day retention, with
1,000 audit rows in the window, unfiltered and filtered to one namespace. Data are synthetic: the
review's cost is rows, not what is in them.

    python -m bench.bench_incident [--smoke]

``--smoke``: the 1-hour window alone.
"""

from __future__ import annotations

import resource
import sys
import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd

from bench._run import headline, parser, run
from gpuaas.models import Outcome
from gpuaas.operations import incident
from gpuaas.policy import Policy, Tenant
from gpuaas.store import AuditEntry
from reports.incident import incident_markdown, plot_png

QUEUES = 200
START = datetime(2026, 12, 1, tzinfo=UTC)


def history(cycles: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    times = pd.to_datetime(np.repeat([START + timedelta(minutes=5 * i) for i in range(cycles)], QUEUES), utc=True)
    names = np.tile([f"q{i}" for i in range(QUEUES)], cycles)
    tenants = np.tile([f"t{i}" for i in range(QUEUES)], cycles)
    step = np.repeat(np.arange(cycles), QUEUES)
    queues = pd.DataFrame({"collected_at": times, "cluster_queue": names, "flavor": "h100", "cohort": "c",
                           "tenant": tenants, "nominal_gpus": 80.0 + (step // 288) % 2 * 4, "usage_gpus": 40.0,
                           "reserved_gpus": 40.0, "borrowed_gpus": 0.0, "borrowing_limit_gpus": None,
                           "pending_workloads": step % 7, "pending_gpus": 8.0, "oldest_pending_seconds": None,
                           "admitted_workloads": 5})
    tenant = pd.DataFrame({"collected_at": times, "tenant": tenants, "workloads": 250, "allocated_gpus": 80.0,
                           "idle_gpus": (step % 5).astype(float), "unknown_gpus": 0.0, "pending_gpus": 8.0})
    return queues, tenant


def main(argv: list[str]) -> int:
    args = parser(__doc__).parse_args(argv)
    policy = Policy(tenants=[Tenant(name=f"t{i}", namespaces=[f"t{i}"], cluster_queues=[f"q{i}"])
                             for i in range(QUEUES)])
    windows = (("1 h", 12),) if args.smoke else (("1 h", 12), ("1 day", 288), ("14 days", 4032))
    last = ""
    for label, cycles in windows:
        queues, tenants = history(cycles)
        end = START + timedelta(minutes=5 * cycles)
        audit = [AuditEntry(id=i + 1, created_at=START + (end - START) * i / 1000, flow="reclaim", action="reclaim",
                            kind="Notebook", namespace=f"t{i % QUEUES}", name=f"nb-{i}", mode="apply",
                            outcome=Outcome.planned, reason="idle 30 m",
                            evidence={"window_minutes": 30.0, "activity_max": 0.0, "threshold": 0.05})
                 for i in range(1000)]
        for namespaces in ((), ("t3",)):
            began = time.perf_counter()
            records = incident.IncidentRecords(START, end, queues, tenants, audit)
            review = incident.plan(records, policy, namespaces)
            built = time.perf_counter()
            text = incident_markdown(review, plot_png(review))
            done = time.perf_counter()
            print(f"{label:>8} {'namespace t3' if namespaces else 'whole fleet':>13}: {len(queues):>7,} queue rows, "
                  f"{len(review.events):>4} events; build {built - began:5.2f} s, markdown + plot {done - built:5.2f} s, "
                  f"artifact {len(text) / 1024:4.0f} KiB")
            if not namespaces:
                last = f"{label} of {QUEUES} queues: build {built - began:.2f} s, markdown + plot {done - built:.2f} s"
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    headline(f"{last}; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_incident"))
