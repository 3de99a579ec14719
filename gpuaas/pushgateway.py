"""Summary metrics pushed to a Prometheus Pushgateway, for Grafana and KEDA.

A batch job cannot be scraped while it is not running, so each flow run pushes its figures
under its own job name; the Pushgateway keeps the latest set until the next run replaces it,
forever if none does, so a run that cannot vouch for a signal withdraws it (``delete_metrics``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.error import URLError

from gpuaas.errors import SourceUnavailable

__all__ = ["MetricFamily", "delete_metrics", "push_metrics"]


@dataclass
class MetricFamily:
    """One gauge family: name, help, label names and ``(label values, value)`` samples."""

    name: str
    help: str
    labels: tuple[str, ...] = ()
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)

    def add(self, value: float, *label_values: str) -> MetricFamily:
        self.samples.append((tuple(label_values), float(value)))
        return self


def push_metrics(url: str, job: str, families: Iterable[MetricFamily], timeout: float = 10) -> int:
    """Replace the job's metric group on the Pushgateway; returns how many samples were pushed."""
    from prometheus_client import CollectorRegistry, Gauge, push_to_gateway  # here: most runs push nothing

    registry = CollectorRegistry()
    count = 0
    for family in families:
        gauge = Gauge(family.name, family.help, list(family.labels), registry=registry)
        for label_values, value in family.samples:
            (gauge.labels(*label_values) if family.labels else gauge).set(value)
            count += 1
    try:
        push_to_gateway(url, job=job, registry=registry, timeout=timeout)
    except (URLError, OSError) as exc:
        raise SourceUnavailable(f"push failed: {exc}", source="pushgateway", url=url) from exc
    return count


def delete_metrics(url: str, job: str, timeout: float = 10) -> None:
    """Withdraw the job's whole metric group: a run that cannot vouch for its signal must not leave the last one up."""
    from prometheus_client import delete_from_gateway

    try:
        delete_from_gateway(url, job=job, timeout=timeout)
    except (URLError, OSError) as exc:
        raise SourceUnavailable(f"withdraw failed: {exc}", source="pushgateway", url=url) from exc
