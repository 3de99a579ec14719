"""The ``gpuaas`` command line: the flows the scheduler runs, started now, for people at a terminal.

Exit codes: 0 ok, 1 failed (a gpuaas error, printed on stderr), 2 usage. Data goes to
stdout (Rich tables for people, ``--format json`` for machines); errors to stderr.
"""

from __future__ import annotations

import typer

from gpuaas.cli import (
    audit_cmd,
    capacity_cmd,
    cluster_cmd,
    collect_cmd,
    config_cmd,
    cost_report_cmd,
    db_cmd,
    demo_cmd,
    incident_cmd,
    loadtest_cmd,
    plan_cmd,
    rebalance_cmd,
    reclaim_cmd,
    replay_cmd,
)
from gpuaas.cli._common import handle_errors, set_wide

app = typer.Typer(
    name="gpuaas",
    help="Reclaim idle GPUs, rebalance Kueue quotas and report cost per verified outcome.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)



@app.callback()
def _options(wide: bool = typer.Option(False, "--wide", help="Every column of every table, however wide; by default "
                                       "columns that do not fit the terminal (80 under make) are left out.")) -> None:
    set_wide(wide)


app.command("demo")(demo_cmd.demo)
app.command("collect")(collect_cmd.collect)
app.command("reclaim")(reclaim_cmd.reclaim)
app.command("undo")(reclaim_cmd.undo)
app.command("rebalance")(rebalance_cmd.rebalance)
app.add_typer(cluster_cmd.app, name="cluster")
app.add_typer(audit_cmd.app, name="audit")
app.add_typer(config_cmd.app, name="config")
app.add_typer(db_cmd.app, name="db")
app.add_typer(replay_cmd.app, name="replay")
app.add_typer(plan_cmd.app, name="plan")
app.command("capacity")(capacity_cmd.capacity)
app.command("loadtest")(loadtest_cmd.loadtest)
app.command("cost-report")(cost_report_cmd.cost_report)
app.command("incident")(incident_cmd.incident)


def main() -> None:
    """Console-script entry point."""
    with handle_errors():
        app()


if __name__ == "__main__":  # pragma: no cover
    main()
