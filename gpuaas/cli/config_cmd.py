"""``gpuaas config``: validate a policy file before it reaches a scheduled run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from gpuaas.cli._common import OutputFormat, console, fail, print_json
from gpuaas.errors import ConfigError
from gpuaas.policy import load_policy


def check(
    file: Annotated[Path, typer.Argument(help="Policy YAML file to validate.")],
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Validate a policy file; exit 1 naming the file and field when it is wrong."""
    try:
        policy = load_policy(file)
    except ConfigError as exc:
        raise fail(str(exc)) from exc
    if format is OutputFormat.json:
        print_json({"file": str(file), "valid": True, "policy": policy.model_dump(mode="json")})
        return
    console.print(
        f"[green]ok[/]: {escape(str(file))} — reclaim {policy.reclaim.mode.value} (cap {policy.reclaim.max_actions_per_run}), "
        f"rebalance {policy.rebalance.mode.value}, {len(policy.tenants)} tenants, "
        f"{len(policy.services)} services",
        highlight=False, markup=True,
    )


def tenant_rules(
    file: Annotated[Path, typer.Argument(help="Policy YAML file whose tenants map namespaces.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the rules here instead of stdout.")] = None,
) -> None:
    """Prometheus recording rules for the policy's tenant of each namespace (what the Grafana dashboard joins on)."""
    from gpuaas.tenant_rules import tenant_rules_yaml

    try:
        text = tenant_rules_yaml(load_policy(file), file)
    except ConfigError as exc:
        raise fail(str(exc)) from exc
    if output is None:
        console.print(text, end="", highlight=False, markup=False, soft_wrap=True)
        return
    output.write_text(text, encoding="utf-8")
    console.print(f"wrote {output}", highlight=False, markup=False)
