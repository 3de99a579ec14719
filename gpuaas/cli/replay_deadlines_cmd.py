"""``gpuaas replay deadlines``: Kueue's own order against the deadline plan, on a trace with deadlines.

Why: "hold what can wait" should be measured before it is trusted — on the same GPUs, the same
jobs, the same Kueue model, once as Kueue would run them and once with the ``deadlines`` flow's
holds, run at the flow's cadence (:mod:`gpuaas.cluster.deadline_flow_replay`). ``--loop event``
replays the replay's own event-driven planner instead (:mod:`gpuaas.cluster.deadline_replay`): a
reference for what planning at every arrival and end could do, not what the flow does.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuaas.cli._common import OutputFormat, fail, flag_error, lead, print_json, usage_error
from gpuaas.cli._progress import say
from gpuaas.cli._tables import print_table
from gpuaas.cluster.deadline_replay import DEFAULT_RUNTIME_ESTIMATE

if TYPE_CHECKING:
    from gpuaas.cluster.deadline_replay import ReplayStats
from gpuaas.errors import ConfigError, GpuaasError
from gpuaas.models import MAX_GPUS
from gpuaas.phrases import duration

__all__ = ["deadlines"]

class TraceFormat(str, Enum):
    itp = "itp"


class Loop(str, Enum):
    flow = "flow"
    event = "event"


def deadlines(
    trace: Annotated[Path, typer.Option("--trace", help="Trace CSV with deadlines (ElasticFlow's ITP columns).")],
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs of the one ClusterQueue both runs share.")],
    trace_format: Annotated[TraceFormat, typer.Option("--trace-format", help="Trace layout.")] = TraceFormat.itp,
    runtime_estimate: Annotated[str, typer.Option(
        "--runtime-estimate", help="What the planner is told of each job's run time: exact, factor:F or "
                                   f"lognormal:SIGMA (default {DEFAULT_RUNTIME_ESTIMATE}: the median estimate right;"
                                   " exact tells it the true run times, which no flow knows).")]
    = DEFAULT_RUNTIME_ESTIMATE,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed of the lognormal estimate error.")] = 0,
    loop: Annotated[Loop, typer.Option(
        "--loop", help="flow: the deadlines flow's planning and holds every flow interval (prefect.yaml); "
                       "event: the replay's own planner at every arrival and end (a reference).")] = Loop.flow,
    policy: Annotated[Path | None, typer.Option(
        "--policy", help="Policy YAML whose deadlines settings the flow loop uses (default: the policy's "
                         "defaults, as the flow runs without one).")] = None,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Replay the trace through Kueue twice (FIFO, then with the deadlines flow's holds); print deadlines met."""
    if not 1 <= gpus <= MAX_GPUS:  # the policy's and the planners' cap, in their words
        raise usage_error(f"must be a whole number of GPUs from 1 to {MAX_GPUS:,}, got {gpus!r}", "--gpus")
    from gpuaas.cluster.deadline_flow_replay import replay_flow
    from gpuaas.cluster.deadline_replay import estimate_runtimes, replay_deadlines
    from gpuaas.cluster.traces import read_itp
    from gpuaas.policy import Policy, load_policy

    try:
        settings = (load_policy(policy) if policy is not None else Policy()).deadlines
        jobs = read_itp(trace)
        estimates = None if runtime_estimate == "exact" else estimate_runtimes(jobs, runtime_estimate, seed)
        fifo = replay_deadlines(jobs, gpus, planned=False, progress=say)
        planned = (replay_flow(jobs, gpus, estimates=estimates, policy=settings, progress=say) if loop is Loop.flow
                   else replay_deadlines(jobs, gpus, planned=True, estimates=estimates, progress=say))
    except ConfigError as exc:  # --runtime-estimate's value: exit 2; the trace or the policy file: exit 1
        # only a field that is an option is one; another (a job's) is the run's failure, never a flag of its name
        raise (flag_error(exc) if (exc.field or "").startswith("--") else fail(str(exc))) from exc
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    runs = {"fifo": fifo.to_dict(), "planned": planned.to_dict()}
    result = {"headline": replay_headline(fifo, planned, gpus, loop)}
    lead(result, format)  # the first line: on stdout above the table, on stderr beside the JSON
    if format is OutputFormat.json:
        print_json({**result, "gpus": gpus, "runtime_estimate": runtime_estimate, "seed": seed, "loop": loop.value,
                    **runs})
        return
    # met / feasible: ``deadline_satisfaction`` counts only deadlines that were not hopeless (docs/replays.md);
    # headed "satisfaction" it would read as ElasticFlow's met / all deadlines.
    headers = ("run", "jobs", "with deadline", "met", "met / feasible", "hopeless", "avg JCT", "p95 queue",
               "allocated")
    rows = [[run, r["jobs"], r["deadline_jobs"], r["met"], f"{r['deadline_satisfaction']:.3f}", r["hopeless"],
             duration(r["avg_jct_s"]), duration(r["p95_queue_s"]), f"{r['gpu_allocation_ratio']:.2f}"]
            for run, r in runs.items()]
    print_table(f"Deadline replay of {trace.name} on {gpus} GPUs ({loop.value} loop, Kueue model, simulated time)",
                headers, rows, optional=("allocated", "with deadline", "jobs", "hopeless"))


def replay_headline(fifo: ReplayStats, planned: ReplayStats, gpus: int, loop: Loop) -> str:
    """The command's first line: deadlines met by the plan against Kueue's own order, then what it cost in waiting."""
    who = "The deadlines flow" if loop is Loop.flow else "The event-driven planner"
    feasible = fifo.deadline_jobs - fifo.hopeless
    ratio = f" ({planned.met / fifo.met:.2f}x)" if fifo.met else ""
    return (f"{who} met {planned.met:,} of {feasible:,} feasible deadlines on {gpus:,} GPUs, Kueue's own order "
            f"{fifo.met:,}{ratio}; p95 queueing delay {duration(planned.p95_queue_s)} against "
            f"{duration(fifo.p95_queue_s)}.")
