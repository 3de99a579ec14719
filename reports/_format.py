"""How reports and tables write numbers people read."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gpuaas.phrases import counted, duration, verdict_phrase
from gpuaas.policy import FreezeOn

__all__ = ["BUSY_LINE", "brief", "busy_line", "counted", "duration", "frozen_lead", "said_frozen", "gpus", "grouped_notes",
           "kube_unread", "misnamed_lead", "source_errors", "verdict_phrase", "with_failures"]


def gpus(value: float | None) -> str:
    """GPU counts without a trailing ``.0``; ``-`` when unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:g}"


BUSY_LINE = "another run is writing; nothing written"
"""The first line of a busy run's artifact and its Completed state's message (``tasks.writes``)."""


def busy_line(busy: str) -> str:
    """``Another run is writing; nothing written: <who holds what, how long this run waited>``."""
    return f"{BUSY_LINE[0].upper()}{BUSY_LINE[1:]}: {busy.removeprefix('no writes this run: ')}"


def frozen_lead(frozen: FreezeOn | None) -> str:
    """How a dry-run's headline starts: ``Dry-run: ``, or the change freeze that made it one."""
    return f"{str(frozen)[0].upper()}{str(frozen)[1:]}: dry-run, " if frozen else "Dry-run: "


def misnamed_lead(misnamed: Sequence[str], refused: str | None = None) -> str:
    """How a writing flow's headline starts while a tenant names a ClusterQueue the cluster lacks (``misnamed``: one
    sentence per tenant): ``<refused>: ...`` where that kept an apply run from writing (``Nothing applied``), else
    ``Warning: ...``; empty when there is none."""
    return f"{refused or 'Warning'}: {'; '.join(misnamed)}. " if misnamed else ""


def said_frozen(line: str, frozen: FreezeOn | None) -> str:
    """``line`` led by the change freeze that held the run back, where one did and the line does not say it yet:
    an operator who passed ``--apply`` learns it was overridden even when there was nothing to do."""
    if frozen is None or line.startswith(frozen_lead(frozen)):
        return line
    return f"{frozen_lead(frozen)}{line[0].lower()}{line[1:]}"


def source_errors(sources: Mapping[str, Any]) -> dict[str, str]:
    """Each required source that failed and its one-line error (``Prometheus at URL: name does not resolve``).

    ``sources``: a snapshot's ``SourceStatus`` objects or their dicts, by name."""
    errors = {}
    for name, status in sources.items():
        get = status.get if isinstance(status, dict) else lambda key, s=status: getattr(s, key, None)
        if not get("ok") and get("required") is not False:
            errors[name] = str(get("error") or f"{name}: no answer")
    return errors


BRIEF_REASON = 160
"""Characters of a refusal's reason in a headline: enough for the API server's status and what it refused."""


def brief(reason: str, limit: int = BRIEF_REASON) -> str:
    """``reason`` on one line, cut at a word past ``limit`` (`` …``): the first failure's reason in a headline, which
    must stay a line; the whole reason is in the row and the artifact."""
    said = " ".join(reason.split())
    return said if len(said) <= limit else said[:limit - 1].rsplit(" ", 1)[0] + " …"


def kube_unread(sources: Mapping[str, Any]) -> bool:
    """Whether the Kubernetes API failed this cycle: then the snapshot holds no workload and no queue, and a
    headline must say that nothing could be read, not that there is nothing (``no workload holds a GPU``)."""
    return "kube" in source_errors(sources)


def with_failures(headline: str, errors: Mapping[str, str]) -> str:
    """``Degraded: <each failed source>. <headline>``: what failed comes first, wherever the line is read."""
    return f"Degraded: {'; '.join(errors.values())}. {headline}" if errors else headline


_NOTE_KINDS = frozenset({"service", "tenant"})
"""Kinds a note may name its object with (``service llm-chat: ...``); other notes start with the name."""


def grouped_notes(lines: Sequence[str], shown: int = 3, *, name_first: bool = True) -> list[str]:
    """Notes that differ only in the object they name, once each with a count: ``<note> — 19 workloads (a, b, c, …)``.

    A note names its object with a kind and the name before a colon (``service llm-chat: replicas needed
    unknown``: ``— 4 services (...)``), or, where ``name_first``, with its first word; the rest is what is
    said about it. Other notes are kept as they are. Why: the same reason for twenty objects is one thing
    to read, not twenty."""
    groups: dict[tuple[str, str], list[str]] = {}
    for line in lines:
        name, _, rest = line.partition(" ")
        kind = ""
        if name in _NOTE_KINDS and ": " in rest:
            kind = name
            name, _, rest = rest.partition(": ")
        elif not name_first:
            name, rest = "", line
        groups.setdefault((kind, rest), []).append(name)
    out = []
    for (kind, rest), names in groups.items():
        if len(names) == 1 or not any(names):
            out += [f"{kind} {n}: {rest}" if kind else f"{n} {rest}".lstrip() for n in names]
            continue
        listed = ", ".join(n.removesuffix(":") for n in names[:shown]) + (", …" if len(names) > shown else "")
        out.append(f"{rest} — {len(names)} {kind + 's' if kind else 'workloads'} ({listed})")
    return out
