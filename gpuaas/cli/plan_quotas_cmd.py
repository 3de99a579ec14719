"""``gpuaas plan quotas FILE``: the quota planner on a hand-written problem, no cluster needed.

The file holds the limits and the queues (see README, "Rebalance"); the output is the plan
``plan_quotas`` returns, every queue and flavor included. Bad input is one line naming the
file, the field and the queue, exit 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from gpuaas._yaml import read_yaml
from gpuaas.cli._common import OutputFormat, handle_errors, print_json, print_table
from gpuaas.errors import ConfigError
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas, plan_to_dict, validate_quota_input

__all__ = ["load_quota_problem", "quotas"]

_Whole = Annotated[StrictInt, Field(ge=0)]
_Number = StrictInt | StrictFloat


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Limits(_Strict):
    max_step_gpus: _Whole
    max_step_percent: Annotated[_Number, Field(ge=0)]
    max_total_moved_gpus: _Whole
    hysteresis_gpus: _Whole = 1
    min_step_gpus: _Whole = 0


class _Queue(_Strict):
    name: Annotated[str, Field(min_length=1)]
    nominal: dict[str, _Whole]
    demand: dict[str, Annotated[_Number, Field(ge=0)]] = Field(default_factory=dict)
    guaranteed: dict[str, _Whole] = Field(default_factory=dict)
    weight: Annotated[_Number, Field(gt=0)] = 1.0
    recent_change: dict[str, StrictInt] = Field(default_factory=dict)


class _Problem(_Strict):
    limits: _Limits
    queues: list[_Queue] = Field(min_length=1)


def _where(loc: tuple[int | str, ...], data: Any) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    if len(loc) >= 2 and loc[0] == "queues" and isinstance(loc[1], int) and isinstance(data, dict):
        queues = data.get("queues")
        if isinstance(queues, list) and loc[1] < len(queues) and isinstance(queues[loc[1]], dict):
            name = queues[loc[1]].get("name")
            if name:
                text += f" (queue {name})"
    return text


def load_quota_problem(path: Path | str) -> tuple[list[QueueDemand], QuotaLimits]:
    """The queues and limits of a problem file; a ConfigError naming file, field and queue."""
    data = read_yaml(path, "quota problem")
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping with 'limits' and 'queues'", file=path)
    try:
        problem = _Problem.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise ConfigError(msg + more, file=path, field=_where(tuple(err["loc"]), data) or "(top level)") from exc
    limits = QuotaLimits(**problem.limits.model_dump())
    queues = [QueueDemand(name=q.name, nominal=dict(q.nominal), demand={k: float(v) for k, v in q.demand.items()},
                          guaranteed=dict(q.guaranteed), weight=float(q.weight), recent_change=dict(q.recent_change))
              for q in problem.queues]
    try:
        validate_quota_input(queues, limits)
    except ConfigError as exc:
        raise ConfigError(str(exc).removeprefix(f"{exc.field}: "), file=path, field=exc.field) from exc
    return queues, limits


def quotas(
    file: Annotated[Path, typer.Argument(help="YAML with 'limits' and 'queues' (nominal, demand, ...).")],
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Plan nominal quota moves for the queues in FILE (reads only; never writes)."""
    with handle_errors():
        queues, limits = load_quota_problem(file)
        plan = plan_quotas(queues, limits)
    if format is OutputFormat.json:
        print_json(plan_to_dict(plan))
        return
    rows = [(c.queue, c.flavor, c.before, c.after, f"{c.delta:+d}" if c.delta else "",
             f"{plan.shortfall[c.queue][c.flavor]:g}", c.reason) for c in plan.changes]
    print_table(f"quota plan: {plan.moved_gpus} GPUs moved, weighted shortfall "
                f"{plan.weighted_shortfall_before:g} -> {plan.weighted_shortfall:g} ({plan.solve_seconds:.2f} s)",
                ["queue", "flavor", "before", "after", "change", "shortfall", "reason"], rows)
