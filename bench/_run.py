"""What every benchmark shares: its command line (``--smoke``), its headline, and how it fails.

``make bench`` runs each benchmark in a process of its own and ends with one summary, one line per
benchmark, read from the line :func:`headline` prints: so that format is written once, here.
``make test`` runs every benchmark with ``--smoke`` (its smallest size, seconds), so that an import
error or a changed API fails the suite, not the next full run weeks later. A benchmark that fails
(a missing binary or trace, a server that did not start, a figure past its target) says so in one
line on stderr and exits 1: :func:`run` turns any exception into that line, never a traceback.
"""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["HEADLINE", "ROOT", "TRACES", "BenchFailed", "Outcome", "headline", "parser", "run", "scratch"]

HEADLINE = "headline: "
ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "fixtures" / "traces"
"""The public traces, read in place next to the repository (never copied into it)."""


@dataclass
class Outcome:
    """One benchmark's run as the summary shows it."""

    name: str
    returncode: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0
    """CPU seconds of the benchmark and every process it waited for: on a shared host the steadier figure."""
    headline: str = ""
    json_lines: list[str] = field(default_factory=list)
    last_error: str = ""

    @classmethod
    def of(cls, name: str, returncode: int, seconds: float, cpu_s: float, out: list[str], err: list[str]) -> Outcome:
        """The outcome of a benchmark that wrote ``out`` and ``err`` (lines): its headline, JSON lines and last error."""
        heads = [line.removeprefix(HEADLINE) for line in out if line.startswith(HEADLINE)]
        errors = [line for line in err if line.strip()]
        return cls(name, returncode, seconds, cpu_s, heads[-1] if heads else "",
                   [line for line in out if _is_json_object(line)],
                   errors[-1].strip() if errors else ("no headline printed" if returncode == 0 else ""))

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and bool(self.headline)


def _is_json_object(line: str) -> bool:
    if not line.startswith("{"):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


class BenchFailed(Exception):
    """A figure missed its target: the benchmark ran, and its result is a failure."""


def parser(doc: str | None) -> argparse.ArgumentParser:
    """An argument parser whose description is the module docstring, with the shared ``--smoke``."""
    text = (doc or "").strip()
    out = argparse.ArgumentParser(description=text.splitlines()[0] if text else None)
    out.add_argument("--smoke", action="store_true",
                     help="the smallest size, in seconds: proves the benchmark runs, its figures mean nothing")
    return out


def scratch(prefix: str) -> Path:
    """A new directory under the system's temporary one, removed when the process exits.

    A benchmark's clusters, databases and Prefect homes are scratch: its figures are what it prints. Left
    behind, every ``make test`` (which runs each benchmark once) added a dozen directories to ``/tmp``.
    Removed at exit rather than at the end of a ``with`` block, because several outlive the block that
    made them (a Prefect home set in the environment for the rest of the run)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def headline(text: str) -> None:
    """The one line ``make bench``'s summary shows for this benchmark."""
    print(f"{HEADLINE}{text}", flush=True)


def run(main: Callable[[list[str]], int | None], name: str, argv: list[str] | None = None) -> int:
    """``main(argv)``'s exit status (``argv``: the command line's by default); an exception becomes one line
    on stderr (its innermost place) and 1. The smoke runner calls it in-process, so nothing here exits."""
    try:
        return main(sys.argv[1:] if argv is None else argv) or 0
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except BenchFailed as exc:
        print(f"{name}: FAILED: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 (every failure is reported the same way: one line, exit 1)
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        message = " ".join(str(exc).split())[:600]
        print(f"{name}: failed: {type(exc).__name__}: {message}{where}", file=sys.stderr)
        return 1
