"""``python -m tests.faults.matrix``: the fault matrix as a markdown table, from the tests' own case lists.

``tests/faults/README.md`` holds its output; ``test_matrix_readme.py`` fails when the two differ,
so the list of faults and their outcomes cannot drift from what the tests inject and assert.
"""

from __future__ import annotations

from tests.faults.test_kill_rebalance import POINTS
from tests.faults.test_network_faults import CASES

__all__ = ["table"]

NETWORK = {
    "same": "absorbed (retried); the decisions equal a fault-free run's, nothing written",
    "degraded": "no action on incomplete data: every target skipped with the failed source named, audited; "
                "the next run decides exactly the fault-free set, none twice",
    "pushless": "decisions as a fault-free run's; the push is given up (logged), the run does not fail",
}
WHAT = {"500": "HTTP 500", "reset": "TCP reset (RST)", "timeout": "hang past the client timeout",
        "slow": "slow answer (under the timeout)", "429": "429 with Retry-After: 1", "truncated": "body cut short",
        "malformed": "body not JSON", "prom_error": "`status: error`", "prom_warnings": "half the series + `warnings`",
        "down": "every request reset (service down)"}
OTHERS: list[tuple[str, str, str, str]] = [
    ("test_network_faults.py::…locked_sqlite…[short-lock]", "SQLite", "exclusive lock held 1 s during the run",
     "absorbed by the busy timeout (5 s) or a clean 'locked' failure; no write, a snapshot stored, the next run "
     "converges"),
    ("test_network_faults.py::…locked_sqlite…[lock-past-the-busy-timeout]", "SQLite",
     "exclusive lock held 7 s (past the 5 s busy timeout)",
     "as above: never a write, never a target decided twice, the next run converges"),
    ("test_postgres_restart.py::…[restarted-between-steps]", "PostgreSQL",
     "`pg_ctl restart` while the apply waits on its first PATCH",
     "pooled connections re-pinged: the run completes; the next run acts on nothing"),
    ("test_postgres_restart.py::…[down-at-the-next-write]", "PostgreSQL",
     "stopped while the first PATCH lands, started after the run",
     "the run fails naming the database; the next run's recovery closes the intent (applied, no second PATCH) "
     "and does the rest: each target once, every write audited"),
    ("test_kill.py::…reclaim_killed…[before-the-write]", "reclaim apply", "SIGKILL after the intent row, "
     "before the PATCH", "the next run stops the workload: one PATCH, intent closed"),
    ("test_kill.py::…reclaim_killed…[after-the-write]", "reclaim apply", "SIGKILL with the PATCH landed, "
     "its answer in flight", "the next run's recovery reads it back (applied): no second PATCH"),
    ("test_kill.py::…undo_killed…[before-the-write]", "undo", "SIGKILL before the restoring PATCH",
     "the next undo restores: one PATCH"),
    ("test_kill.py::…undo_killed…[after-the-write]", "undo", "SIGKILL with the restore landed",
     "the next undo finds it done (no-op): one PATCH"),
    ("test_kill.py::…409_storm…", "Kubernetes API", "409 on every PATCH",
     "never forced: the target skipped with the 409 audited; the next run acts once"),
]
REBALANCE = {
    "after-the-intent": "SIGKILL after the plan's intent row, before any PATCH",
    "first-patch-landed": "SIGKILL with the first (decrease) PATCH landed, its answer and change row not",
    "before-the-second-patch": "SIGKILL after the decrease and its row, before the increase",
    "second-patch-landed": "SIGKILL with both PATCHes landed, the last row and the completion not",
    "after-the-result": "SIGKILL at the Pushgateway push, after the completion row",
}
REBALANCE_OUTCOME = ("cohort total never above the original; the next run's recovery audits what landed, rolls it "
                     "back and closes the intent, the plan is made again: quotas equal a fault-free run's, total "
                     "conserved, no move twice, every PATCH audited")
OVERLAP = ("test_overlap.py::…[sqlite] / […postgresql]", "store", "4 collect and dry-run processes at once",
           "no database error, every snapshot stored, nothing written to the cluster")


def table() -> str:
    rows = ["| test | target | fault | outcome |", "|---|---|---|---|"]
    for target, kind, times, _, expected in CASES:
        rows.append(f"| test_network_faults.py::…[{target}-{kind}-x{times}] | {target} | {WHAT[kind]}"
                    f"{' once' if times == 1 else ', every request'} | {NETWORK[expected]} |")
    rows += [f"| {t} | {w} | {f} | {o} |" for t, w, f, o in OTHERS]
    for point, *_ in POINTS:
        outcome = ("the plan was complete: quotas equal a fault-free run's, recovery finds nothing open"
                   if point == "after-the-result" else REBALANCE_OUTCOME)
        rows.append(f"| test_kill_rebalance.py::…[{point}] | rebalance apply | {REBALANCE[point]} | {outcome} |")
    rows.append("| {} | {} | {} | {} |".format(*OVERLAP))
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(table(), end="")
