"""Summary metrics pushed to a Prometheus Pushgateway, for Grafana and KEDA.

A batch job cannot be scraped while it is not running, so each flow run pushes its figures
under its own job name; the Pushgateway keeps the latest set until the next run replaces it,
forever if none does, so a run that cannot vouch for a signal withdraws it (``delete_metrics``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.error import URLError
from urllib.request import HTTPSHandler, Request, build_opener

from gpuaas._https import ssl_context
from gpuaas.errors import ConfigError, SourceUnavailable
from gpuaas.settings import GpuaasSettings

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


def push_metrics(settings: GpuaasSettings, job: str, families: Iterable[MetricFamily]) -> int:
    """Replace the job's metric group on the Pushgateway; returns how many samples were pushed."""
    from prometheus_client import CollectorRegistry, Gauge, push_to_gateway  # here: most runs push nothing

    url = _gateway(settings)
    registry = CollectorRegistry()
    count = 0
    for family in families:
        gauge = Gauge(family.name, family.help, list(family.labels), registry=registry)
        for label_values, value in family.samples:
            (gauge.labels(*label_values) if family.labels else gauge).set(value)
            count += 1
    try:
        push_to_gateway(url, job=job, registry=registry, timeout=settings.request_timeout_seconds,
                        handler=_handler(settings))
    except (URLError, OSError) as exc:
        raise SourceUnavailable(f"push failed: {exc}", source="pushgateway", url=url) from exc
    return count


def delete_metrics(settings: GpuaasSettings, job: str) -> None:
    """Withdraw the job's whole metric group: a run that cannot vouch for its signal must not leave the last one up."""
    from prometheus_client import delete_from_gateway

    url = _gateway(settings)
    try:
        delete_from_gateway(url, job=job, timeout=settings.request_timeout_seconds, handler=_handler(settings))
    except (URLError, OSError) as exc:
        raise SourceUnavailable(f"withdraw failed: {exc}", source="pushgateway", url=url) from exc


def _gateway(settings: GpuaasSettings) -> str:
    if not settings.pushgateway_url:
        raise ConfigError("not set: set it to the Pushgateway's URL, e.g. http://pushgateway.monitoring.svc:9091",
                          field="GPUAAS_PUSHGATEWAY_URL")
    return settings.pushgateway_url


Handler = Callable[[str, str, float | None, list[tuple[str, str]], bytes], Callable[[], None]]


def _handler(settings: GpuaasSettings) -> Handler:
    """``prometheus_client``'s request, over HTTPS trusting ``ca_file`` when one is set."""
    from prometheus_client.exposition import default_handler

    context = ssl_context(settings)
    if context is None:
        return default_handler

    def handler(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]],
                data: bytes) -> Callable[[], None]:
        def send() -> None:
            request = Request(url, data=data, method=method, headers=dict(headers))
            with build_opener(HTTPSHandler(context=context)).open(request, timeout=timeout) as answer:
                if answer.status >= 400:  # urllib raises on most; kept as the library's own handler has it
                    raise OSError(f"error talking to pushgateway: {answer.status} {answer.reason}")

        return send

    return handler
