"""What every sub-command shares: consoles, output format, error handling.

Errors are printed once, on stderr, as one line and without a traceback: a ``GpuaasError``
already says what went wrong and where (file, field, object). ``main`` also maps what the
operating system and the standard library raise on bad input (``OSError`` with its path,
``ValueError``, ``UnicodeDecodeError``, ``OverflowError``, ...) the same way, so that no
input reaches the user as a traceback; commands map the ones they can name better first.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer._click.core import Context as ClickContext
from typer._click.core import ParameterSource
from typer._click.exceptions import BadParameter, UsageError
from typer._click.globals import get_current_context
from typer.core import TyperOption

from gpuaas.cli._usage import shown_value
from gpuaas.errors import SOURCE_NAMES, ConfigError, GpuaasError, KubeAPIError

if TYPE_CHECKING:
    from gpuaas.settings import GpuaasSettings
    from gpuaas.store import Store

__all__ = [
    "EXIT_CODES_HELP",
    "EXIT_DEGRADED",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "audit_id",
    "fail_on_refused",
    "check_outputs",
    "flag_given",
    "namespace_name",
    "object_name",
    "OutputFormat",
    "console",
    "describe_error",
    "err_console",
    "fail",
    "end_degraded",
    "flag_error",
    "handle_errors",
    "lead",
    "print_json",
    "settings_or_exit",
    "store_or_exit",
    "unsplit",
    "usage_error",
    "visible",
]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DEGRADED = 3
"""The command ran and printed its answer, but a source it needs failed or GPU telemetry was missing: the
answer is partial, and a script must not read "nothing idle" as "nothing idle". Its first line says which."""

EXIT_CODES_HELP = ("Exit codes: 0 ok; 1 failed (the error on stderr); 2 usage; 3 degraded: a source did not "
                   "answer or GPU telemetry was missing, the first line says which (the output is partial).")

_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))}
"""Control characters (C0 but tab and newline, DEL, C1) as the escapes Python writes them with."""


def visible(text: str) -> str:
    """``text`` with its control characters written out (``a\\x00b``), for a terminal.

    Names and reasons come from files and from the cluster: a NUL would vanish on the screen and an
    escape sequence would be obeyed by the terminal, so the reader would not see what is there.
    """
    return text.translate(_CONTROL)


class _Console(Console):
    """A console that writes out the control characters of the text it is given (:func:`visible`), whichever
    command prints it: tables, whose cells are not text until rendered, take :func:`visible` themselves."""

    def print(self, *objects: Any, **options: Any) -> None:
        super().print(*(visible(o) if isinstance(o, str) else o for o in objects), **options)


# No markup by default: what is printed holds names, reasons and paths from the cluster and from files,
# and rich would read ``[stop, length]`` as a style (and drop it) or ``[/x]`` as a closing tag (and fail).
console = _Console(markup=False)
err_console = _Console(stderr=True, markup=False)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def as_flag(exc: ConfigError, renames: Mapping[str, str] | None = None) -> str:
    """``exc`` with the field it names (``prompt_spread``) as the flag the reader typed (``--prompt-spread``);
    ``renames`` for a flag spelled otherwise. An error naming no field, or a file, is left as it is."""
    text = str(exc)
    if not exc.field or exc.field.startswith("-") or not text.startswith(f"{exc.field}: "):
        return text
    flag = (renames or {}).get(exc.field, "--" + exc.field.replace("_", "-"))
    return f"{flag}: {text.removeprefix(f'{exc.field}: ')}"


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    """Print ``error: message`` on stderr and return the Exit to raise."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
    return typer.Exit(code=code)


def busy(writes_busy: str) -> typer.Exit:
    """``error: Another run is writing; nothing written: <who holds what, how long this run waited>``, the run's
    own headline (the flow run's state message says the same), and the Exit 1 to raise: the run wrote nothing."""
    from reports import busy_line

    return fail(busy_line(writes_busy))


_GOT = re.compile(r", got [^;]*$")
"""A message's closing ``, got VALUE``."""


def fail_on_refused(refused: Sequence[str], total: int, noun: str, see: tuple[str, str], verb: str = "failed") -> None:
    """Exit 1 when the cluster refused a write, after the run's output is printed: ``1 of 11 reclaims failed (#9);
    see its row's reason``. Not 0 (a script would read success) nor 3 (the sources answered). ``see``: where the
    reason is, for one and for several; ``verb``: what became of them (``failed or unknown``, where a write's
    answer was lost too)."""
    if refused:
        raise fail(f"{len(refused)} of {total} {noun} {verb} ({', '.join(refused)}); see "
                   + (see[0] if len(refused) == 1 else see[1]))


def flag_given(ctx: ClickContext, name: str) -> bool:
    """Whether the command line (or its environment variable) gave the parameter ``name``, not its default: what a
    command checks before it refuses a flag that would change nothing."""
    return ctx.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)


_MAX_AUDIT_ID = 2**63 - 1


def audit_id(text: str) -> int:
    """An audit id as typed, or as pasted from a headline with its full stop (``gpuaas undo 41 42.``)."""
    digits = text.strip().rstrip(".,;")
    # ASCII digits only (``str.isdigit`` takes ``²``, which ``int`` refuses), and no more of them than the
    # largest id has: ``int`` refuses a string of over 4300 digits with a message about ``sys``.
    if (not re.fullmatch(r"[0-9]+", digits) or len(digits.lstrip("0")) > len(str(_MAX_AUDIT_ID))
            or not 1 <= int(digits) <= _MAX_AUDIT_ID):
        raise typer.BadParameter(f"expected an audit id, a whole number from 1 to {_MAX_AUDIT_ID} "
                                 f"(see gpuaas audit list), got {shown_value(text)}")
    return int(digits)


def namespace_name(text: str) -> str:
    """A ``--namespace`` as the API server can hold one: another (``''``, ``Team_A``) matches nothing, silently."""
    return _kubernetes_name(text, label=True)


def object_name(text: str) -> str:
    """A ``--queue`` (a ClusterQueue's name) as the API server can hold one."""
    return _kubernetes_name(text, label=False)


def _kubernetes_name(text: str, *, label: bool) -> str:
    from gpuaas._policy_model import kubernetes_name_problem

    if (problem := kubernetes_name_problem(text, label=label)) is not None:
        raise typer.BadParameter(problem)
    return text


def usage_error(message: str, flag: str | None = None) -> UsageError:
    """A usage error the command found itself (a flag's value it refuses, flags that do not go together), to raise.

    It ends as Click's own refusals do (``--budget nan``): exit 2 and one line, ``error: Invalid value for
    '--from': expected an ISO time ..., got 'yesterday'; see gpuaas incident --help``, written by the
    top-level handler (``usage_error_line``). A script can then tell "called wrong" (2) from "ran and
    failed" (1). ``flag``: the flag whose value is wrong (its name is taken off the front of ``message``);
    none for flags that do not go together, where ``message`` names them.
    """
    ctx = get_current_context(silent=True)
    if flag is None:
        return UsageError(message, ctx)
    param = next((p for p in ctx.command.params if isinstance(p, TyperOption) and flag in p.opts), None) if ctx else None
    message = message.removeprefix(f"{flag}: ")
    if ctx and param and param.name and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE:
        message = _GOT.sub("", message)  # the line ends with the value as typed (``(got '2')``), not as parsed (2.0)
    return BadParameter(message, ctx, param, None if param else repr(flag))


def _same_file(a: Path, b: Path) -> bool:
    """Whether writing ``a`` would write ``b``: the same file (through a link too), or the same path once resolved."""
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):  # unreadable, a loop of links: not provably the same; the write reports it
        return False


def check_outputs(outputs: Mapping[str, Path | None], inputs: Mapping[str, Path | Sequence[Path] | None],
                  *, make_folders: bool = False, renamed: bool = False) -> None:
    """A usage error (exit 2), before anything is read or written, for an output path the command could not
    write, or should not: said now rather than after the work (or once a cluster has started), naming the flag.

    Refused: an output that is one of the command's input files (``gpuaas config tenant-rules p.yaml -o p.yaml``
    would replace the policy with its rules; ``cluster up --env-file s.yaml --scenario s.yaml`` the scenario);
    a directory; a path whose folder does not exist, or is not a folder, or cannot be written in (a file is
    made and removed there at once to find out, unless the output is a device, a pipe, or a file that exists and
    may be written: ``-o /dev/null``); a path that cannot be looked up (a folder on the way that may not be
    searched). ``make_folders``: the command makes the missing folders when
    it writes, so the nearest folder that exists is the one that must be writable. ``renamed``: the outputs are
    written beside and renamed into place (a reader never sees half of one), so a device or a pipe there is
    refused too: the rename would replace it with a file (``--env-file /dev/null`` run as root would replace the
    system's ``/dev/null``). Keys are the options as typed (``--plot``, or ``FILE`` for an argument); an absent
    one is None.
    """
    for out_name, out in outputs.items():
        if out is None:
            continue
        for in_name, given in inputs.items():
            paths = [given] if isinstance(given, Path) else list(given or [])
            if any(_same_file(out, path) for path in paths):
                raise usage_error(f"{out_name} and {in_name} name the same file ({out}): writing it would overwrite "
                                  f"the input; give {out_name} another path")
        if renamed and _special(out):
            raise usage_error(f"{out} is a device or a pipe, which the file written beside and renamed into place "
                              "would replace; give the path of a file", out_name)
        _check_writable(out, out_name, make_folders=make_folders)


def _special(path: Path) -> bool:
    """Whether something other than a file or a folder is there (a device, a pipe, a socket)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False  # nothing there, or not to be looked up: the writability check says which
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _check_writable(path: Path, flag: str, *, make_folders: bool) -> None:
    """Refuse ``path`` (a file to write) as ``flag``'s usage error when it is a directory or its folder is not
    one that exists and can be written in. A path that exists and may be written (``-o /dev/null``, a writable
    file in a read-only folder) is not probed: writing it makes nothing in its folder; nor is a device or
    a pipe, which the write does not replace."""
    try:
        if path.is_dir():
            raise usage_error("is a directory; give the path of a file to write", flag)
        if _written_in_place(path):
            return
        folder = path.parent
        if make_folders:
            while not folder.exists() and folder != folder.parent:  # the folders missing are made when it is written
                folder = folder.parent
        elif not folder.exists():
            raise usage_error(f"folder {folder} does not exist; make it first, or give a path in one that does", flag)
        if not folder.is_dir():
            raise usage_error(f"{folder} is not a directory", flag)
    except OSError as exc:  # a folder on the way that may not be looked into: Permission denied
        raise usage_error(f"cannot look up {path}: {exc.strerror or exc}", flag) from exc
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".gpuaas-probe-"):
            pass
    except OSError as exc:
        raise usage_error(f"cannot write in {folder}: {exc.strerror}", flag) from exc


def _written_in_place(path: Path) -> bool:
    """Whether writing ``path`` writes what is there, not a file made in its folder: a device or a pipe, or a file
    that exists and may be written."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):  # nothing there: the write makes it (or says why)
            return False
        raise
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or (stat.S_ISREG(mode) and os.access(path, os.W_OK))


def flag_error(exc: ConfigError, renames: Mapping[str, str] | None = None) -> UsageError | typer.Exit:
    """``exc`` to raise: a value refused for the flag its field names (``slo_seconds``, ``--budget``; ``renames``
    as for :func:`as_flag`) is that flag's usage error (:func:`usage_error`, exit 2); one about a file, or
    naming no flag, is a failure (:func:`fail`, exit 1: the input was read and found wrong)."""
    if exc.file is None and exc.field:
        flag, sep, rest = as_flag(exc, renames).partition(": ")
        if sep and flag.startswith("-"):
            return usage_error(rest, flag)
    return fail(str(exc))


BAD_INPUT_ERRORS = (OSError, ValueError, ArithmeticError, LookupError, TypeError, RecursionError, MemoryError)
"""What bad input (a path, a file's bytes, a number) surfaces as when no command mapped it first."""


def describe_error(exc: BaseException) -> str:
    """One line naming what was wrong: the path and the system's reason for an ``OSError``."""
    if isinstance(exc, KubeAPIError) and exc.url:  # the command ends on it: which API answered, as a source's does
        text = f"{SOURCE_NAMES['kube']} at {exc.url}: {exc}"
    elif isinstance(exc, GpuaasError):
        text = str(exc)
    elif isinstance(exc, OSError) and exc.strerror:
        names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
        text = f"{exc.strerror}: {' -> '.join(names)}" if names else exc.strerror
    elif isinstance(exc, UnicodeDecodeError):
        text = f"UnicodeDecodeError: input is not {exc.encoding} (byte {exc.start}: {exc.reason})"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return " ".join(text.split())[:1000]


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn a GpuaasError, or bad input the standard library rejected, into ``error: ...`` and exit 1."""
    try:
        yield
    except (GpuaasError, *BAD_INPUT_ERRORS) as exc:
        err_console.print(f"error: {describe_error(exc)}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(EXIT_FAILED)


def store_or_exit(settings: GpuaasSettings, *, read_only: bool = False) -> Store:
    """The settings' store; one it cannot open (``read_only``: or not there at this schema) ends the command."""
    from gpuaas.store import open_store

    try:
        return open_store(settings, read_only=read_only)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc


def settings_or_exit(**overrides: Any) -> GpuaasSettings:
    """Load settings; a configuration error ends the command with exit code 1."""
    from gpuaas.settings import load_settings

    try:
        return load_settings(**overrides)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc


_WORD = r"[^\s;,()]*[^\s.;,()]"
"""A word that does not end the sentence: a path's or a number's dot is kept, a full stop after it is not."""
_COMMAND = re.compile(
    r"\bgpuaas (?:(?:audit|cluster|config|db|replay) [a-z][a-z-]*|[a-z][a-z-]*)"  # a command (a group's: ``db status``)
    r"(?: (?:--[a-z][a-z-]*(?:[ =](?!--)" + _WORD + r")?"  # an option, with its value (``--flow reclaim``)
    r"|\d+(?:\.\d+)?|[^\s;,()]*/" + _WORD + r"|[\w-]+(?:\.[\w-]+)+|[A-Z][A-Z_]+\b))*")  # ids, paths, files, ARGS
"""A command a line suggests (``gpuaas reclaim --apply``, ``gpuaas undo 41 42``): a person copies it whole."""

_JOINED = "\ue000"
"""Stands for a space inside a suggested command while a line is wrapped: not whitespace, one cell wide."""


def unsplit(line: str, width: int) -> str:
    """``line`` wrapped at ``width`` cells as rich wraps it, but never inside a suggested command (``_COMMAND``):
    that moves whole to the next line, since half of it pasted into a shell runs the other half's command."""
    held = _COMMAND.sub(lambda m: m.group().replace(" ", _JOINED), line)
    wrapped = Text(held).wrap(console, width)
    return "\n".join(part.plain.replace(_JOINED, " ").rstrip() for part in wrapped)


def lead(result: dict[str, Any], format: OutputFormat) -> None:
    """The run's headline as the command's first line: above the tables, or on stderr beside ``--format json``
    (stdout stays one JSON document, which carries the headline too). A failed source leads it. Wrapped at the
    terminal's width between words, never inside the command it suggests (``unsplit``)."""
    line = result.get("headline")
    if not line:
        return
    if format is OutputFormat.json:
        err_console.print(line, markup=False, highlight=False, soft_wrap=True)
    else:
        console.print(Text(unsplit(visible(line), console.width), style="yellow" if result.get("degraded") else "bold"),
                      highlight=False, soft_wrap=True)


def end_degraded(result: dict[str, Any]) -> None:
    """Exit ``EXIT_DEGRADED`` after the output when the run was degraded (a source failed, telemetry missing)."""
    if result.get("degraded"):
        raise typer.Exit(code=EXIT_DEGRADED)


def print_json(data: Any) -> None:
    """Plain JSON on stdout: no colour, stable key order, dates as ISO strings."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
