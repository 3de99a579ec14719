"""``gpuaas plan quotas FILE``: the quota planner on a hand-written problem, no cluster needed.

The file holds the limits and the queues (see docs/flows/rebalance.md); the output is the plan
``plan_quotas`` returns, every queue and flavor included. Bad input is one line naming the
file, the field and the queue, exit 1.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StrictInt, ValidationError

from gpuaas._validation import field_path, first_problem, require_text_keys
from gpuaas._yaml import read_yaml
from gpuaas.cli._common import OutputFormat, handle_errors, print_json
from gpuaas.cli._tables import print_table
from gpuaas.errors import ConfigError
from gpuaas.models import MAX_GPUS
from gpuaas.phrases import counted, figure
from gpuaas.policies.quotas import QueueDemand, QuotaLimits, plan_quotas, plan_to_dict, validate_quota_input
from gpuaas.policy import RebalancePolicy, Tenant

__all__ = ["load_quota_problem", "quotas"]


def _text(bound: float) -> str:
    """``10,000`` rather than ``10000.0`` or ``1e+06``, ``0.000001`` rather than ``1e-06``: a bound as a person
    writes it."""
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:,.12f}".rstrip("0")


def _in_range(low: float, high: float, *, whole: bool, unit: str = "", low_open: bool = False) -> PlainValidator:
    """A number in ``[low, high]`` (``(low, high]`` with ``low_open``), refused with one message of our own.

    Why not pydantic's constraints: ``StrictInt | StrictFloat`` reports a bad value once per branch and puts the
    branch's name in the path (``demand.a100.int``), and ``ge=0`` tells a NaN it should be at least 0. One check
    that says the whole expectation, finite included, names the field as the file has it.
    """
    words = f"above {_text(low)}, at most {_text(high)}" if low_open else f"from {_text(low)} to {_text(high)}"
    expected = f"must be a {'whole' if whole else 'finite'} number{unit} {words}"

    def check(value: object) -> int | float:
        number = (isinstance(value, int) if whole else isinstance(value, int | float)) and not isinstance(value, bool)
        if not (number and isinstance(value, int | float) and math.isfinite(value)
                and (low < value if low_open else low <= value) and value <= high):
            raise ValueError(f"{expected}, got {value!r}")
        return value

    return PlainValidator(check)


def _policy_range(model: type[BaseModel], name: str, *, whole: bool, unit: str = "") -> PlainValidator:
    """The bounds of the policy file's field ``name``: a problem file holds what the policy would give the
    planner, so it accepts the same range, and a bound changed there changes here."""
    low, high, low_open = -math.inf, math.inf, False
    for bound in model.model_fields[name].metadata:  # pydantic's ``Ge``, ``Gt`` and ``Le`` constraints
        if (ge := getattr(bound, "ge", None)) is not None:
            low = float(ge)
        elif (gt := getattr(bound, "gt", None)) is not None:
            low, low_open = float(gt), True
        elif (le := getattr(bound, "le", None)) is not None:
            high = float(le)
    return _in_range(low, high, whole=whole, unit=unit, low_open=low_open)


def _limit(name: str) -> PlainValidator:
    """A ``limits`` key, bounded as the policy's ``rebalance.<name>``."""
    whole = name != "max_step_percent"
    return _policy_range(RebalancePolicy, name, whole=whole, unit=" of GPUs" if whole else "")


_Gpus = Annotated[int, _in_range(0, MAX_GPUS, whole=True, unit=" of GPUs")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Limits(_Strict):
    max_step_gpus: Annotated[int, _limit("max_step_gpus")]
    max_step_percent: Annotated[float, _limit("max_step_percent")]
    max_total_moved_gpus: Annotated[int, _limit("max_total_moved_gpus")]
    hysteresis_gpus: Annotated[int, _limit("hysteresis_gpus")] = 1
    min_step_gpus: Annotated[int, _limit("min_step_gpus")] = 0


class _Queue(_Strict):
    name: Annotated[str, Field(min_length=1)]
    nominal: dict[str, _Gpus]
    demand: dict[str, Annotated[float, _in_range(0, MAX_GPUS, whole=False, unit=" of GPUs")]] = Field(
        default_factory=dict)
    guaranteed: dict[str, _Gpus] = Field(default_factory=dict)
    weight: Annotated[float, _policy_range(Tenant, "weight", whole=False)] = 1.0
    recent_change: dict[str, StrictInt] = Field(default_factory=dict)


class _Problem(_Strict):
    limits: _Limits
    queues: list[_Queue] = Field(min_length=1)


def _where(loc: tuple[int | str, ...], data: Any) -> str:
    """The field path, and the name of the queue it is in: ``queues[1].weight (queue b)``."""
    text = field_path(loc)
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
    require_text_keys(path, data, where=lambda loc: _where(loc, data))  # as the deadline problem says it
    try:
        problem = _Problem.model_validate(data)
    except ValidationError as exc:
        raise first_problem(exc, path, where=lambda loc: _where(loc, data)) from exc
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
             figure(plan.shortfall[c.queue][c.flavor]), c.reason) for c in plan.changes]
    print_table(f"quota plan: {counted(plan.moved_gpus, 'GPU')} moved, weighted shortfall "
                f"{figure(plan.weighted_shortfall_before)} -> {figure(plan.weighted_shortfall)} "
                f"({plan.solve_seconds:.2f} s)",
                ["queue", "flavor", "before", "after", "change", "shortfall", "reason"], rows, notes=("reason",))
