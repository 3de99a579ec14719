"""How the cost report words its first line, its cells and where its money came from. Pure.

One place for each phrase, so that the flow's state, the JSON's ``headline`` and ``summary``, the markdown
summary, the HTML page and the command line's tables say the same thing the same way: a degraded run is said
first wherever its figures are read (``cost_headline``), not only in the place a person happens not to look.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuaas.phrases import money, zero_money
from gpuaas.policies.cost import COST_SOURCES, NO_TENANT, data_short_s
from reports._format import source_errors, with_failures

if TYPE_CHECKING:
    from gpuaas.policies.cost import CostReport

__all__ = ["NO_SERVICES", "cost_degraded", "cost_first_line", "cost_headline", "cost_source_errors", "costs_note",
           "count_cell", "hours_cell", "node_cost_line", "same_money", "tenant_cell", "window_length", "ALL_PARTS"]

NO_SERVICES = "The policy has no services: section, so no outcome is counted (cost per outcome unknown). "


def tenant_cell(row: dict[str, Any]) -> str:
    """A row's tenant as every table and plot names it: a namespace no tenant of the policy names is marked
    (``kube-system (no tenant)``), so that it does not read as a tenant someone is charged as. A row that does not say
    (the cluster's, or one from an older document) is named as it is."""
    name = str(row["tenant"])
    return name if row.get("configured_tenant", True) else f"{name} {NO_TENANT}"


def hours_cell(value: float | None) -> str:
    """GPU-hours in tenths; ``unknown`` where they cannot be known, never 0."""
    return "unknown" if value is None else f"{value:,.1f}"


def count_cell(value: float | None) -> str:
    """A whole count (``132,021``); ``unknown`` where it cannot be known, never 0, which would say none."""
    return "unknown" if value is None else f"{value:,.0f}"


def same_money(a: float | None, b: float | None, currency: str) -> bool:
    """Whether two known amounts read the same: a total and its GPU part then say one figure, written once (where
    OpenCost prices nothing but the GPUs, "$1,174.37 ($1,174.37 on GPUs)" reads as a figure left out)."""
    return a is not None and b is not None and money(a, currency=currency) == money(b, currency=currency)


def window_length(seconds: float) -> str:
    """The report window as people say it: ``2 h``, ``168 h``, ``1.5 h``; under an hour in minutes (``30 min``,
    ``0.25 min``). At most two decimals, none when whole: a window is what the reader asked for, and
    ``0.0166667 h`` for one minute reads as a measurement."""
    value, unit = (seconds / 3600, "h") if seconds >= 3600 else (seconds / 60, "min")
    text = f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{text} {unit}"


def cost_first_line(report: CostReport) -> str:
    """What the run found, in one sentence: the span, the cost, the waste and the verified outcomes.

    A policy without services is said first: every outcome figure below would otherwise read as zero work.
    The span is the window asked for, or the hours of data where they are fewer ("6.0 h of data in a 168 h
    window"): the money is that of the hours the data covers. The money is said as what it is, the cost
    OpenCost allocated to workloads: unallocated node capacity is not in it, and "spent" would read as the
    bill. Waste the telemetry cannot tell (none of the GPU-hours had any) is said to be unknown, and why,
    never a dollar figure.
    """
    c, cur = report.cluster, report.currency
    lead = NO_SERVICES if not report.services else ""
    window = window_length(report.window_s)
    if not c.get("allocated_gpu_hours"):
        if report.telemetry_missing and c.get("total_cost") is None:
            return f"{lead}GPU-hours unknown in the {window} window: no GPU telemetry and no cost source."
        return f"{lead}No GPU-hours allocated in the {window} window: nothing to cost."
    covered = data_short_s(report)
    span = f"{_span(covered)} of data in a {window} window" if covered is not None else f"{window} of GPUs"
    if c.get("waste_cost") is None and c.get("gpu_cost") is None and c.get("total_cost") is not None:
        waste = "idle-GPU waste unknown (the GPU cost is unknown)"  # OpenCost left a GPU cost null
    elif c.get("waste_cost") is None and c.get("total_cost") is not None:  # the money is known, the idleness is not
        waste = "idle-GPU waste unknown (no GPU telemetry in Prometheus)"
    else:
        waste = f"{money(c.get('waste_cost'), currency=cur)} of it on allocated but idle GPUs"
    allocated = ("cost allocated to workloads unknown" if c["total_cost"] is None
                 else f"{money(c['total_cost'], currency=cur)} allocated to workloads")
    on_gpus = ("GPU spend unknown" if c["gpu_cost"] is None
               else "all of it on GPUs" if same_money(c["gpu_cost"], c["total_cost"], cur)
               else f"{money(c['gpu_cost'], currency=cur)} on GPUs")
    return (f"{lead}{span}: {allocated} ({on_gpus}), {waste}; "
            f"{count_cell(c.get('verified_requests'))} verified requests and {_jobs_in_time(c)}.")


def _span(seconds: float) -> str:
    """Hours of data as measured (``6.0 h``, ``45 min``): unlike the window, a measurement keeps its decimal."""
    return f"{seconds / 3600:,.1f} h" if seconds >= 3600 else f"{seconds / 60:,.0f} min"


def _jobs_in_time(cluster: dict[str, Any]) -> str:
    """``3 batch jobs done in time``; unknown without the Kubernetes API: never a 0 that reads as none done."""
    jobs = cluster.get("verified_jobs")
    if jobs is None:
        return "batch jobs done in time unknown"
    return f"{count_cell(jobs)} batch job{'' if round(jobs) == 1 else 's'} done in time"


def cost_source_errors(report: CostReport, previous: CostReport | None = None) -> dict[str, str]:
    """Each source that failed while the window, or the previous one it is compared with, was read: its
    one-line error, by name (``source_errors``). What makes the run degraded, with ``telemetry_missing``."""
    return {**(source_errors(previous.sources) if previous is not None else {}), **source_errors(report.sources)}


def cost_degraded(report: CostReport, previous: CostReport | None = None) -> bool:
    """Whether the run is degraded: a source failed (``cost_source_errors``), or the window holds no GPU telemetry
    (no source failed, yet busy, idle and waste are unknown, as a blind reclaim's are)."""
    return bool(cost_source_errors(report, previous)) or bool(report.telemetry_missing)


def cost_headline(report: CostReport, previous: CostReport | None = None) -> str:
    """``cost_first_line``, led by what the run lacked (``with_failures``): each failed source, and a window
    without any GPU telemetry (degraded too, though no source failed). The one line the flow's state, the JSON's
    ``headline`` and ``summary``, the markdown summary and the HTML page's lead start with: a degraded page must
    not read as a normal one with a note at its bottom."""
    blind = {"gpu telemetry": report.telemetry_missing} if report.telemetry_missing else {}
    return with_failures(cost_first_line(report), {**cost_source_errors(report, previous), **blind})


ALL_PARTS = "GPU, CPU, RAM, and the volumes, network, load balancers and external costs OpenCost charges workloads"
"""What OpenCost's ``totalCost`` holds, and so the "in all" figures: its allocations' total is every part it charges a
pod, not GPU, CPU and RAM only (a pod with a $10 volume and $50 of external cost has them in its total)."""
OTHER_PARTS = "CPU, RAM, volumes, network, load balancers and external costs"
"""What OpenCost prices beside the GPUs: where it comes to nothing, the GPUs' cost is the cost in all, said once."""


def node_cost_line(report: CostReport, idle_row: str = "__idle__") -> str:
    """What the nodes' GPUs cost at OpenCost's prices, as the allocated cost and the idle (OpenCost's ``__idle__``)
    that add up to it, with the GPU-hours nobody held, and the cost in all with what that holds: the line under the
    headline. An idle cost that cannot be known is said so, with why, never $0. ``idle_row``: that row's name as the
    page writes it.

    Said at OpenCost's prices, never as the bill: OpenCost does not discount GPUs, reconciles its prices with a cloud
    bill only where that is set up, and keeps cost of no namespace (``__unallocated__``) out of both figures."""
    n, cur = report.node_cost, report.currency
    if not n:  # a report that did not record it (built by hand, or from an older document)
        return "What the nodes cost beside the workloads' allocation was not recorded."
    allocated = ("allocated cost unknown" if n.get("allocated_gpu_cost") is None
                 else f"{money(n['allocated_gpu_cost'], currency=cur)} allocated to workloads")
    unheld = n.get("unheld_gpu_hours")
    nobody = ("GPU-hours nobody held unknown: no GPU telemetry" if unheld is None
              else f"{hours_cell(unheld)} GPU-hours nobody held")
    if n.get("idle_gpu_cost") is None:
        why = str(n.get("idle_unknown") or "not read").replace("__idle__", idle_row)
        return (f"The nodes' GPUs cost unknown at OpenCost's prices: {allocated}, idle capacity unknown ({why}), "
                f"never {zero_money(cur)}; {nobody}.")
    line = (f"The nodes' GPUs cost {money(n['gpu_cost'], currency=cur)} at OpenCost's prices: {allocated}, "
            f"{money(n['idle_gpu_cost'], currency=cur)} idle ({nobody})")
    if n.get("total_cost") is None:
        return f"{line}; with the rest OpenCost prices, the cost in all ({ALL_PARTS}) unknown."
    if (same_money(n["total_cost"], n["gpu_cost"], cur)
            and same_money(n.get("idle_total_cost"), n["idle_gpu_cost"], cur)):
        return (f"{line}; OpenCost prices nothing else on the nodes ({OTHER_PARTS}: {zero_money(cur)}), so that is "
                "their cost in all.")
    return (f"{line}; with the rest OpenCost prices, {money(n['total_cost'], currency=cur)} in all ({ALL_PARTS}), "
            f"{money(n['idle_total_cost'], currency=cur)} of it idle.")


def costs_note(report: CostReport, idle_row: str = "__idle__") -> str:
    """Where the money came from and what it is: OpenCost's allocation API or, as the fallback, its metrics in
    Prometheus; the cost OpenCost allocated to workloads at its prices, with what its total holds; and what it leaves
    out: node capacity no workload held (OpenCost's ``__idle__``, priced apart by ``node_cost_line``, or unknown) and
    cost of no namespace (OpenCost's ``__unallocated__``, which the report does not read). So that no reader signs it,
    or the nodes' cost beside it, as the cluster's bill: OpenCost does not discount GPUs and reconciles with a cloud
    bill only where that is set up. ``idle_row``: that row's name as the page writes it (markdown, which would read
    ``__idle__`` as bold, quotes it)."""
    source = COST_SOURCES.get(report.cost_source or "")
    if source is not None:
        said = f"Costs come from {source}."
    elif report.cluster.get("total_cost") is None:
        said = "No cost source answered: the costs are unknown."
    else:
        said = "Where the costs came from was not recorded."
    unallocated = "`__unallocated__`" if idle_row.startswith("`") else "__unallocated__"
    idle = report.node_cost.get("idle_total_cost")
    short = (", unknown here" if idle is None
             else f": {money(idle, currency=report.currency)} over the window, read apart from OpenCost's {idle_row} (the nodes' cost line)")
    return (f"{said} They are the cost allocated to workloads at OpenCost's prices (their pods' {ALL_PARTS}): "
            f"unallocated node capacity (OpenCost's {idle_row}) is not included{short}; nor is cost OpenCost assigns "
            f"to no namespace (its {unallocated} row), which the report does not read. Neither these figures nor the "
            "nodes' cost are the cluster's bill: OpenCost does not discount GPUs, and its prices match a cloud bill "
            "only where reconciliation is set up.")
