"""``gpuaas db``: the schema of the audit/snapshot database, and the archive of its old audit rows."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuaas.cli._common import (
    OutputFormat,
    check_outputs,
    console,
    fail,
    print_json,
    settings_or_exit,
    usage_error,
    visible,
)
from gpuaas.cli._progress import progress
from gpuaas.errors import GpuaasError
from gpuaas.store import (
    WRITES_LOCK,
    ArchivePlan,
    HeldLock,
    Holdings,
    Store,
    archive_audit,
    before_upgrade,
    copy_database,
    cutoff_problem,
    holdings,
    plan_archive,
    redact_url,
    schema_problem,
    sqlite_file,
)

__all__ = ["archive", "copy", "status", "upgrade"]


def _say_line(text: str) -> None:
    """Print ``text`` wrapped to the terminal at its spaces, as rich wraps the other commands' sentences, but never
    inside a word: a URL, a path or a SHA-256 longer than what is left of a line starts the next one, and one longer
    than the terminal stays whole on its own line (copied from the terminal, it must still be the path). An indented
    line keeps its indent on the lines it wraps onto."""
    indent = text[:len(text) - len(text.lstrip(" "))]
    for part in visible(text).split("\n"):
        console.print(textwrap.fill(part.strip(" "), width=console.width, initial_indent=indent,
                                    subsequent_indent=indent, break_long_words=False, break_on_hyphens=False),
                      highlight=False, markup=False, soft_wrap=True)


def upgrade() -> None:
    """Create the database if needed and migrate it to the newest schema, in place. The one way to migrate a shared
    (PostgreSQL) database, which flow runs leave as it is: with the scheduled runs paused, then roll this version
    out. Refused while a run holds the cluster writes. A SQLite file is copied beside itself first."""
    settings = settings_or_exit()
    store = Store(settings.database_url_value, migrate=False)
    try:
        busy = _writes_held(store)
        if busy is not None:
            raise fail(f"{redact_url(settings.database_url_value)}: {busy.holder} holds the cluster writes until "
                       f"{busy.expires_at:%Y-%m-%d %H:%M:%S} UTC: pause the scheduled runs and let it finish first; "
                       "nothing was migrated")
        before, after = store.upgrade()
    except GpuaasError as exc:  # a newer schema, a migration the database refused: one line, no traceback
        raise fail(str(exc)) from exc
    finally:
        store.close()
    url = redact_url(settings.database_url_value)
    if before == after:
        _say_line(f"{url}: already at schema {after}")
        return
    kept = before_upgrade(settings.database_url_value, before) if before is not None else None
    _say_line(f"{url}: upgraded schema {before or '(empty)'} -> {after}"
              + (f" (the file as it was: {kept})" if kept is not None else ""))


def _writes_held(store: Store) -> HeldLock | None:
    """Who holds the cluster writes unexpired, and until when; None where nobody does. Read at any schema that has
    the locks' table (a database behind this gpuaas too: before an upgrade is when it matters)."""
    try:
        return store.held_lock(WRITES_LOCK) if store.current_revision() is not None else None
    except GpuaasError:  # no locks' table yet (an empty database, or one from before the locks)
        return None


def _holdings(store: Store) -> Holdings | None:
    """What the store holds, or None where it cannot be counted: the status still says the schema and the lock."""
    try:
        return holdings(store)
    except GpuaasError:
        return None


def status() -> None:
    """Show the database URL (password hidden), its schema version, what it holds (the audit log grows for as long as
    gpuaas runs, until gpuaas db archive moves its old rows out: when it last did) and who holds the cluster writes. Exit 0 when it
    is at the schema this gpuaas reads, or when there is no database yet (the first flow creates it); 1 when it is
    behind (run gpuaas db upgrade) or newer (upgrade gpuaas), or cannot be read, so that a health check can run it."""
    settings = settings_or_exit()
    url = redact_url(settings.database_url_value)
    file = sqlite_file(settings.database_url_value)
    if file is not None and not file.is_file():  # say so, rather than create one at a mistyped path
        _say_line(f"{url}: no database there yet; the first flow or 'gpuaas db upgrade' creates it")
        return
    store = Store(settings.database_url_value, migrate=False, read_only=True)
    held_now: Holdings | None = None
    try:
        current, head = store.current_revision(), store.head_revision()
        held = _writes_held(store)
        if current is not None and current == head:
            held_now = _holdings(store)
    finally:
        store.close()
    if current is None:
        _say_line(f"{url}: no gpuaas schema yet; the first flow or 'gpuaas db upgrade' creates it")
        return
    problem = schema_problem(settings.database_url_value, current, head)
    if problem is None:
        _say_line(f"{url}: schema {current}, up to date")
        if held_now is not None:
            _say_line(f"It {held_now.words()}.")
            hint = held_now.vacuum_hint()
            if hint is not None:
                _say_line(hint)
    # Said at any schema: before an upgrade, who still writes is what the operator must know.
    writes = "free" if held is None else (
        f"held by {held.holder} until {held.expires_at:%Y-%m-%d %H:%M:%S} UTC unless it renews it (a run killed "
        "holding it keeps it until then)")
    _say_line(f"cluster writes ({WRITES_LOCK!r} lock): {writes}")
    if problem is not None:
        raise fail(problem)


def copy(
    source: Annotated[str, typer.Option("--from", metavar="URL|FILE", help=(
        "The database to copy: a SQLAlchemy URL, or the path of a SQLite file (the trial's "
        "~/.local/share/gpuaas/gpuaas.db). Only read."))],
) -> None:
    """Copy the audit log, snapshots and fleet history of another gpuaas database into this one (GPUAAS_DATABASE_URL),
    which must hold none yet: moving from a trial's SQLite file to a shared PostgreSQL. Audit ids are kept, so
    `gpuaas undo ID` and the ids in the cluster's Events still name the same rows. Stop the flows first; the copy is
    one transaction, and a row the database refuses leaves it empty."""
    settings = settings_or_exit()
    url = source if "://" in source else f"sqlite:///{_copy_source_file(source)}"
    try:
        with Store(url, migrate=False, read_only=True) as reading, \
                Store(settings.database_url_value, migrate=False) as writing, \
                progress("copying the gpuaas database") as step:
            copied = copy_database(reading, writing, step)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    _say_line(f"Copied {copied.audit:,} audit entries, {copied.snapshots:,} snapshots and "
              f"{copied.queue_history + copied.tenant_history:,} fleet-history rows from {redact_url(url)} into "
              f"{redact_url(settings.database_url_value)}; audit ids kept, so `gpuaas undo ID` and the ids in "
              "the cluster's Events name the same rows.")


def _copy_source_file(source: str) -> Path:
    """The SQLite file ``--from`` names, resolved; a path that holds no file is refused naming ``--from``: the
    store's own words for a missing file point at GPUAAS_DATABASE_URL and GPUAAS_DATA_DIR, which name the target."""
    file = Path(source).expanduser().resolve()
    if file.is_dir():
        raise fail(f"--from {source}: a directory, not a SQLite file (a trial's database is "
                   "~/.local/share/gpuaas/gpuaas.db, or gpuaas.db in the GPUAAS_DATA_DIR it ran with)")
    if not file.exists():
        raise fail(f"--from {source}: no such file (a trial's database is ~/.local/share/gpuaas/gpuaas.db, or "
                   "gpuaas.db in the GPUAAS_DATA_DIR it ran with)")
    return file


def _cutoff(text: str) -> datetime:
    """``--before``: a date (midnight UTC) or an ISO time (UTC unless it has an offset), at least 30 days ago."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        cutoff = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise usage_error(f"expected a date (2026-09-01, midnight UTC) or an ISO time (UTC unless it has an "
                          f"offset), got {text!r}", "--before") from exc
    problem = cutoff_problem(cutoff, datetime.now(UTC))
    if problem is not None:
        raise usage_error(problem, "--before")
    return cutoff


def _when(at: datetime | None) -> str:
    return f"{at:%Y-%m-%d %H:%M} UTC" if at is not None else "-"


def _plan_lines(plan: ArchivePlan) -> list[str]:
    """What the archive moves out and what it keeps back, in numbers: the body of the dry run and of the result."""
    lines = []
    if plan.rows:
        lines.append(f"  written {_when(plan.oldest)} to {_when(plan.newest)}, ids {plan.first_id} to {plan.last_id}")
        lines.append("  by flow: " + ", ".join(f"{flow} {n:,}" for flow, n in plan.by_flow.items()))
    kept = sum(plan.kept.values())
    if kept:
        lines.append(f"Kept back {kept:,} older entries that gpuaas still reads:")
        lines.extend(f"  {n:>9,}  {reason.value}" for reason, n in plan.kept.items())
    lines.append(f"{plan.newer:,} entries from {_when(plan.cutoff)} on stay.")
    return lines


def archive(
    before: Annotated[str, typer.Option("--before", metavar="DATE", help=(
        "Archive the audit entries written before this instant: a date (2026-09-01, midnight UTC) or an ISO time "
        "(UTC unless it has an offset); at least 30 days ago."))],
    to: Annotated[Path, typer.Option("--to", metavar="FILE", help=(
        "The archive to write: gzip-compressed JSON Lines (FILE.jsonl.gz), a header line then one line per entry. "
        "Never written over."))],
    apply: Annotated[bool, typer.Option("--apply", help=(
        "Write FILE and remove the archived entries from the database; without it, say what would be archived "
        "and write nothing."))] = False,
    format: Annotated[OutputFormat, typer.Option("--format", help="table (for people) or json.")] = OutputFormat.table,
) -> None:
    """Move the audit entries older than --before to a file, then out of the database: dry run unless --apply.
    Entries gpuaas still reads stay (linked to a newer entry, open intents, reclaims never restored, holds never
    released, the latest quota plan of each queue); the dry run says how many, and why. With --apply the file is
    written beside FILE, read back and checked, then the entries are removed in one transaction that appends an
    audit entry naming the file and its SHA-256; the cluster writes are held meanwhile. A failure removes nothing
    and leaves no file."""
    cutoff = _cutoff(before)
    check_outputs({"--to": to}, {}, renamed=True)
    if to.exists():
        raise usage_error(f"{to} already exists: an archive is never written over a file; give another path", "--to")
    settings = settings_or_exit()
    url = settings.database_url_value
    try:
        if not apply:
            with Store(url, migrate=False, read_only=True) as store:
                problem = schema_problem(url, store.current_revision(), store.head_revision())
                if problem is not None:
                    raise fail(problem)
                plan = plan_archive(store, cutoff)
            _say(plan, to, None, format)
            return
        from gpuaas.actions import new_holder

        with Store(url, migrate=False) as store, progress("archiving the audit log") as step:
            done = archive_audit(store, cutoff, to, holder=new_holder("db-archive"), progress=step)
            plan = done.plan if done is not None else plan_archive(store, cutoff)
    except GpuaasError as exc:
        raise fail(str(exc)) from exc
    _say(plan, to, done, format, applied=True)


def _say(plan: ArchivePlan, to: Path, done: Any, format: OutputFormat = OutputFormat.table, *,
         applied: bool = False) -> None:
    """The answer: the plan in numbers, and for an archive done, the file, its SHA-256 and the audit row."""
    if format is OutputFormat.json:
        extra = {"file": str(done.file), "sha256": done.sha256, "audit_id": done.audit_id} if done else {}
        print_json({"applied": done is not None, **plan.as_dict(), **extra})
        return
    if done is not None:
        head = (f"Archived {plan.rows:,} audit entries from before {_when(plan.cutoff)} to {done.file} (sha256 "
                f"{done.sha256}); audit #{done.audit_id} records it. The file is yours to keep: zcat {done.file} | jq")
    elif not plan.rows:
        head = f"Nothing to archive before {_when(plan.cutoff)}; nothing written."
    else:
        head = f"Would archive {plan.rows:,} audit entries from before {_when(plan.cutoff)} to {to}:"
    for line in [head, *_plan_lines(plan)]:
        _say_line(line)
    if done is None and plan.rows and not applied:
        _say_line(f"Dry run: nothing written. Run again with --apply to write {to} and remove these entries.")
