"""A counted, error-mapped PromQL instant-query client over ``prometheus_api_client``.

Every query is evaluated at an explicit ``time`` so a snapshot is reproducible, retries are
left to the calling task (they depend on the error type), and the library's exceptions are
translated into ``gpuaas.errors`` here, once.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from gpuaas.errors import ConfigError, MalformedResponse, SourceError, SourceUnavailable, scrub_secrets
from gpuaas.settings import GpuaasSettings

__all__ = ["PromClient", "sample_value"]

_STATUS = re.compile(r"HTTP Status Code (\d+)")


def sample_value(result: dict[str, Any]) -> float:
    """The float of an instant-vector element (``"NaN"``/``"+Inf"`` included)."""
    return float(result["value"][1])


class PromClient:
    """Instant and range queries against one Prometheus; ``queries`` counts what was sent."""

    def __init__(self, settings: GpuaasSettings, source: str = "prometheus") -> None:
        if not settings.prometheus_url:
            raise ConfigError("not configured", field="prometheus_url")
        headers = None
        if settings.prometheus_token is not None:
            headers = {"Authorization": f"Bearer {settings.prometheus_token.get_secret_value()}"}
        self.url = settings.prometheus_url.rstrip("/")
        self.source = source
        self.queries = 0
        self._prom = PrometheusConnect(
            url=self.url,
            headers=headers,
            retry=Retry(total=0, raise_on_status=False),
            timeout=settings.request_timeout_seconds,
            method="POST",
        )

    def close(self) -> None:
        self._prom.close()

    def query(self, expr: str, at: datetime) -> list[dict[str, Any]]:
        """The result vector of ``expr`` evaluated at ``at``."""
        result = self._call(lambda: self._prom.custom_query(expr, params={"time": f"{at.timestamp():.3f}"}),
                            "/api/v1/query")
        for row in result:
            if not isinstance(row, dict) or not isinstance(row.get("metric"), dict) or "value" not in row:
                raise MalformedResponse("result element lacks 'metric'/'value'", source=self.source, url=self.url)
            try:
                sample_value(row)
            except (TypeError, ValueError, IndexError, KeyError) as exc:
                raise MalformedResponse(f"result element value {str(row['value'])[:60]!r} is not [time, \"number\"]",
                                        source=self.source, url=self.url) from exc
        return [r for r in result if not math.isnan(sample_value(r))]

    def query_range(self, expr: str, start: datetime, end: datetime, step_s: float) -> list[dict[str, Any]]:
        """The range matrix of ``expr`` over ``[start, end]`` at ``step_s`` (each row ``metric``, ``values``)."""
        result = self._call(lambda: self._prom.custom_query_range(expr, start, end, f"{step_s:g}s"),
                            "/api/v1/query_range")
        for row in result:
            if not isinstance(row, dict) or "metric" not in row or not isinstance(row.get("values"), list):
                raise MalformedResponse("result element lacks 'metric'/'values'", source=self.source, url=self.url)
        return result

    def _call(self, fetch: Any, path: str) -> list[Any]:
        self.queries += 1
        try:
            result = fetch()
        except requests.exceptions.JSONDecodeError as exc:
            raise MalformedResponse("query answer is not JSON", source=self.source, url=self.url) from exc
        except (KeyError, TypeError) as exc:
            raise MalformedResponse(f"query answer lacks field {exc}", source=self.source, url=self.url) from exc
        except requests.exceptions.RequestException as exc:
            # Not chained: requests quotes the whole URL (a ``?access_token=`` included) and a logged
            # traceback would print it; the message keeps what failed, scrubbed.
            text = scrub_secrets(f"{type(exc).__name__}: {exc}", self.url)[:300]  # scrub, then cut
            raise SourceUnavailable(text, source=self.source, url=self.url) from None
        except PrometheusApiClientException as exc:
            match = _STATUS.search(str(exc))
            status = int(match.group(1)) if match else 0
            text = f"HTTP {status or '?'} from {path}"
            if status == 429 or status >= 500:
                raise SourceUnavailable(text, source=self.source, url=self.url) from exc
            raise SourceError(text, source=self.source, url=self.url) from exc
        if not isinstance(result, list):
            raise MalformedResponse("field 'data.result' is not a list", source=self.source, url=self.url)
        return result
