"""``gpuaas plan``: the planners on a file or on the live cluster, without writing anything.

Why a group: a planner should be tried on a hand-written problem before its flow is trusted
with the cluster. Each planner's command lives in its own module and is registered here.
"""

from __future__ import annotations

import typer

__all__ = ["app"]

app = typer.Typer(help="Plan deadlines and quotas (reads only; never writes).", no_args_is_help=True)


@app.callback()
def _group() -> None:
    """Plan deadlines and quotas (a group, so that each planner keeps its own name)."""


from gpuaas.cli import deadlines_cmd, plan_quotas_cmd  # noqa: E402  (each planner registers itself in one line)

app.command("deadlines")(deadlines_cmd.deadlines)
app.command("quotas")(plan_quotas_cmd.quotas)
