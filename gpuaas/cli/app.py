"""The ``gpuaas`` command line: the flows the scheduler runs, started now, for people at a terminal.

Exit codes (``gpuaas --help`` lists them): 0 ok, 1 failed (a gpuaas error, printed on stderr),
2 usage, 3 degraded (the command ran, but a source it needs did not answer, or GPU telemetry was
missing: its first line says which, where it points and why). Data goes to stdout (Rich tables for people, ``--format
json`` for machines); errors to stderr.

Sub-commands load lazily: their modules pull in pandas, SciPy, SQLAlchemy or Prefect, which took
seconds before ``--help`` could answer. The command list and its one-line descriptions are read
from the modules' source (``ast``), so they stay the commands' own docstrings without importing them.
"""

from __future__ import annotations

import ast
import gc
import importlib
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

import typer
from typer import _click as click  # Typer vendors click: its commands are these classes
from typer.core import TyperCommand, TyperGroup, TyperOption

from gpuaas.cli._common import EXIT_CODES_HELP, EXIT_FAILED, console, err_console, handle_errors
from gpuaas.cli._tables import set_wide
from gpuaas.cli._usage import usage_error_line

__all__ = ["COMMANDS", "app", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo_cmd", "demo"),
    "collect": ("collect_cmd", "collect"),
    "reclaim": ("reclaim_cmd", "reclaim"),
    "undo": ("reclaim_cmd", "undo"),
    "rebalance": ("rebalance_cmd", "rebalance"),
    "plan deadlines": ("deadlines_cmd", "deadlines"),
    "plan quotas": ("plan_quotas_cmd", "quotas"),
    "cost-report": ("cost_report_cmd", "cost_report"),
    "incident": ("incident_cmd", "incident"),
    "audit list": ("audit_cmd", "list_"),
    "capacity": ("capacity_cmd", "capacity"),
    "loadtest": ("loadtest_cmd", "loadtest"),
    "replay reclaim": ("replay_cmd", "reclaim"),
    "replay rebalance": ("replay_rebalance_cmd", "rebalance"),
    "replay deadlines": ("replay_deadlines_cmd", "deadlines"),
    "cluster up": ("cluster_cmd", "up"),
    "cluster down": ("cluster_cmd", "down"),
    "config check": ("config_cmd", "check"),
    "config tenant-rules": ("config_cmd", "tenant_rules"),
    "config preflight": ("config_cmd", "preflight"),
    "db upgrade": ("db_cmd", "upgrade"),
    "db status": ("db_cmd", "status"),
    "db copy": ("db_cmd", "copy"),
    "db archive": ("db_cmd", "archive"),
}
"""Every command, by its words after ``gpuaas`` -> (module in ``gpuaas.cli``, its function), in the order help
lists them. The one way a command is registered: a group (``plan``, ``replay``...) is the first word of its
commands, with its help in ``GROUPS``."""

GROUPS: dict[str, str] = {
    "plan": "Plan deadlines and quotas (reads only; never writes).",
    "audit": "Read the append-only audit log.",
    "replay": "Replay policies on recorded traces.",
    "cluster": "Run the embedded GPU cluster (API server, Kueue, Prometheus, OpenCost).",
    "config": "Check the policy file, and the settings against the cluster.",
    "db": "Manage the gpuaas database (SQLite or PostgreSQL).",
}


def _flags_show_no_type() -> None:
    """Help lists a flag without a type, as Click does: Typer 0.29 prints ``--apply <bool>``, which reads as if
    the flag took a value (``--apply true`` is then refused as an extra argument)."""
    show = getattr(TyperOption, "display_type_rich", None)
    if show is None or getattr(show, "flags_untyped", False):  # a Typer without the column, or done already
        return

    def display_type_rich(self: TyperOption, ctx: click.Context) -> str | None:
        return None if self.is_flag else show(self, ctx)

    display_type_rich.flags_untyped = True  # type: ignore[attr-defined]
    setattr(TyperOption, "display_type_rich", display_type_rich)  # noqa: B010 - mypy refuses a method assigned


_flags_show_no_type()

_WIDE_HELP = ("Every column of every table at its full width, however wide the terminal. Without it a table "
              "that does not fit moves its long reasons under it, then leaves out its optional columns, the least "
              "important first, and names them after it; one that still does not fit is printed wider than the "
              "terminal rather than splitting a word.")


def _set_wide(value: bool) -> None:
    if value:
        set_wide(True)


@cache
def _wide_option() -> click.Parameter:
    """The ``--wide`` flag as Typer builds it, for sub-commands (it sets the flag; their functions never see it)."""
    carrier = typer.Typer(add_completion=False)

    @carrier.command()
    def _carrier(wide: bool = typer.Option(False, "--wide", help=_WIDE_HELP, callback=_set_wide,
                                           expose_value=False)) -> None:
        """Never run: only its parameter is taken."""

    return typer.main.get_command(carrier).params[0]


def _accept_wide(command: click.Command) -> click.Command:
    """``--wide`` after any sub-command too (``gpuaas audit list --wide``), as before it."""
    if not any("--wide" in getattr(p, "opts", ()) for p in command.params):
        command.params.append(_wide_option())
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            _accept_wide(sub)
    return command


@cache
def _short_help(name: str) -> str:
    """The command's one-line help from its module's source, without importing it."""
    module, attr = COMMANDS[name]
    tree = ast.parse((Path(__file__).parent / f"{module}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == attr:
            return (ast.get_docstring(node) or "").split("\n\n")[0].replace("\n", " ")
    return ""


@cache
def _load(name: str) -> click.Command:
    """The command ``name`` (its words after ``gpuaas``), its module imported."""
    module, attr = COMMANDS[name]
    word = name.split()[-1]
    single = typer.Typer(add_completion=False)
    single.command(word)(getattr(importlib.import_module(f"gpuaas.cli.{module}"), attr))
    command = typer.main.get_command(single)
    command.name = word
    return _accept_wide(command)


class _Pending(TyperCommand):
    """A command not imported yet: its name and help line for the command list; parsing loads it."""

    def __init__(self, key: str) -> None:
        super().__init__(key.split()[-1], short_help=_short_help(key))
        self.key = key

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        return _load(self.key).make_context(info_name, args, parent=parent, **extra)


class _LazyGroup(TyperGroup):
    """The commands under ``prefix`` (none: the top level), listed from ``COMMANDS`` without importing them."""

    prefix: tuple[str, ...] = ()

    def list_commands(self, ctx: click.Context) -> list[str]:
        depth = len(self.prefix)
        words = [tuple(key.split()) for key in COMMANDS]
        return list(dict.fromkeys(w[depth] for w in words if w[:depth] == self.prefix and len(w) > depth))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        key = " ".join((*self.prefix, cmd_name))
        if key in COMMANDS:
            return _Pending(key)
        if key in GROUPS:
            return _group(key)
        return None

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, windows_expand_args: bool = True, **extra: Any) -> Any:
        """As Click's, but a usage error is one ``error:`` line on stderr (exit 2), as every other error is.

        Typer draws a usage error as a five-line panel under the usage line; a person (or a log) reading
        stderr then meets the one format gpuaas uses for failures nowhere else.
        """
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False,
                                windows_expand_args=windows_expand_args, **extra)
        given = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(given, prog_name, complete_var, standalone_mode=False,
                                windows_expand_args=windows_expand_args, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # the help is printed already
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            err_console.print(f"error: {usage_error_line(exc, given)}", markup=False, highlight=False, soft_wrap=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            err_console.print("aborted", markup=False, highlight=False)
            sys.exit(EXIT_FAILED)
        sys.exit(code if isinstance(code, int) else 0)


@cache
def _group(key: str) -> click.Command:
    group = _LazyGroup(name=key.split()[-1], help=GROUPS[key], no_args_is_help=True)
    group.prefix = tuple(key.split())
    return _accept_wide(group)


app = typer.Typer(
    name="gpuaas",
    cls=_LazyGroup,
    help="Reclaim idle GPUs, rebalance Kueue quotas and report cost per verified outcome.",
    epilog=EXIT_CODES_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("gpuaas")
        except PackageNotFoundError:  # run from a checkout that was never installed
            from gpuaas import __version__ as installed
        console.print(f"gpuaas {installed} (Python {sys.version.split()[0]})", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _options(wide: bool = typer.Option(False, "--wide", help=_WIDE_HELP),
             version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True,
                                          callback=_print_version, expose_value=False)) -> None:
    set_wide(wide)


def main() -> None:
    """Console-script entry point."""
    try:
        with handle_errors():
            app(prog_name="gpuaas")  # the name help and errors show, however it was started
    finally:
        # The process ends here: spare its exit the cyclic collector's walks over everything a command
        # loaded (seconds after a collect, a GB-sized heap at fleet scale). Exit handlers still run,
        # output is flushed, objects are freed by reference counting as usual.
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    main()
