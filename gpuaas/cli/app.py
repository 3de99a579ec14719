"""The ``gpuaas`` command line: the same library calls the flows make, for people at a terminal.

Exit codes: 0 ok, 1 failed (a gpuaas error, printed on stderr), 2 usage. Data goes to
stdout (Rich tables for people, ``--format json`` for machines); errors to stderr.
"""

from __future__ import annotations

import sys

import typer

from gpuaas.cli._common import err_console, handle_errors

app = typer.Typer(
    name="gpuaas",
    help="Reclaim idle GPUs, rebalance Kueue quotas and report cost per verified outcome.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Sub-command groups register themselves on import; one line each.
from gpuaas.cli import config_cmd as _config  # noqa: E402

app.add_typer(_config.app, name="config")
from gpuaas.cli import db_cmd as _db  # noqa: E402

app.add_typer(_db.app, name="db")
from gpuaas.cli import audit_cmd as _audit  # noqa: E402

app.add_typer(_audit.app, name="audit")
from gpuaas.cli import collect_cmd as _collect  # noqa: E402

app.command("collect")(_collect.collect)
from gpuaas.cli import demo_cmd as _demo  # noqa: E402

app.command("demo")(_demo.demo)
from gpuaas.cli import cluster_cmd as _cluster  # noqa: E402
app.add_typer(_cluster.app, name="cluster")
from gpuaas.cli import replay_cmd as _replay  # noqa: E402
app.add_typer(_replay.app, name="replay")
from gpuaas.cli import reclaim_cmd as _reclaim  # noqa: E402

app.command("reclaim")(_reclaim.reclaim)
app.command("undo")(_reclaim.undo)


def main() -> None:
    """Console-script entry point."""
    with handle_errors():
        app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
