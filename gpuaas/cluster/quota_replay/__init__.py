"""``gpuaas replay rebalance``: does nightly quota rebalancing beat static quotas on a real trace?

Four configurations on the same jobs and the same total GPUs:

* ``static_isolated``: one ClusterQueue per tenant, no cohort (how Philly and Helios ran);
* ``static_cohort``: the same quotas in one cohort, borrowing, ``reclaimWithinCohort: Any``
  (Kueue's answer);
* ``rebalanced_isolated`` / ``rebalanced_cohort``: each of those with the rebalance flow's nightly
  demand formula and planner, under the policy's ``rebalance`` settings (the defaults, or
  ``--policy``), on the replay's own history (see ``_nightly``). Tenants the policy does not name
  get a weight proportional to their static quota (``with_share_weights``). The deadline need of
  the nightly demand is planned on each job's estimated run time (``--runtime-estimate``: exact,
  ``factor:F`` or ``lognormal:SIGMA`` of the true one, as in ``gpuaas replay deadlines``), while
  the jobs run their true durations.

Quotas: Philly tenants (the ``cluster`` column) get ``nodes x 8`` GPUs from the Helios VC table;
ITP files are one tenant each with their mean GPU demand; ``--quotas`` overrides either. Jobs
that could never run in ``static_isolated`` (a tenant without quota, a job bigger than its
tenant's quota) are left out of all four and counted in ``meta.excluded_jobs``. ``meta.tenants`` accounts
for every tenant of the trace and of the quota source: a tenant with no job left to replay (none in the
replayed days, none that fits its quota, no quota) is left out with its reason (``_tenants``); a tenant
the quotas file or the policy names that the trace does not have is refused as bad input. Each ITP file
starts at its own first submission (``read_itp`` makes times relative per file). The night comes
every 24 simulated hours after the first submission (the traces carry no time zone).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpuaas._policy_model import SUBDOMAIN as _SUBDOMAIN
from gpuaas._yaml import read_yaml
from gpuaas.errors import ConfigError
from gpuaas.models import MAX_GPUS
from gpuaas.policies.quotas import limits_of
from gpuaas.policy import Policy, Tenant
from gpuaas.sources.csv_table import read_csv_table, where

from ..deadline_replay import DEFAULT_RUNTIME_ESTIMATE, estimate_runtimes
from ..traces import TraceJob, read_itp, read_philly
from ._engine import Configuration, QuotaReplay
from ._report import summarise
from ._tenants import LeftOut, TenantAccount, account_tenants, check_named_tenants, fits, left_out_line

__all__ = ["CONFIGURATIONS", "DERIVED_QUOTAS", "LeftOut", "in_window", "load_quotas", "read_trace",
           "replay_rebalance", "with_share_weights"]

CONFIGURATIONS = (
    Configuration("static_isolated", cohort=False, rebalance=False),
    Configuration("static_cohort", cohort=True, rebalance=False),
    Configuration("rebalanced_isolated", cohort=False, rebalance=True),
    Configuration("rebalanced_cohort", cohort=True, rebalance=True),
)
GPUS_PER_NODE = 8
DAY = 86400.0


def read_trace(paths: Sequence[Path], trace_format: str) -> list[TraceJob]:
    """Every job of the trace files, before ``--days``: the trace's tenants are those of all its jobs."""
    if trace_format == "philly":
        return [job for path in paths for job in read_philly(path)]
    if trace_format != "itp":
        raise ConfigError(f"unknown trace format {trace_format!r} (philly | itp)", field="--trace-format")
    seen: dict[str, Path] = {}
    for path in paths:
        # An ITP tenant is its file's name: two files of one name would replay as one tenant, and the
        # second would vanish into the first.
        if not _SUBDOMAIN.fullmatch(path.stem):
            raise ConfigError(f"{path.stem!r} is no Kubernetes object name (lowercase letters, digits, '-' and '.'), "
                              "and an ITP tenant is named by its file, as its ClusterQueue: rename the file "
                              f"(e.g. {_k8s_like(path.stem)}.csv)", file=path)
        if path.stem in seen:
            raise ConfigError(f"same tenant name {path.stem!r} as {seen[path.stem]} (an ITP tenant is named by its "
                              "file; rename one)", file=path)
        seen[path.stem] = path
    return [job for path in paths for job in read_itp(path)]


def _k8s_like(name: str) -> str:
    """``name`` as a Kubernetes object name could spell it: ``My_Trace`` -> ``my-trace``."""
    return re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.") or "tenant"


def in_window(jobs: list[TraceJob], days: float | None) -> list[TraceJob]:
    """The jobs submitted in the first ``days`` (all without), by submission."""
    if days is not None:
        jobs = [j for j in jobs if j.submit < days * DAY]
    if not jobs:
        raise ConfigError("no jobs in the replayed window", field="--trace")
    return sorted(jobs, key=lambda j: (j.submit, j.tenant))


def _philly_vc_file(trace: Path) -> Path:
    return trace.parent / "philly_vc_nodes_helios.csv"


_MAX_NODES = MAX_GPUS // GPUS_PER_NODE


def _philly_quotas(path: Path) -> dict[str, int]:
    """VC -> ``nodes x 8`` GPUs from the Helios VC table; a bad table is refused naming it, its line and column.

    Why here and not later: a table that gives no VC a usable quota would otherwise surface as "no job fits
    its tenant's quota", blaming the trace for what is wrong in this file.
    """
    if not path.exists():
        raise ConfigError("no such file: the VC sizes are read from it (or pass --quotas)", file=path)
    table = read_csv_table(path)
    table.require({"vc", "node num"})
    if not table.rows:
        raise ConfigError("no rows after the header: the VC table needs at least one VC (or pass --quotas)",
                          file=path)
    out: dict[str, int] = {}
    lines: dict[str, int] = {}
    for line, row in table.records():
        vc, nodes = row["vc"], row["node num"]
        if not vc:
            raise ConfigError("empty VC name", file=path, field=where(line, "vc"))
        if vc in lines:
            raise ConfigError(f"VC {vc!r} is also on line {lines[vc]}", file=path, field=where(line, "vc"))
        if not (nodes.isascii() and nodes.isdigit() and int(nodes) <= _MAX_NODES):
            raise ConfigError(f"must be a whole number of nodes from 0 to {_MAX_NODES:,}, got {nodes!r}", file=path,
                              field=where(line, "node num"))
        out[vc], lines[vc] = int(nodes) * GPUS_PER_NODE, line
    return out


def load_quotas(jobs: list[TraceJob], trace_format: str, traces: Sequence[Path], quotas: Path | None) -> dict[str, int]:
    """Tenant -> nominal GPUs: the ``--quotas`` YAML mapping, else the trace format's rule."""
    if quotas is not None:
        data = read_yaml(quotas, "quotas")
        if not isinstance(data, dict):
            raise ConfigError("must be a mapping of tenant to GPUs", file=quotas)
        out = {}
        for tenant, gpus in data.items():
            # The planners' cap: past it a quota is a typo, and the replay's floats would no longer hold it exactly.
            if not isinstance(gpus, int) or isinstance(gpus, bool) or not 0 <= gpus <= MAX_GPUS:
                raise ConfigError(f"must be a whole number of GPUs from 0 to {MAX_GPUS:,}, got {gpus!r}", file=quotas,
                                  field=str(tenant))
            out[str(tenant)] = gpus
        return out
    if trace_format == "philly":
        return _philly_quotas(_philly_vc_file(traces[0]))
    span = max(j.submit + j.duration for j in jobs) - min(j.submit for j in jobs)
    demand: dict[str, float] = {}
    for job in jobs:
        demand[job.tenant] = demand.get(job.tenant, 0.0) + job.gpus * job.duration
    return {tenant: max(1, math.ceil(gpu_s / max(span, 1.0))) for tenant, gpu_s in sorted(demand.items())}


def with_share_weights(policy: Policy, quotas: dict[str, int]) -> Policy:
    """The policy, plus a tenant per trace tenant it does not name, weighted by its static quota.

    Why: the planner shares a cohort by weight, and static quotas are the shares the replay compares
    against; an operator moving from static quotas gives each team the weight of its old quota.
    Tenants the policy names keep their own settings.
    """
    named = {q for t in policy.tenants for q in t.cluster_queues}
    mean = sum(quotas.values()) / max(1, len(quotas))
    extra = [Tenant(name=t, cluster_queues=[t], weight=max(gpus, 1) / max(mean, 1.0))
             for t, gpus in sorted(quotas.items()) if t not in named]
    return policy.model_copy(update={"tenants": [*policy.tenants, *extra]}) if extra else policy


def _tenant_meta(account: TenantAccount, days: float | None) -> dict[str, Any]:
    """A tenant's entry in ``meta.tenants``: its quota, jobs replayed and excluded, and why it is left out."""
    return {"quota": account.quota, "jobs": account.replayed_jobs, "excluded_jobs": account.excluded_jobs,
            "left_out": account.left_out.value if account.left_out else None,
            "why": left_out_line(account, days) if account.left_out else None}


DERIVED_QUOTAS = {"philly": "nodes x 8 GPUs from philly_vc_nodes_helios.csv next to the trace",
                  "itp": "each file's mean GPU demand"}
"""How ``load_quotas`` derives a tenant's quota from a trace without a quotas file, by trace format."""


def replay_rebalance(traces: Sequence[Path], trace_format: str, *, quotas_file: Path | None = None,
                     days: float | None = None, configurations: Sequence[Configuration] = CONFIGURATIONS,
                     policy: Policy | None = None, policy_file: Path | None = None,
                     progress: Callable[[str], None] | None = None, runtime_estimate: str = DEFAULT_RUNTIME_ESTIMATE,
                     seed: int = 0) -> dict[str, Any]:
    """Replay the trace under every configuration; the JSON the command prints.

    ``meta.tenants`` has every tenant of the input, the left-out ones with why (``policy_file`` only names
    the policy's file in an error). ``runtime_estimate`` (with ``seed``): what the nightly plan's deadline
    need is told of each job's run time (``estimate_runtimes``); a bad value is a ``ConfigError`` naming
    ``--runtime-estimate``.
    """
    estimate_runtimes([], runtime_estimate, seed)  # a bad spec is refused before the trace is read
    trace = read_trace(traces, trace_format)
    jobs = in_window(trace, days)
    quotas = load_quotas(jobs, trace_format, traces, quotas_file)
    policy = policy or Policy()
    check_named_tenants({j.tenant for j in trace}, quotas, quotas_file, policy, policy_file)
    accounts = account_tenants(trace, jobs, quotas)
    kept = [j for j in jobs if fits(j, quotas)]
    excluded = {a.tenant: a.excluded_jobs for a in accounts if a.excluded_jobs}
    quotas = {a.tenant: a.quota for a in accounts if a.left_out is None and a.quota is not None}
    if not kept:
        if quotas_file is not None:
            raise ConfigError("no job fits its tenant's quota", file=quotas_file)
        # The quotas came from the trace (Philly: from the VC table beside it), not from a file the user gave:
        # name the files they came from and what to do.
        source = [*traces, _philly_vc_file(traces[0])] if trace_format == "philly" else traces
        raise ConfigError(f"no job fits its tenant's quota as derived from the trace ({DERIVED_QUOTAS[trace_format]}); "
                          "give quotas with --quotas", file=", ".join(str(t) for t in source))
    policy = with_share_weights(policy, quotas)
    estimates = estimate_runtimes(kept, runtime_estimate, seed)
    results: dict[str, Any] = {}
    for config in configurations:
        results[config.name] = summarise(QuotaReplay(kept, quotas, config, policy=policy, progress=progress,
                                                     estimates=estimates).run())
    span_days = (max(j.submit for j in kept) - min(j.submit for j in kept)) / DAY
    meta = {
        "trace": [str(p) for p in traces], "trace_format": trace_format, "jobs": len(kept),
        "excluded_jobs": sum(excluded.values()), "excluded_by_tenant": excluded,
        "submission_span_days": round(span_days, 2), "total_gpus": sum(quotas.values()),
        "quotas": dict(sorted(quotas.items())), "limits": asdict(limits_of(policy.rebalance)),
        "usage_percentile": policy.rebalance.usage_percentile, "runtime_estimate": runtime_estimate, "seed": seed,
        "gpu_hours": round(sum(j.gpus * j.duration for j in kept) / 3600, 1),
        "tenants": {a.tenant: _tenant_meta(a, days) for a in accounts},
    }
    return {"meta": meta, "configurations": results}
