"""Audit-log reads at volume: each read a flow run makes, on SQLite and PostgreSQL, at 90 days of a 2,000-GPU fleet.

The audit log is never pruned (only ``gpuaas db archive`` moves rows out), and every flow run reads it: a
reclaim run its newest rows, its decided keys, its recent restores and its open intents; a deadlines run the
rows proving its hold marks and its day of rows; a rebalance run its week; an operator ``gpuaas audit list``
(with ``--object``, which reads each row's evidence JSON), ``gpuaas db status`` and ``gpuaas db archive``. The
same 90 days of rows are written in bulk to a SQLite file and to a fresh PostgreSQL schema, as a 2,000-GPU fleet
reclaimed every 10 minutes writes them (about 4,000 rows a day):

* reclaim decisions with per-GPU evidence (8 GPUs a target), each stop an intent and its completion, some failed;
* skips and deferrals of the same objects for the same cause, recorded once an hour
  (``reclaim.record_skips_every_minutes``), a third of them Workloads naming the owner they were stopped through;
* undos of a quarter of the stops, hours later (a restore intent and its completion, ``restore/<id>`` keys);
* deadline holds and demotions with their completions, released hours later through a release intent and its
  completion (``refers_to`` chains), a few never released;
* a nightly quota plan with its per-queue changes.

Then both databases are analysed (as autovacuum and ``PRAGMA optimize`` leave a live one; PostgreSQL vacuumed too) and each read is timed
through gpuaas's own code, warm, the median of several runs, with the rows it returned (which must agree between
the backends); the archive's dry run too, then its apply once (60 days kept). Sizes are the audit log's with its
indexes (SQLite: the file; PostgreSQL: ``pg_total_relation_size``, TOAST included).

    python -m bench.bench_audit_volume [--gpus N] [--days D] [--smoke]

``--smoke``: 40 GPUs for 35 days (a few thousand rows), so that the archive has rows past its 30-day minimum.
"""

from __future__ import annotations

import heapq
import itertools
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert, text

from bench._run import BenchFailed, headline, parser, run, scratch
from gpuaas.actions.deadline_holds import FLOW as DEADLINES
from gpuaas.actions.deadline_holds import NUDGE_ACTIONS, RELEASE_ACTION, SETTLE_LOOKBACK, recorded_holds
from gpuaas.actions.quotas import RECOVERY_LOOKBACK as QUOTA_LOOKBACK
from gpuaas.actions.reclaim import RECOVERY_LOOKBACK, already_decided, recently_restored
from gpuaas.cluster.services import fresh_schema_url, postgres_server
from gpuaas.store import AuditEntry, Store, archive_audit, holdings, plan_archive

NOW = datetime(2026, 12, 8, 12, 0, tzinfo=UTC)
RUN_EVERY = timedelta(minutes=10)
SKIPS_EVERY = timedelta(minutes=60)
WINDOW_MINUTES = 240
"""The longest idle window of a run's targets: how far back ``recently_restored`` reads."""
GPUS_PER_TARGET = 8
KEEP_DAYS = 60
"""What the archive keeps (``--smoke``: 31 days, one past the archive's minimum)."""
PER_DAY_AT_2000 = {"stops": 500, "skipped_objects": 100, "holds": 100, "quota_changes": 40}
"""What a 2,000-GPU fleet decides a day; scaled with the fleet."""
CAUSES = ("opted-out", "partly-busy", "keda", "owner-missing", "cap")
_TABLE = AuditEntry.__table__  # type: ignore[attr-defined]


@dataclass
class _Target:
    kind: str
    namespace: str
    name: str
    uid: str
    gpus: list[str]
    index: int = 0
    owner: str | None = None


@dataclass
class _Log:
    """The rows of ``days`` of a fleet, in time order with their ids, and what the reads at ``NOW`` ask about."""

    gpus: int
    days: int
    rng: random.Random = field(default_factory=lambda: random.Random(90))
    rows: list[dict[str, Any]] = field(default_factory=list)
    pending: list[tuple[datetime, int, Callable[[datetime], None]]] = field(default_factory=list)
    held: dict[int, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Hold intent id -> the Workload's uid and the hold's ``before``: the marks still on Workloads."""
    last_keys: list[str] = field(default_factory=list)
    next_id: int = 1
    order: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.scale = self.gpus / 2000
        n = max(4, self.gpus // GPUS_PER_TARGET)
        self.targets = [self._target(i) for i in range(n)]
        self.skipping = self.targets[:max(2, round(PER_DAY_AT_2000["skipped_objects"] * self.scale))]

    def _target(self, i: int) -> _Target:
        ns, u = f"team-{i % 20}", str(uuid.UUID(int=self.rng.getrandbits(128)))
        gpus = [f"GPU-{uuid.UUID(int=self.rng.getrandbits(128))}" for _ in range(GPUS_PER_TARGET)]
        if i % 3 == 2:  # a Workload stopped for itself, naming the owner the team knows
            return _Target("Workload", ns, f"raycluster-rc-{i}-{u[:5]}", u, gpus, i, f"RayCluster rc-{i}")
        return _Target(("RayCluster", "Notebook")[i % 3], ns, f"{('rc', 'nb')[i % 3]}-{i}", u, gpus, i)

    def emit(self, at: datetime, flow: str, action: str, t: _Target | None, outcome: str, **extra: Any) -> int:
        kind, ns, name, uid = (t.kind, t.namespace, t.name, t.uid) if t else ("Cohort", None, "pool", None)
        row = {"id": self.next_id, "created_at": at, "flow": flow, "flow_run_id": f"run-{at:%m%d%H%M}",
               "action": action, "kind": extra.pop("kind", kind), "namespace": ns, "name": extra.pop("name", name),
               "uid": uid, "mode": "apply", "outcome": outcome, "reason": extra.pop("reason", ""),
               "evidence": extra.pop("evidence", {}), "before": None, "after": None, "idempotency_key": None,
               "refers_to": None, "decision": None, **extra}
        self.rows.append(row)
        self.next_id += 1
        return int(row["id"])

    def later(self, at: datetime, then: Callable[[datetime], None]) -> None:
        heapq.heappush(self.pending, (at, next(self.order), then))

    def _evidence(self, t: _Target, cause: str | None) -> dict[str, Any]:
        rng = self.rng
        out: dict[str, Any] = {
            "window_minutes": float(WINDOW_MINUTES), "threshold": 0.05, "activity_max": round(rng.random() / 20, 4),
            "activity_avg": round(rng.random() / 50, 4), "coverage": round(0.9 + rng.random() / 10, 3),
            "requests": 3.0, "gpus_requested": float(len(t.gpus)), "gpus_observed": float(len(t.gpus)),
            "held_seconds": round(rng.uniform(3600, 86400)), "workloads": [f"{t.name}-w{i}" for i in range(3)],
            "gpus": [{"uuid": g, "node": f"node-{(t.index + n // 8) % 250}", "activity_max": round(rng.random() / 20, 4),
                      "coverage": round(0.9 + rng.random() / 10, 3)} for n, g in enumerate(t.gpus)]}
        if t.owner:
            out["owner"] = t.owner
        if cause:
            out["cause"] = cause
        return out

    def _key(self, t: _Target, at: datetime) -> str:
        return f"reclaim/apply/{t.kind}/{t.namespace}/{t.name}/{t.uid}/{at:%Y%m%dT%H%M%SZ}"

    def _reclaim_run(self, at: datetime, step: int) -> None:
        self.last_keys = []
        for t in self.skipping:  # each skipped object once an hour, spread over the hour's runs
            if step % 6 == t.index % 6:
                cause = CAUSES[t.index % len(CAUSES)]
                key = self._key(t, at)
                self.emit(at, "reclaim", "reclaim", t, "deferred" if cause == "cap" else "skipped",
                          reason=f"skipped: {cause}", evidence=self._evidence(t, cause), idempotency_key=key,
                          decision=f"{'deferred' if cause == 'cap' else 'skipped'}#0")
                self.last_keys.append(key)
        stops = PER_DAY_AT_2000["stops"] * self.scale * RUN_EVERY / timedelta(days=1)
        pool = self.targets[len(self.skipping):]
        for t in self.rng.sample(pool, min(len(pool), int(stops) + (self.rng.random() < stops % 1))):
            key = self._key(t, at)
            intent = self.emit(at, "reclaim", "reclaim", t, "planned", reason="idle for 4h (activity 0.01 < 0.05)",
                               evidence=self._evidence(t, None), idempotency_key=key, decision="planned#0",
                               before={"spec": {"replicas": 1}}, after={"spec": {"replicas": 0}})
            self.last_keys.append(key)
            failed = self.rng.random() < 0.05
            self.emit(at + timedelta(seconds=2), "reclaim", "reclaim", t, "failed" if failed else "applied",
                      reason="patched" if not failed else "409 Conflict", refers_to=intent, idempotency_key=key,
                      before={"spec": {"replicas": 1}}, after={"spec": {"replicas": 0}})
            if not failed and self.rng.random() < 0.25:
                self.later(at + timedelta(minutes=self.rng.uniform(60, 2880)), self._undo(t, intent))

    def _undo(self, t: _Target, stop: int) -> Callable[[datetime], None]:
        def undo(at: datetime) -> None:
            key = f"restore/{stop}"
            intent = self.emit(at, "reclaim", "restore", t, "planned", idempotency_key=key, refers_to=stop,
                               before={"spec": {"replicas": 0}}, after={"spec": {"replicas": 1}}, kind=t.kind)
            self.emit(at + timedelta(seconds=3), "reclaim", "restore", t, "restored", idempotency_key=key,
                      refers_to=intent, before={"spec": {"replicas": 0}}, after={"spec": {"replicas": 1}})
        return undo

    def _hold(self, at: datetime) -> None:
        t = self.rng.choice(self.targets)
        w = _Target("Workload", t.namespace, f"job-{self.next_id}", str(uuid.UUID(int=self.rng.getrandbits(128))), [])
        action = self.rng.choice(NUDGE_ACTIONS)
        before = {"active": True} if action == NUDGE_ACTIONS[0] else {"priority": 100}
        release_at = at + timedelta(minutes=self.rng.uniform(120, 1440))
        evidence = {"release_at": release_at.isoformat(), "deadline": (release_at + timedelta(hours=6)).isoformat(),
                    "plan": [{"workload": f"job-{i}", "start": i * 600, "gpus": 8} for i in range(12)]}
        intent = self.emit(at, DEADLINES, action, w, "planned", evidence=evidence, before=before,
                           idempotency_key=f"deadline/{w.namespace}/{w.name}/{w.uid}/{at:%Y%m%d%H%M}",
                           decision="planned#0")
        self.emit(at + timedelta(seconds=2), DEADLINES, action, w, "applied", refers_to=intent, before=before)
        self.held[intent] = (w.uid, before)
        if self.rng.random() < 0.97:
            self.later(release_at, self._release(w, intent, before))

    def _release(self, w: _Target, hold: int, before: dict[str, Any]) -> Callable[[datetime], None]:
        def release(at: datetime) -> None:
            intent = self.emit(at, DEADLINES, RELEASE_ACTION, w, "planned", refers_to=hold, before=before)
            self.emit(at + timedelta(seconds=3), DEADLINES, RELEASE_ACTION, w, "released", refers_to=intent)
            self.held.pop(hold, None)
        return release

    def _quota_plan(self, at: datetime) -> None:
        queues = max(2, round(PER_DAY_AT_2000["quota_changes"] * self.scale))
        moves = [{"queue": f"cq-{i}", "flavor": "h100", "from": 16, "to": 16 + (-2, 2)[i % 2]} for i in range(queues)]
        plan = self.emit(at, "rebalance", "quota-plan", None, "planned", evidence={"moves": moves},
                         idempotency_key=f"quota-plan/pool/{at:%Y%m%d}", decision="planned#0")
        for i, move in enumerate(moves):
            self.emit(at + timedelta(seconds=1 + i), "rebalance", "quota-change", None, "applied",
                      kind="ClusterQueue", name=move["queue"], refers_to=plan, evidence={"why": "apply"},
                      before={"h100": move["from"]}, after={"h100": move["to"]})
        self.emit(at + timedelta(seconds=queues + 2), "rebalance", "quota-plan", None, "applied", refers_to=plan)

    def days_of_rows(self) -> Iterator[list[dict[str, Any]]]:
        """The rows a day at a time, ids in time order; ``held`` and ``last_keys`` as at ``NOW`` once done."""
        start = NOW - timedelta(days=self.days)
        holds = PER_DAY_AT_2000["holds"] * self.scale * RUN_EVERY / timedelta(days=1)
        steps = int(timedelta(days=self.days) / RUN_EVERY)
        for step in range(steps):
            at = start + step * RUN_EVERY
            self._reclaim_run(at + timedelta(seconds=30), step)
            for _ in range(int(holds) + (self.rng.random() < holds % 1)):
                self.later(at + timedelta(seconds=self.rng.uniform(60, 590)), self._hold)
            if at.hour == 2 and at.minute == 0:
                self.later(at + timedelta(minutes=5), self._quota_plan)
            while self.pending and self.pending[0][0] < at + RUN_EVERY:
                when, _, then = heapq.heappop(self.pending)
                then(when)
            if (step + 1) % int(timedelta(days=1) / RUN_EVERY) == 0 or step == steps - 1:
                yield self.rows
                self.rows = []


def fill(urls: list[str], log: _Log) -> int:
    """Every row of ``log`` into each database (created by a flow run's opening), in one bulk insert a day."""
    stores = [Store(url) for url in urls]
    total = 0
    for day in log.days_of_rows():
        total += len(day)
        for store in stores:
            with store.engine.begin() as conn:
                conn.execute(insert(_TABLE), day)
    for store in stores:
        with store.engine.begin() as conn:
            if store.engine.dialect.name == "postgresql":  # as ``gpuaas db copy`` leaves it: the next id past them
                conn.execute(text("SELECT setval(pg_get_serial_sequence('audit_log', 'id'), max(id)) FROM audit_log"))
            else:
                conn.execute(text("ANALYZE"))
        if store.engine.dialect.name == "postgresql":  # what autovacuum does to a live table: statistics, and the
            with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:  # visibility map
                conn.execute(text("VACUUM ANALYZE audit_log"))  # that lets a count read the index alone
        store.close()
    return total


def size_bytes(store: Store) -> int:
    with store.engine.connect() as conn:
        if store.engine.dialect.name == "sqlite":
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
            return int(conn.execute(text("PRAGMA page_count")).scalar_one()
                       * conn.execute(text("PRAGMA page_size")).scalar_one())
        return int(conn.execute(text("SELECT pg_total_relation_size('audit_log')")).scalar_one())


def reads(log: _Log, keep: timedelta) -> list[tuple[str, Callable[[Store], int]]]:
    """(what, read): each read a flow run or a command makes at ``NOW``, returning how many rows it got."""
    some = next(t for t in log.targets if t.owner)
    stopped = log.targets[-1]
    marks: list[tuple[str | None, dict[str, Any]]] = [
        (uid, {"audit_id": i, "before": before}) for i, (uid, before) in sorted(log.held.items())]
    new_keys = [f"reclaim/apply/Notebook/team-0/nb-new-{i}/-/20261208T120000Z" for i in range(20)]

    def holds(store: Store) -> int:  # the marks proven: every one, since each names an applied, unreleased hold
        return len(recorded_holds(store, marks))

    return [
        ("reclaim: newest rows (skips, 60 min)", lambda s: len(s.newest_rows(flow="reclaim", since=NOW - SKIPS_EVERY))),
        ("reclaim: already decided (keys)", lambda s: len(already_decided(s, [*log.last_keys, *new_keys]))),
        ("reclaim: recently restored (240 min)",
         lambda s: len(recently_restored(s, NOW - timedelta(minutes=WINDOW_MINUTES)))),
        ("reclaim: open stop intents (7 d)", lambda s: len(s.open_intents(
            flow="reclaim", action="reclaim", mode="apply", since=NOW - RECOVERY_LOOKBACK,
            closed_by=[("reclaim", None), ("restore", "planned")]))),
        ("reclaim: open restore intents (7 d)", lambda s: len(s.open_intents(
            flow="reclaim", action="restore", since=NOW - RECOVERY_LOOKBACK))),
        ("reclaim: one object's stops", lambda s: len(s.object_rows(
            flow="reclaim", action="reclaim", kind=stopped.kind, namespace=stopped.namespace, name=stopped.name,
            uid=stopped.uid))),
        (f"deadlines: hold proofs ({len(marks)} marks)", holds),
        ("deadlines: settle sweep (1 d)", lambda s: len(s.audit(flow=DEADLINES, since=NOW - SETTLE_LOOKBACK,
                                                                limit=None))),
        ("rebalance: recovery (7 d)", lambda s: len(s.audit(flow="rebalance", since=NOW - QUOTA_LOOKBACK,
                                                            limit=None))),
        ("audit list (newest 200)", lambda s: len(s.audit(limit=200, newest=True))),
        ("audit list --object (owner)", lambda s: len(s.audit(
            obj=f"{some.owner.split()[0]}/{some.namespace}/{some.owner.split()[1]}" if some.owner else some.name,
            limit=200, newest=True))),
        ("audit list --object (count)", lambda s: s.count_audit(
            obj=f"{some.owner.split()[0]}/{some.namespace}/{some.owner.split()[1]}" if some.owner else some.name)),
        ("audit list --object (name only)", lambda s: len(s.audit(
            obj=some.owner.split()[1] if some.owner else some.name, limit=200, newest=True))),
        ("db status", lambda s: holdings(s).audit),
        ("db archive (dry run)", lambda s: plan_archive(s, NOW - keep, now=NOW).rows),
    ]


def timed(read: Callable[[Store], int], store: Store, reps: int) -> tuple[float, int]:
    """Median ms of ``reps`` runs after one warm-up, and the rows the read got."""
    got = read(store)
    times = []
    for _ in range(reps):
        began = time.perf_counter()
        read(store)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), got


def main(argv: list[str]) -> int:
    cli = parser(__doc__)
    cli.add_argument("--gpus", type=int, default=2000, help="fleet size (default 2,000)")
    cli.add_argument("--days", type=int, default=90, help="days of audit rows (default 90; at least 35)")
    args = cli.parse_args(argv)
    if args.gpus < 1:
        cli.error(f"argument --gpus: a fleet holds at least 1 GPU, got {args.gpus}")
    gpus, days, reps = (40, 35, 3) if args.smoke else (args.gpus, max(35, args.days), 5)
    keep = timedelta(days=min(KEEP_DAYS, days - 4))
    base = scratch("bench-audit-volume-")
    with postgres_server() as pg:
        urls = {"SQLite": f"sqlite:///{base}/gpuaas.db", "PostgreSQL": fresh_schema_url(pg, "bench_audit_volume")}
        log = _Log(gpus, days)
        began = time.perf_counter()
        rows = fill(list(urls.values()), log)
        print(f"{days} days of a {gpus:,}-GPU fleet: {rows:,} audit rows written to both in "
              f"{time.perf_counter() - began:.1f} s", flush=True)
        stores = {db: Store(url) for db, url in urls.items()}
        try:
            sizes = {db: size_bytes(s) for db, s in stores.items()}
            figures: list[tuple[str, dict[str, float], int]] = []
            for what, read in reads(log, keep):
                got = {db: timed(read, s, reps) for db, s in stores.items()}
                counts = {n for _, n in got.values()}
                if len(counts) != 1:
                    raise BenchFailed(f"{what}: the backends disagree on the rows ({got})")
                figures.append((what, {db: ms for db, (ms, _) in got.items()}, counts.pop()))
            applied = {}
            for db, s in stores.items():
                began = time.perf_counter()
                done = archive_audit(s, NOW - keep, base / f"{db}.jsonl.gz",
                                     holder="bench@here:1", now=NOW)
                applied[db] = ((time.perf_counter() - began) * 1000, done.plan.rows if done else 0)
            figures.append(("db archive --apply (once)", {db: ms for db, (ms, _) in applied.items()},
                            applied["SQLite"][1]))
        finally:
            for s in stores.values():
                s.close()
    width = max(len(w) for w, _, _ in figures)
    print(f"{'read':<{width}} {'SQLite ms':>10} {'PostgreSQL ms':>14} {'rows read':>10}")
    for what, ms, n in figures:
        print(f"{what:<{width}} {ms['SQLite']:10.1f} {ms['PostgreSQL']:14.1f} {n:10,}")
    print(f"{'audit log size (MB, with indexes)':<{width}} {sizes['SQLite'] / 1e6:10.1f} "
          f"{sizes['PostgreSQL'] / 1e6:14.1f} {rows:10,}")
    print(f"(median of {reps} warm runs; the archive keeps {keep.days} days and is applied once)")
    slowest = {db: max(figures[:-1], key=lambda f: f[1][db]) for db in urls}
    headline(f"{rows:,} rows ({days} d, {gpus:,} GPUs): slowest read SQLite "
             f"{slowest['SQLite'][1]['SQLite']:.0f} ms ({slowest['SQLite'][0]}), PostgreSQL "
             f"{slowest['PostgreSQL'][1]['PostgreSQL']:.0f} ms ({slowest['PostgreSQL'][0]}); "
             f"{sizes['SQLite'] / 1e6:.0f} / {sizes['PostgreSQL'] / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(run(main, "bench_audit_volume"))
