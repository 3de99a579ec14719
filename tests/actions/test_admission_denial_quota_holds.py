"""An admission denial of a quota move, a deadline hold or its release, reported as such wherever it is reported.

Quota plans against the embedded cluster (its second patch denied), deadline nudges against the stand-in writer of
the release tests; each denial is the error the API server's answer becomes (``kube_api_error``). Covers: the plan
closes ``failed`` naming the webhook or the policy and carrying its message whole (past the 500 characters any
other error is cut to), with no role to bind, and rolls back what had landed; a hold and a release are ``failed``
with the same words in their result and their audit row; the kit's own policy says what its denial means.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.actions import KubeWriter
from gpuaas.actions.deadline_holds import apply_nudges
from gpuaas.errors import KubeAPIError
from gpuaas.models import Outcome
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tests.actions.rebalance_scenario import NOMINAL, cluster, settings, writer  # noqa: F401  (the fixtures)
from tests.actions.test_deadline_hold_answers import hold, pending
from tests.actions.test_deadline_release_audit import RELEASE, Cluster, held, record_hold
from tests.actions.test_quota_actions import BIND, DEMAND, apply, live, the_plan
from tests.actions.test_quota_write_faults import FaultyWriter
from tests.sources.test_admission_denials import KIT_NOTE, KYVERNO, KYVERNO_LINE, SA, api_error

LONG = f"{KYVERNO} {KYVERNO}"
"""Two Kyverno policies' report: which rules only past 500 characters."""
LONG_LINE = f"{KYVERNO_LINE} {KYVERNO_LINE}"


def webhook(kind: str, name: str, namespace: str | None = None) -> KubeAPIError:
    return api_error(400, "BadRequest", f'admission webhook "kyverno.example.com" denied the request: {LONG}',
                     kind=kind, namespace=namespace, name=name)


def kit_policy(kind: str, name: str, namespace: str | None = None) -> KubeAPIError:
    said = (f"refused: {SA} may change only its quotas (nominalQuota, borrowingLimit, lendingLimit) of clusterqueues "
            f"{name}, no other spec field (RBAC cannot limit a patch to fields: policy gpuaas-write-fields)")
    return api_error(403, "Forbidden", f'clusterqueues.kueue.x-k8s.io "{name}" is forbidden: ValidatingAdmissionPolicy '
                     f"'gpuaas-write-fields' with binding 'gpuaas-write-fields' denied request: {said}",
                     kind=kind, namespace=namespace, name=name)


@pytest.mark.parametrize(("deny", "says"), [
    (webhook, f"denied by admission webhook kyverno.example.com: {LONG_LINE}"),
    (kit_policy, "denied by ValidatingAdmissionPolicy gpuaas-write-fields: refused: "),
], ids=["webhook", "kit-policy"])
def test_a_denied_quota_patch_closes_the_plan_naming_the_denial_and_no_role(
        settings: GpuaasSettings, store: Store, writer: KubeWriter,
        deny: Callable[[str, str], KubeAPIError], says: str) -> None:
    def refuse(real: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        raise deny("ClusterQueue", "team-b-cq")

    # team-c's decrease lands; team-b's increase is denied: the plan stops and team-c goes back.
    with FaultyWriter(settings, {2: refuse}) as faulty:
        result = apply(store, faulty, the_plan(DEMAND))
    assert result.outcome == "failed" and result.patched == ["team-c-cq"], result.message
    assert f"stopped after 1 patch: team-b-cq: patching ClusterQueue team-b-cq: {says}" in result.message
    assert BIND not in result.message and "403" not in result.message
    if deny is kit_policy:
        assert KIT_NOTE in result.message
    assert live(writer) == NOMINAL
    [closed] = [r for r in store.audit(refers_to=[result.plan_id], limit=None) if r.action == "quota-plan"]
    assert (closed.outcome, closed.reason) == ("failed", result.message)


@pytest.fixture()
def nudge_store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(f"sqlite:///{tmp_path}/gpuaas.db")
    yield opened
    opened.close()


def test_a_denied_hold_is_failed_with_the_whole_denial(nudge_store: Store) -> None:
    cluster = Cluster(pending("wl"))
    cluster.fail[("patch", "wl")] = webhook("Workload", "wl", "ns")
    [done] = apply_nudges([hold("wl")], nudge_store, cluster, mode=Mode.apply,  # type: ignore[arg-type]
                          flow_run_id=None)
    line = f"patching Workload ns/wl: denied by admission webhook kyverno.example.com: {LONG_LINE}"
    assert (done.result, done.reason) == (Outcome.failed, line)
    assert [r.reason for r in nudge_store.audit(limit=None) if r.outcome == Outcome.failed] == [line]
    assert not cluster.held("wl")


def test_a_denied_release_is_failed_with_the_whole_denial(nudge_store: Store) -> None:
    mark = record_hold(nudge_store)
    cluster = Cluster(held(mark=mark))
    cluster.fail[("patch", "wl")] = webhook("Workload", "wl", "ns")
    [done] = apply_nudges([RELEASE], nudge_store, cluster, mode=Mode.apply,  # type: ignore[arg-type]
                          flow_run_id=None)
    line = f"patching Workload ns/wl: denied by admission webhook kyverno.example.com: {LONG_LINE}"
    assert (done.result, done.reason) == (Outcome.failed, line)
    assert nudge_store.get_audit(int(done.audit_id or 0)).reason == line  # type: ignore[union-attr]
    assert cluster.held("wl")
