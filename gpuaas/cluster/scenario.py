"""Scenarios: what the embedded cluster contains and what happens in it.

A scenario is a YAML file validated into ``Scenario`` (schema in ``_scenario_models``); the
objects it creates are built in ``_scenario_objects``. Errors name the file and the field
path (``scenario.yaml: workloads[2].gpus_per_pod: ...``) as every gpuaas configuration error
does. ``default_scenario()`` is the built-in demo that shows every problem gpuaas solves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gpuaas._validation import shown_message
from gpuaas._yaml import read_yaml
from gpuaas.cluster._scenario_models import *  # noqa: F403
from gpuaas.cluster._scenario_models import Scenario, Tenant, WorkloadSpec
from gpuaas.cluster._scenario_models import __all__ as _models_all
from gpuaas.cluster._scenario_objects import fleet_objects, workload_objects
from gpuaas.errors import ConfigError

__all__ = [
    *_models_all,
    "Instance",
    "default_scenario",
    "fleet_objects",
    "instances",
    "load_scenario",
    "parse_scenario",
    "workload_objects",
]


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("constant", "idle-after", "diurnal", "trace"):
            continue  # the discriminator's tag, not a field the user wrote
        else:
            path += f".{part}" if path else str(part)
    return path


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate already-parsed YAML; ``ConfigError`` names ``source`` and the field."""
    if not isinstance(data, dict):
        raise ConfigError("a scenario must be a mapping", file=source)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = shown_message(str(err["msg"]).removeprefix("Value error, "), err.get("input"))
        field = _field_path(tuple(err["loc"])) or None
        if field is None and ": " in msg and not msg.startswith(" "):
            field, _, msg = msg.partition(": ")
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise ConfigError(msg + more, file=source, field=field) from exc


def load_scenario(path: Path | str) -> Scenario:
    """Read and validate a scenario file."""
    return parse_scenario(read_yaml(path, "scenario"), str(path))


def default_scenario() -> Scenario:
    """The built-in demo scenario (``gpuaas/cluster/scenarios/default.yaml``)."""
    ref = resources.files("gpuaas.cluster").joinpath("scenarios/default.yaml")
    return parse_scenario(yaml.safe_load(ref.read_text(encoding="utf-8")), "default.yaml")


@dataclass(frozen=True)
class Instance:
    """One submitted copy of a scenario workload."""

    name: str
    spec: WorkloadSpec
    tenant: Tenant
    submit_at: timedelta

    @property
    def owner_kind(self) -> str:
        return self.spec.kind.value


def instances(scenario: Scenario) -> list[Instance]:
    """Every workload instance, in submission order (ties keep file order)."""
    out = []
    for spec in scenario.workloads:
        tenant = scenario.tenant(spec.tenant)
        for i, name in enumerate(spec.instance_names()):
            out.append(Instance(name, spec, tenant, spec.submit_at + i * spec.every))
    return sorted(out, key=lambda inst: inst.submit_at)
