"""What the two KEDA examples in ``deployments/keda`` are checked against: KEDA's own
``scaledobject-prometheus`` example, and their query evaluated on a real Prometheus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuaas.cluster.prometheus import PrometheusServer

ROOT = Path(__file__).resolve().parents[2]
KEDA_DOC = ROOT / ".." / "shared" / "fixtures" / "telemetry" / "keda" / "scaledobject-prometheus.keda-docs-2.21.yaml"


def load_manifest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        pytest.fail(f"missing: {path}")
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def assert_kedas_prometheus_trigger(ours: dict[str, Any]) -> dict[str, Any]:
    """Our ScaledObject has the kind and trigger shape of KEDA's documented example; returns its trigger."""
    theirs = load_manifest(KEDA_DOC)
    assert (ours["apiVersion"], ours["kind"]) == (theirs["apiVersion"], theirs["kind"])
    [trigger] = ours["spec"]["triggers"]
    [doc_trigger] = theirs["spec"]["triggers"]
    assert trigger["type"] == doc_trigger["type"] == "prometheus"
    assert set(doc_trigger["metadata"]) <= set(trigger["metadata"])
    # KEDA trigger metadata is a map of strings.
    assert all(isinstance(v, str) for v in trigger["metadata"].values())
    assert trigger["metadata"]["ignoreNullValues"] == "false"
    return dict(trigger)


def instant(server: PrometheusServer, query: str, at: float) -> list[dict[str, Any]]:
    resp = httpx.get(f"{server.url}/api/v1/query", params={"query": query, "time": at})
    resp.raise_for_status()
    result: list[dict[str, Any]] = resp.json()["data"]["result"]
    return result
