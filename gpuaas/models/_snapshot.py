"""The snapshot: one consistent, joined view of the fleet at ``collected_at``.

Policies decide on a snapshot and nothing else, the way Kueue's scheduler decides on a
cache snapshot, so replaying a decision needs only the stored snapshot. Views are pandas
DataFrames (one row per workload, per ClusterQueue, per GPU, ...) because the policies
filter and aggregate them; source health travels with the data so that a policy can refuse
to act on a degraded snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from io import StringIO
from typing import Any

import pandas as pd

from gpuaas.models._records import SourceStatus

__all__ = ["FRAMES", "Snapshot"]

FRAMES = ("workloads", "queues", "quotas", "gpus", "owners", "costs", "serving", "data_quality")
SNAPSHOT_FORMAT = 1


def _empty() -> pd.DataFrame:
    return pd.DataFrame()


@dataclass(frozen=True, eq=False)
class Snapshot:
    """Joined views plus per-source data quality. Column lists: ``gpuaas.snapshot``."""

    collected_at: datetime
    windows_minutes: tuple[float, ...]
    sources: dict[str, SourceStatus]
    workloads: pd.DataFrame = field(default_factory=_empty)
    queues: pd.DataFrame = field(default_factory=_empty)
    quotas: pd.DataFrame = field(default_factory=_empty)
    gpus: pd.DataFrame = field(default_factory=_empty)
    owners: pd.DataFrame = field(default_factory=_empty)
    costs: pd.DataFrame = field(default_factory=_empty)
    serving: pd.DataFrame = field(default_factory=_empty)
    data_quality: pd.DataFrame = field(default_factory=_empty)
    """Per-object problems with what the objects say (kind, namespace, name, field, value, problem)."""

    @property
    def degraded(self) -> bool:
        """True when any required source failed this cycle."""
        return any(s.required and not s.ok for s in self.sources.values())

    def summary(self) -> dict[str, Any]:
        """Counts for logs, CLI and artifacts; GPU figures summed over GPU resources and flavors."""
        cols = ["name", "cohort", "pending_workloads", "pending_gpus", "oldest_pending_seconds",
                "admitted_gpus", "nominal_gpus"]
        queues = []
        if not self.queues.empty:
            frame = self.queues.reindex(columns=cols).astype(object)
            frame = frame.where(pd.notna(frame), None)
            queues = frame.to_dict(orient="records")
        unknown = 0
        if "telemetry" in self.workloads:
            unknown = int((self.workloads["telemetry"] == "unknown").sum())
        return {
            "queues": queues,
            "sources": {
                name: {"ok": s.ok, "latency_s": s.latency_s, "staleness_s": s.staleness_s}
                for name, s in self.sources.items()
            },
            "workloads": len(self.workloads),
            "unknown_telemetry": unknown,
        }

    def to_json(self) -> str:
        """A self-describing JSON document (pandas ``table`` orient keeps the column types)."""
        return json.dumps({
            "format": SNAPSHOT_FORMAT,
            "collected_at": self.collected_at.isoformat(),
            "windows_minutes": list(self.windows_minutes),
            "sources": {name: s.as_dict() for name, s in self.sources.items()},
            "frames": {
                name: json.loads(getattr(self, name).to_json(orient="table", index=False, date_format="iso"))
                for name in FRAMES
            },
        })

    @classmethod
    def from_json(cls, text: str) -> Snapshot:
        doc = json.loads(text)
        frames = {}
        for name in FRAMES:
            raw = doc.get("frames", {}).get(name)
            frame = pd.read_json(StringIO(json.dumps(raw)), orient="table") if raw else pd.DataFrame()
            frames[name] = frame.reset_index(drop=True)
        return cls(
            collected_at=datetime.fromisoformat(doc["collected_at"]),
            windows_minutes=tuple(float(w) for w in doc["windows_minutes"]),
            sources={name: SourceStatus.from_dict(s) for name, s in doc["sources"].items()},
            **frames,
        )
