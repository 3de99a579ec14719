"""Helpers for source tests: locate shared captures and turn them into backfillable series."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

Sample = tuple[str, dict[str, str], float, float]
Capture = list[tuple[str, dict[str, str], float]]

FIXTURES = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"
NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
"""Evaluation time for backfilled data: the week the dcgm captures were taken."""


def fixture_path(*parts: str) -> Path:
    path = FIXTURES.joinpath(*parts).resolve()
    if not path.exists():
        raise FileNotFoundError(f"shared fixture missing: {path} (expected the shared/ checkout next to the repo)")
    return path


def parse_exposition(path: Path) -> Capture:
    """``(sample name, labels, value)`` for every sample line of a Prometheus text capture."""
    return [
        (s.name, dict(s.labels), float(s.value))
        for fam in text_string_to_metric_families(path.read_text())
        for s in fam.samples
    ]


def relabel(capture: Capture, renames: dict[str, str]) -> Capture:
    """The same capture with label names changed (e.g. ``Hostname`` -> ``hostname``)."""
    return [(n, {renames.get(k, k): v for k, v in labels.items()}, val) for n, labels, val in capture]


def series(
    capture: Iterable[tuple[str, dict[str, str], float]],
    *,
    end: datetime = NOW,
    minutes: float,
    step_s: float = 15.0,
    value: Callable[[str, dict[str, str], float, int], float] | None = None,
    keep: Callable[[str, dict[str, str], int], bool] | None = None,
) -> list[Sample]:
    """Repeat each captured sample every ``step_s`` up to ``end``; ``value`` may vary it per step
    and ``keep`` may drop steps (to make telemetry partial)."""
    steps = int(minutes * 60 / step_s)
    out: list[Sample] = []
    for name, labels, val in capture:
        for i in range(steps + 1):
            if keep is not None and not keep(name, labels, i):
                continue
            ts = end.timestamp() - (steps - i) * step_s
            out.append((name, labels, value(name, labels, val, i) if value else val, ts))
    return out
