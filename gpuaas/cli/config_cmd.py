"""``gpuaas config``: validate a policy file, and the settings against the cluster, before a scheduled run."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from gpuaas.cli._common import OutputFormat, check_outputs, console, err_console, fail, print_json, settings_or_exit
from gpuaas.cli._progress import progress
from gpuaas.cli._tables import print_table
from gpuaas.errors import ConfigError
from gpuaas.policy import freezes_phrase, load_policy, retention_warnings


def check(
    file: Annotated[Path, typer.Argument(help="Policy YAML file to validate.")],
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Validate a policy file; exit 1 naming the file and field when it is wrong. A setting that asks the store for
    more than collect.retention_days keeps is a warning on stderr; the check still passes."""
    from gpuaas.loadtest import sweep_problem

    try:
        policy = load_policy(file)
    except ConfigError as exc:
        raise fail(str(exc)) from exc
    if (problem := sweep_problem(policy.services, file)) is not None:  # a file it names, read as the report will
        raise fail(str(problem))
    freezes = freezes_phrase(policy.freezes, datetime.now(UTC))
    warnings = retention_warnings(policy)
    if format is OutputFormat.json:
        print_json({"file": str(file), "valid": True, "freezes": freezes, "warnings": warnings,
                    "policy": policy.model_dump(mode="json")})
    else:
        console.print(
            f"[green]ok[/]: {escape(str(file))} — reclaim {policy.reclaim.mode.value} (cap {policy.reclaim.max_actions_per_run}), "
            f"rebalance {policy.rebalance.mode.value}, deadlines {policy.deadlines.mode.value}, {len(policy.tenants)} tenants, "
            f"{len(policy.services)} services, {escape(freezes)}",
            highlight=False, markup=True,
        )
    for line in warnings:  # after the verdict, as a run's warnings come after its outcome
        err_console.print(f"warning: {file}: {line}", markup=False, highlight=False, soft_wrap=True)


def tenant_rules(
    file: Annotated[Path, typer.Argument(help="Policy YAML file whose tenants map namespaces.")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the rules here instead of stdout.")] = None,
) -> None:
    """Prometheus recording rules for the policy's tenant of each namespace (what the Grafana dashboard joins on)."""
    from gpuaas.tenant_rules import tenant_rules_yaml

    check_outputs({"--output": output}, {"FILE": file})
    try:
        text = tenant_rules_yaml(load_policy(file), file)
    except ConfigError as exc:
        raise fail(str(exc)) from exc
    if output is None:
        console.print(text, end="", highlight=False, markup=False, soft_wrap=True)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:  # a full disk or an I/O error at the write names no file of its own
        raise fail(f"{output}: cannot write the rules ({exc.strerror or exc})") from exc
    console.print(f"wrote {output}", highlight=False, markup=False)


def preflight(
    all_writes: Annotated[bool, typer.Option("--all-writes", help=(
        "Ask about the writes of every flow, not only of those the policy applies: before switching one to apply."))]
    = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="Output format.")] = OutputFormat.table,
) -> None:
    """Check that the settings reach every source and that the GPU telemetry matches the workloads; writes nothing."""
    from gpuaas.operations.preflight import Verdict, headline
    from gpuaas.operations.preflight import preflight as run_checks
    from gpuaas.permissions import WRITES

    settings = settings_or_exit()
    with progress("reading every source once"):
        checks = run_checks(settings, writes_of=list(WRITES) if all_writes else None)
    first = headline(checks)
    if format is OutputFormat.json:
        err_console.print(first, markup=False, highlight=False, soft_wrap=True)  # stdout stays one JSON document
        print_json({"headline": first, "checks": [c.as_dict() for c in checks]})
    else:
        console.print(first, markup=False, highlight=False, soft_wrap=True)
        print_table("Preflight", ["check", "verdict", "detail"], [[c.name, c.verdict.value, c.detail] for c in checks],
                    notes=("detail",))
    failed = [c.name for c in checks if c.verdict is Verdict.failed]
    if failed:
        raise fail(f"{len(failed)} of {len(checks)} checks failed: {', '.join(failed)}")
