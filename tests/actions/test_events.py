"""The Event gpuaas records on an object it changed: where it goes and what the API server accepts of it."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from gpuaas.actions._events import CONTROLLER, EventReason, event_body

NOTEBOOK = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook",
            "metadata": {"name": "nb", "namespace": "team-a", "uid": "u-1", "resourceVersion": "7"}}
QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": "team-a-cq", "uid": "u-2", "resourceVersion": "9"}}
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
"""RFC 1123, as the API server checks an object's name."""


def test_a_namespaced_objects_event_is_in_its_namespace_and_regards_it() -> None:
    body = event_body(NOTEBOOK, EventReason.reclaimed, "Stopped by gpuaas", datetime(2026, 12, 5, 6, 1, 2, 345678,
                                                                                        tzinfo=UTC))
    assert body["metadata"]["namespace"] == "team-a" and body["metadata"]["name"].startswith("nb.")
    assert body["regarding"] == {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "name": "nb",
                                 "namespace": "team-a", "uid": "u-1", "resourceVersion": "7"}
    assert body["eventTime"] == "2026-12-05T06:01:02.345678Z"  # a MicroTime
    assert (body["reason"], body["action"], body["type"]) == ("Reclaimed", "Stop", "Normal")
    assert body["reportingController"] == CONTROLLER and 0 < len(body["reportingInstance"]) <= 128


def test_a_cluster_scoped_objects_event_is_in_default_as_kubernetes_puts_it() -> None:
    body = event_body(QUEUE, EventReason.quota_moved, "moved")
    assert body["metadata"]["namespace"] == "default" and "namespace" not in body["regarding"]
    assert body["action"] == "Rebalance"


@given(note=st.text(min_size=0, max_size=3000), name=st.from_regex(DNS_SUBDOMAIN, fullmatch=True).filter(
    lambda n: len(n) <= 253))
def test_the_note_and_name_stay_within_what_the_api_server_accepts(note: str, name: str) -> None:
    body = event_body({**NOTEBOOK, "metadata": {**NOTEBOOK["metadata"], "name": name}}, EventReason.held, note)
    assert len(body["note"].encode("utf-8")) <= 1024
    assert body["note"] == note or (len(note.encode("utf-8")) > 1024 and body["note"].endswith("..."))
    assert len(body["metadata"]["name"]) <= 253 and DNS_SUBDOMAIN.fullmatch(body["metadata"]["name"])
    assert all(len(body[f]) <= 128 for f in ("action", "reason", "reportingInstance"))
