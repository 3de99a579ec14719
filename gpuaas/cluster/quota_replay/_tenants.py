"""Which tenants of the input a rebalance replay replays, and why each other one is left out.

Why: the replay compares configurations over "every tenant", so a tenant that silently falls out of it
(no job in the replayed days, every job too big for its quota, no quota at all) changes what the figures
mean without a word. Every tenant of the input (the trace's and the quota source's) gets an account here,
and a tenant left out carries the reason the output names. A tenant the quotas file or the policy names
that is no tenant of the trace at all is a mistake in that file, not a finding: it is refused, naming
the file and field. Pure: no I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from gpuaas.errors import ConfigError
from gpuaas.policy import Policy

from ..traces import TraceJob

__all__ = ["LeftOut", "TenantAccount", "account_tenants", "check_named_tenants", "fits", "left_out_line"]


class LeftOut(str, Enum):
    """Why a tenant of the input is not in the replay."""

    no_job_in_trace = "no_job_in_trace"
    """It has a quota (from the quota source) but not one job in the trace."""
    no_job_in_window = "no_job_in_window"
    """All its jobs were submitted after the replayed ``--days``."""
    no_quota = "no_quota"
    """The quota source gives it no quota, so none of its jobs could ever run."""
    jobs_too_large = "jobs_too_large"
    """Each of its jobs asks for more GPUs than its quota: none could ever run."""


@dataclass(frozen=True)
class TenantAccount:
    """One tenant of the input: its quota, its jobs at each step, and why it is left out (``None``: replayed)."""

    tenant: str
    quota: int | None  # None: the quota source does not name it
    trace_jobs: int  # every job of the trace
    window_jobs: int  # submitted within the replayed days
    replayed_jobs: int
    excluded_jobs: int  # within the days, but could never run (no quota, bigger than the quota)
    left_out: LeftOut | None


def fits(job: TraceJob, quotas: dict[str, int]) -> bool:
    """Whether the job could ever run in ``static_isolated``: its tenant's quota holds it."""
    return quotas.get(job.tenant, 0) >= job.gpus > 0


def account_tenants(trace: Iterable[TraceJob], window: Iterable[TraceJob], quotas: dict[str, int]
                    ) -> list[TenantAccount]:
    """An account for every tenant of the trace or of ``quotas``, sorted by name."""
    in_trace = Counter(j.tenant for j in trace)
    in_window: Counter[str] = Counter()
    kept: Counter[str] = Counter()
    for job in window:
        in_window[job.tenant] += 1
        kept[job.tenant] += fits(job, quotas)
    accounts = []
    for tenant in sorted(set(in_trace) | set(quotas)):
        quota = quotas.get(tenant)
        if not in_trace[tenant]:
            why: LeftOut | None = LeftOut.no_job_in_trace
        elif not in_window[tenant]:
            why = LeftOut.no_job_in_window
        elif kept[tenant]:
            why = None
        else:
            why = LeftOut.no_quota if quota is None else LeftOut.jobs_too_large
        accounts.append(TenantAccount(tenant, quota, in_trace[tenant], in_window[tenant], kept[tenant],
                                      in_window[tenant] - kept[tenant], why))
    return accounts


def left_out_line(account: TenantAccount, days: float | None) -> str:
    """One sentence naming a left-out tenant and why, as the command prints it."""
    quota = "no quota" if account.quota is None else f"quota {account.quota:,} GPU{'' if account.quota == 1 else 's'}"
    n = account.window_jobs
    its = "its job" if n == 1 else f"its {n:,} jobs"
    later = "its job" if account.trace_jobs == 1 else f"its {account.trace_jobs:,} jobs"
    reasons = {
        LeftOut.no_job_in_trace: "no job in the trace",
        LeftOut.no_job_in_window: f"no job submitted in the first {days or 0:g} days ({later} came later)",
        LeftOut.no_quota: f"no quota, so {its} could never run",
        LeftOut.jobs_too_large: f"{its} {'asks' if n == 1 else 'each ask'} for more GPUs than its quota",
    }
    assert account.left_out is not None
    return f"Left out: {account.tenant} ({quota}): {reasons[account.left_out]}."


def _listed(names: set[str]) -> str:
    shown = sorted(names)
    return ", ".join(shown[:8]) + (f" and {len(shown) - 8} more" if len(shown) > 8 else "")


def check_named_tenants(trace_tenants: set[str], quotas: dict[str, int], quotas_file: Path | None,
                        policy: Policy, policy_file: Path | None) -> None:
    """Refuse a tenant of the quotas file, or a ClusterQueue of a policy tenant, that the trace does not have.

    Why refused rather than left out: the trace decides who the tenants are (a Philly ``cluster``, an ITP
    file's name), so a name it never uses is a typo or a file meant for another trace, and replaying
    without it would answer a question the user did not ask.
    """
    if quotas_file is not None:
        for name in quotas:
            if name not in trace_tenants:
                raise ConfigError(f"no tenant of the trace is named {name!r} (its tenants: "
                                  f"{_listed(trace_tenants)})", file=quotas_file, field=name)
    for i, tenant in enumerate(policy.tenants):
        if not tenant.cluster_queues:
            raise ConfigError(f"tenant {tenant.name!r} names no ClusterQueue; in a replay each tenant of the "
                              f"trace is one ClusterQueue of that name ({_listed(trace_tenants)})",
                              file=policy_file, field=f"tenants[{i}].cluster_queues")
        for j, queue in enumerate(tenant.cluster_queues):
            if queue not in trace_tenants:
                raise ConfigError(f"no tenant of the trace is named {queue!r} (its tenants: "
                                  f"{_listed(trace_tenants)})", file=policy_file,
                                  field=f"tenants[{i}].cluster_queues[{j}]")
