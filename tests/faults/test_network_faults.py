"""Real network faults between the reclaim flow and every service it reads or writes.

Each case arms one fault on one proxy, runs the reclaim flow (dry-run, then the case's checks),
clears the fault and runs again at the same instant. After each: no decision on incomplete data (a
failed required source skips every target), every decision audited, no write reached the API, no
target decided twice, and the two runs together decide exactly what a run with no fault decides. Retry-After is honoured: the retry comes no sooner than the server asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuaas.cluster.fault_proxy import FaultProxy
from gpuaas.cluster.runner import EmbeddedCluster
from tests.actions.reclaim_scenario import IDLE_TARGETS, target_of, writes

pytestmark = [pytest.mark.integration, pytest.mark.flow]


@pytest.fixture(scope="module")
def fleet(dry_fleet: EmbeddedCluster) -> EmbeddedCluster:
    """Only read here: the package's shared fleet."""
    return dry_fleet

# (proxy, fault, times, path, expected): "same" = the fault is absorbed (retried), the decisions equal a clean
# run's; "degraded" = a required source failed after its retries, every target skipped; "pushless" = the
# decisions are the clean ones and the Pushgateway push was given up.
CASES: list[tuple[str, str, int, str | None, str]] = [
    ("kube", "500", 1, None, "same"),
    ("kube", "reset", 1, None, "same"),
    ("kube", "timeout", 1, None, "same"),
    ("kube", "slow", 1, None, "same"),
    ("kube", "429", 1, None, "same"),
    ("kube", "truncated", 1, None, "same"),
    ("kube", "malformed", 1, None, "degraded"),
    ("kube", "down", 99, None, "degraded"),
    ("prometheus", "500", 1, None, "same"),
    ("prometheus", "reset", 1, None, "same"),
    ("prometheus", "timeout", 1, None, "same"),
    ("prometheus", "429", 1, None, "same"),
    ("prometheus", "truncated", 1, None, "same"),
    ("prometheus", "malformed", 1, None, "degraded"),
    ("prometheus", "prom_error", 1, None, "degraded"),
    ("prometheus", "prom_warnings", 1, None, "same"),
    ("prometheus", "prom_warnings", 99, None, "degraded"),
    ("prometheus", "down", 99, None, "degraded"),
    ("opencost", "500", 1, None, "same"),
    ("opencost", "down", 99, None, "degraded"),  # a required source: decided and shown, never acted on
    ("pushgateway", "500", 99, None, "pushless"),
]


def _reclaim(cluster: EmbeddedCluster) -> dict[str, Any]:
    """A dry-run at the cluster's (manual) clock: the case's wall time never makes telemetry stale."""
    from flows.reclaim import reclaim

    return reclaim(apply=False, at=cluster.clock.now())


def _planned(result: dict[str, Any]) -> set[tuple[str, str]]:
    """The targets a run would act on (``planned``, or ``deferred`` by the cap: acted on next run)."""
    return {target_of(d) for d in result["decisions"] if d["result"] != "skipped"}


@pytest.fixture(scope="module")
def clean(fleet: EmbeddedCluster, policy_file: Path, proxies: dict[str, FaultProxy], prefect_harness: None,
          tmp_path_factory: pytest.TempPathFactory) -> set[Any]:
    """The decisions of a run with no fault: every idle target of the scenario."""
    with pytest.MonkeyPatch.context() as m:
        for key, value in {**fleet.settings_env(), "GPUAAS_NVML": "off", "GPUAAS_POLICY_FILE": str(policy_file),
                           "GPUAAS_DATA_DIR": str(tmp_path_factory.mktemp("clean"))}.items():
            m.setenv(key, value)
        planned = _planned(_reclaim(fleet))
    assert planned == IDLE_TARGETS
    return planned


@pytest.mark.parametrize(("target", "kind", "times", "path", "expected"), CASES,
                         ids=[f"{c[0]}-{c[1]}-x{c[2]}" for c in CASES])
def test_a_fault_is_absorbed_or_acted_on_by_nothing(
        target: str, kind: str, times: int, path: str | None, expected: str, fleet: EmbeddedCluster,
        through_proxies: dict[str, FaultProxy], clean: set[Any]) -> None:
    proxy = through_proxies[target]
    before = writes(fleet)
    proxy.arm(kind, times, path=path, hang_s=0.3 if kind == "slow" else 1.5)
    faulted = _reclaim(fleet)
    assert proxy.hits, f"the {kind} fault was never reached"
    if expected == "degraded":
        assert _planned(faulted) == set(), faulted["decisions"]
        assert all("degraded" in d["reason"] or "source" in d["reason"] for d in faulted["decisions"])
    else:
        assert _planned(faulted) == clean
    assert writes(fleet) == before, "a dry-run under a fault wrote to the cluster"
    if kind == "429":  # the retry came no sooner than Retry-After (1 s) asked
        [hit] = proxy.hits
        retried = [r for r in proxy.relayed if r.path == hit.path and r.at > hit.at]
        assert retried and retried[0].at - hit.at >= 1.0
    assert all(d["audit_id"] for d in faulted["decisions"] if d["result"] != "skipped"), "a decision not audited"
    if _planned(faulted) == clean:
        return  # converged already: the next run skips every target as decided for this window
    proxy.clear()
    after = _reclaim(fleet)
    again = _planned(after)
    assert not again & _planned(faulted), "a target decided twice"
    assert again | _planned(faulted) == clean, "the run after the fault did not converge"


@pytest.mark.parametrize("held_s", [1.0, 7.0], ids=["short-lock", "lock-past-the-busy-timeout"])
def test_a_locked_sqlite_database_loses_no_snapshot_and_acts_on_none(
        held_s: float, fleet: EmbeddedCluster, through_proxies: dict[str, FaultProxy], clean: set[Any]) -> None:
    """Another connection holds SQLite's exclusive lock while the run stores its snapshot."""
    import sqlite3
    import threading

    from gpuaas.settings import load_settings
    from gpuaas.store import Store

    settings = load_settings()
    Store(settings.database_url_value).close()  # migrated, so the lock is the only obstacle
    holder = sqlite3.connect(settings.sqlite_path, timeout=1, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(held_s, holder.rollback)
    release.start()
    before = writes(fleet)
    try:
        faulted: dict[str, Any] | None = _reclaim(fleet)
    except Exception as exc:  # noqa: BLE001 - the outcome under test: a clean failure
        assert "locked" in str(exc), exc
        faulted = None
    finally:
        release.join()  # the lock is released (at once if the run outlasted it)
        holder.close()
    assert writes(fleet) == before
    first = _planned(faulted) if faulted else set()
    assert first in (set(), clean)
    again = _planned(_reclaim(fleet))
    assert not again & first and again | first == clean
    store = Store(settings.database_url_value)
    try:
        assert store.latest_snapshot() is not None
    finally:
        store.close()
