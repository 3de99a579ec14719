"""What became of one decision or undo: the words the audit log, the results and the reports share.

A ``StrEnum``, so a member is its word wherever it goes (an audit row's ``outcome`` column, JSON, a
table cell) and compares equal to it, while the code names each outcome once.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["NOT_OK", "Outcome"]


class Outcome(StrEnum):
    planned = "planned"
    """Decided; in dry-run the final word, in apply the intent written before the cluster write."""
    applied = "applied"
    skipped = "skipped"
    """Not acted on, with a reason (opted out, already stopped, changed since, deleted...)."""
    failed = "failed"
    deferred = "deferred"
    """Over this run's cap: the next run decides again."""
    changed = "changed"
    """What a plan was computed from changed before it was applied: recomputed next run, never forced."""
    restored = "restored"
    released = "released"
    """A deadline hold lifted: the Workload is active again."""
    no_plan = "no plan"
    """A cohort the quota planner could not plan (contradictory input, another resource binding): explained."""
    no_op = "no-op"
    """An undo with nothing to undo (a dry-run, already restored)."""
    unknown = "unknown"
    """The write got no usable answer and the read-back could not tell: look at the object."""
    dry_run = "dry-run"
    """How a dry-run decision ended, in an incident review: decided, never carried out (its row says ``planned``)."""
    open = "open"
    """How an apply ended, in an incident review, when no completion row closed its intent yet: a run in
    progress, or one killed before the write's answer (the next run's recovery closes it)."""


NOT_OK: frozenset[Outcome] = frozenset({Outcome.failed, Outcome.unknown})
"""A write's results that end its run Failed and its command with exit 1: refused, or without an answer that says
whether it landed (a person looks; the next run settles it from the object). Either way not done as decided."""
