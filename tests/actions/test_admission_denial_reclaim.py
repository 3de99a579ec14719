"""An admission denial of a reclaim's stop or of its undo, against the embedded cluster (real HTTP).

The PATCH is answered by the denial the API server's message becomes (``kube_api_error``): a webhook's report of two
policies, which rules only past 500 characters. Covers: the reclaim's audit row and the undo's result and row name
the webhook and carry its whole message; the object is left as it was; the undo is ``failed`` and a later undo, once
the webhook lets it through, restores the object.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.actions import KubeWriter
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.policy import Mode
from gpuaas.settings import GpuaasSettings
from gpuaas.store import Store
from tests.actions.reclaim_scenario import decide, obj, run, undo
from tests.actions.test_admission_denial_quota_holds import LONG_LINE, webhook

pytestmark = [pytest.mark.integration]

KIND, NAME = "Deployment", "dep-b"


def _denied(monkeypatch: pytest.MonkeyPatch) -> None:
    def patch(self: KubeWriter, kind: str, namespace: str, name: str, body: dict[str, Any], **kw: Any) -> Any:
        raise webhook(kind, name, namespace)

    monkeypatch.setattr(KubeWriter, "patch", patch)


def test_a_denied_stop_is_audited_with_the_whole_denial(settings: GpuaasSettings, cluster: EmbeddedCluster,
                                                         store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    before = obj(cluster, KIND, NAME)
    decisions = decide(settings, cluster, store, Mode.apply, only={(KIND, NAME)})
    with monkeypatch.context() as m:
        _denied(m)
        [result] = run(settings, cluster, store, decisions)
    ns = before["metadata"]["namespace"]
    line = f"patching {KIND} {ns}/{NAME}: denied by admission webhook kyverno.example.com: {LONG_LINE}"
    assert (result.result, result.reason) == ("failed", line)  # the run's table and summary too, past 500 characters
    [row] = [r for r in store.audit(refers_to=[int(result.audit_id)]) if r.outcome == "failed"]
    assert row.reason == line
    assert obj(cluster, KIND, NAME)["spec"] == before["spec"]


def test_a_denied_undo_is_failed_with_the_whole_denial_and_a_later_one_restores(
        settings: GpuaasSettings, cluster: EmbeddedCluster, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    before = obj(cluster, KIND, NAME)
    [result] = run(settings, cluster, store, decide(settings, cluster, store, Mode.apply, only={(KIND, NAME)}))
    assert result.result == "applied", result.reason
    with monkeypatch.context() as m:
        _denied(m)
        [refused] = undo(settings, store, [int(result.audit_id)])
    ns = before["metadata"]["namespace"]
    line = f"patching {KIND} {ns}/{NAME}: denied by admission webhook kyverno.example.com: {LONG_LINE}"
    assert (refused.result, refused.message) == ("failed", line)
    assert obj(cluster, KIND, NAME)["spec"] != before["spec"]  # still stopped
    [restored] = undo(settings, store, [int(result.audit_id)])
    assert restored.result == "restored", restored.message
    assert obj(cluster, KIND, NAME)["spec"] == before["spec"]
