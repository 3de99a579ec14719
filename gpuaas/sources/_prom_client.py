"""A counted, error-mapped PromQL instant-query client over ``prometheus_api_client``.

Every query is evaluated at an explicit ``time`` so a snapshot is reproducible, retries are
left to the calling task (they depend on the error type), and the library's exceptions are
translated into ``gpuaas.errors`` here, once.

Every point of an answer is checked here too, before any reader sees it: ``[time, "number"]``, its time a finite
one within ``TIME_SLACK_S`` of what was asked (``1e308`` or ``+Inf`` from a proxy rewriting answers would
otherwise put a point in the wrong period, or end a report with Python's ``timestamp out of range``). A value may
be any number (a GPU reading ``1e308`` is read as busy), so where a reader knows more, it asks here: values a query
computed with ``timestamp()`` are times of samples it could read (``PromClient.check_sample_times``), and figures
with a bound stay within it (``PromClient.check_bounded``). What fails is one ``MalformedResponse`` naming the
source and the field.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import requests
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from gpuaas._https import auth_headers, verify_setting
from gpuaas.errors import (
    ConfigError,
    MalformedResponse,
    SourceError,
    SourceUnavailable,
    redact_endpoint,
    scrub_secrets,
)
from gpuaas.phrases import printable
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._json_answer import UnreadableJSON, read_json
from gpuaas.sources._promql import duration
from gpuaas.sources._retry_after import retry_after_seconds
from gpuaas.sources.failures import in_words

__all__ = ["TIME_SLACK_S", "PromClient", "sample_value"]

_STATUS = re.compile(r"HTTP Status Code (\d+)")
ERROR_CHARS = 300
"""How much of Prometheus' own ``error`` text an error message keeps: enough for a parse error and its
position, not a whole echoed query."""


def _error_text(value: object) -> str:
    """Prometheus' ``error`` field as one bounded line: whitespace runs as one space, other control
    characters escaped (``\\x1b``), so that the text a server sent cannot move a terminal's cursor or split
    a log line."""
    text = " ".join(str(value).split())
    text = printable(text)
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 1] + "…"


def _http_date(value: str | None) -> float | None:
    """An HTTP ``Date`` header as Unix seconds; None where there is none, or none a clock could have written."""
    try:
        at = parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if at is None:
        return None
    stamp = (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()
    return stamp if math.isfinite(stamp) else None


def _shape_problem(body: object) -> str | None:
    """Where a decoded answer departs from ``{"data": {"result": [...]}}``, in words; None where it does not.

    The library indexes the answer blindly, so a wrong shape reaches it as Python's own ``TypeError``
    (``list indices must be integers or slices, not str``) or a bare ``KeyError``; the phrase names the field."""
    if not isinstance(body, dict):
        return "not a JSON object"
    if "data" not in body:
        return "'data' is missing"
    if not isinstance(body["data"], dict):
        return "'data' is not an object"
    if "result" not in body["data"]:
        return "'data.result' is missing"
    return None if isinstance(body["data"]["result"], list) else "'data.result' is not a list"


def _raising(exc: UnreadableJSON) -> Callable[..., Any]:
    """A ``response.json`` that raises ``exc``, the answer's own decoding failure, instead of decoding again."""
    def json(**_: Any) -> Any:
        raise exc
    return json


def sample_value(result: dict[str, Any]) -> float:
    """The float of an instant-vector element (``"NaN"``/``"+Inf"`` included)."""
    return float(result["value"][1])


TIME_SLACK_S = 60.0
"""How far past what was asked a point's time may lie. Prometheus answers at exactly the instant asked, and a range
at whole seconds from its start; a query frontend that aligns a range to its step (Cortex, Mimir) moves it by up to
one step, which the range check allows on top. A minute is far more than any of that, and far less than a period."""


def _utc(t: float) -> str:
    return f"{datetime.fromtimestamp(t, UTC):%Y-%m-%d %H:%M:%S} UTC"


def _time_problem(t: float, lo: float, hi: float, slack_s: float) -> str:
    """What is wrong with ``t`` as the time of a point asked for within ``[lo, hi]`` (unix seconds), give or take
    ``slack_s``, in words."""
    if not math.isfinite(t):
        return f"time {t:g} is not a finite number"
    asked = f"the time asked, {_utc(lo)}" if hi == lo else f"the range asked, {_utc(lo)} – {_utc(hi)}"
    return f"time {t:g} is not within {slack_s:g} s of {asked}"


def _redirected(exc: requests.exceptions.RequestException, configured: str) -> str:
    """``redirected to http://other:9090: `` where the request that failed went to another server than the one
    configured (a proxy's redirect to a login page, or to https): the failure is that server's, not the URL's the
    error names."""
    request = getattr(exc, "request", None)
    went = urlsplit(str(getattr(request, "url", "") or ""))
    asked = urlsplit(configured)
    if not went.netloc or (went.scheme, went.netloc) == (asked.scheme, asked.netloc):
        return ""
    return f"redirected to {redact_endpoint(f'{went.scheme}://{went.netloc}')}: "


class _Session(requests.Session):
    """A session that drops the extra headers on a redirect to another server, as ``requests`` drops
    ``Authorization`` there: an API key or a tenant is for the configured Prometheus alone."""

    def __init__(self, private: frozenset[str]) -> None:
        super().__init__()
        self._private = private

    def rebuild_auth(self, prepared_request: requests.PreparedRequest, response: requests.Response) -> None:
        if self.should_strip_auth(str(response.request.url), str(prepared_request.url)):
            for name in [n for n in prepared_request.headers if n.lower() in self._private]:
                del prepared_request.headers[name]
        super().rebuild_auth(prepared_request, response)


class PromClient:
    """Instant and range queries against one Prometheus; ``queries`` counts what was sent."""

    def __init__(self, settings: GpuaasSettings, source: str = "prometheus") -> None:
        if not settings.prometheus_url:
            raise ConfigError("not set: set it to Prometheus's URL, e.g. http://prometheus.monitoring.svc:9090",
                              field="GPUAAS_PROMETHEUS_URL")
        self.url = settings.prometheus_url.rstrip("/")
        self.source = source
        headers = auth_headers(settings, "prometheus")
        self.queries = 0
        self.bytes_received = 0
        self._count = threading.Lock()  # readers send several queries at once (``_concurrent``)
        self._answer = threading.local()  # what the library drops: Retry-After and warnings
        session = _Session(frozenset(name.lower() for name in settings.prometheus_headers))
        session.verify = verify_setting(settings)
        session.hooks["response"].append(self._inspect)
        self._ahead = (-math.inf, math.inf)  # bounds on how far this worker's clock runs ahead of Prometheus's
        self._prom = PrometheusConnect(
            url=self.url,
            session=session,
            headers=headers,
            retry=Retry(total=0, raise_on_status=False),
            timeout=settings.request_timeout_seconds,
            method="POST",
        )

    def close(self) -> None:
        self._prom.close()

    @property
    def clock_ahead_s(self) -> tuple[float, float] | None:
        """How far this worker's clock runs ahead of Prometheus's (behind where negative), as (at least, at most)
        seconds; None where no answer carried a ``Date`` header.

        Every window and age is counted on this worker's clock and evaluated by Prometheus on its own: a worker
        behind reads the telemetry of minutes ago as current (the last minutes of activity unseen), one ahead reads
        fresh data as stale. Each answer's ``Date`` (whole seconds, written while it was sent) was true at some
        instant between the request leaving and its answer arriving here, which bounds the difference; the bounds of
        every answer of the cycle are intersected."""
        return None if self._ahead == (-math.inf, math.inf) else self._ahead

    def query(self, expr: str, at: datetime) -> list[dict[str, Any]]:
        """The result vector of ``expr`` evaluated at ``at``."""
        result = self._call(lambda: self._prom.custom_query(expr, params={"time": f"{at.timestamp():.3f}"}),
                            "/api/v1/query")
        asked = round(at.timestamp(), 3)  # as sent
        for i, row in enumerate(result):
            if not isinstance(row, dict) or not isinstance(row.get("metric"), dict) or "value" not in row:
                raise MalformedResponse("result element lacks 'metric'/'value'", source=self.source, url=self.url)
            try:
                t = float(row["value"][0])
                sample_value(row)
            except (TypeError, ValueError, IndexError, KeyError) as exc:
                raise MalformedResponse(f"result element value {str(row['value'])[:60]!r} is not [time, \"number\"]",
                                        source=self.source, url=self.url) from exc
            if not asked - TIME_SLACK_S <= t <= asked + TIME_SLACK_S:  # NaN fails it too
                raise MalformedResponse(f"field 'data.result[{i}].value': "
                                        f"{_time_problem(t, asked, asked, TIME_SLACK_S)}", source=self.source,
                                        url=self.url)
        return [r for r in result if not math.isnan(sample_value(r))]

    def query_range(self, expr: str, start: datetime, end: datetime, step_s: float) -> list[dict[str, Any]]:
        """The range matrix of ``expr`` over ``[start, end]`` at ``step_s`` (each row ``metric``, ``values``).

        The step goes out as a PromQL duration (``1209600s``): ``:g`` would write a 14-day step as
        ``1.2096e+06s``, which Prometheus refuses."""
        result = self._call(lambda: self._prom.custom_query_range(expr, start, end, duration(step_s)),
                            "/api/v1/query_range")
        lo, hi, slack = round(start.timestamp()), round(end.timestamp()), step_s + TIME_SLACK_S  # as sent: seconds
        for i, row in enumerate(result):
            if not isinstance(row, dict) or not isinstance(row.get("metric"), dict) or not isinstance(
                    row.get("values"), list):
                raise MalformedResponse("result element lacks 'metric'/'values'", source=self.source, url=self.url)
            for j, point in enumerate(row["values"]):  # as ``query`` checks its values: readers take them as they are
                try:
                    t, _ = float(point[0]), float(point[1])
                    if len(point) != 2:
                        raise ValueError
                except (TypeError, ValueError, IndexError, KeyError) as exc:
                    raise MalformedResponse(f"result element point {str(point)[:60]!r} is not [time, \"number\"]",
                                            source=self.source, url=self.url) from exc
                if not lo - slack <= t <= hi + slack:  # NaN fails it too; worded only then, off the hot path
                    raise MalformedResponse(f"field 'data.result[{i}].values[{j}]': {_time_problem(t, lo, hi, slack)}",
                                            source=self.source, url=self.url)
        return result

    def check_sample_times(self, rows: list[dict[str, Any]], lookback_s: float, field: str) -> None:
        """Raise ``MalformedResponse`` where a value of ``rows`` (a ``query_range`` answer, or part of one) is no
        time of a sample its query could have read: the values a query computes with ``timestamp()`` (when GPU
        telemetry began and ended in a period, when a pod was last seen) lie in the ``lookback_s`` up to their
        point's own time. NaN is no sample, as everywhere. ``field`` names the figure where the series' own
        ``gpuaas_stat`` does not.

        Prometheus computes no other; read as a date, a ``1e308`` a proxy wrote ended the cost report with
        Python's ``timestamp out of range``, and one within the calendar would have moved a period's data."""
        for row in rows:
            for t, value in row["values"]:
                v, at = float(value), float(t)
                if math.isnan(v) or at - lookback_s - TIME_SLACK_S <= v <= at + TIME_SLACK_S:
                    continue
                name = printable(str(row["metric"].get("gpuaas_stat") or field))
                series = "/".join(x for x in (row["metric"].get("gpuaas_namespace"), row["metric"].get("gpuaas_pod"))
                                  if x)
                raise MalformedResponse(
                    f"{name}{f' of {series}' if series else ''} at {_utc(at)} is {v:g}: not the time of a sample in "
                    f"the {lookback_s:,.0f} s up to then", source=self.source, url=self.url)

    def check_bounded(self, rows: list[dict[str, Any]], high: float, field: str) -> None:
        """Raise ``MalformedResponse`` where a value of ``rows`` (a ``query_range`` answer, or part of one) is below 0
        or past ``high`` (``+Inf`` included): a figure its query cannot compute, such as GPU-hours of one pod in one
        period past every GPU a fleet may hold all period long. A proxy rewriting answers writes them (``1e308``),
        and summed they overflow into an infinity no report can print. NaN is no sample, as everywhere."""
        for row in rows:
            for t, value in row["values"]:
                v = float(value)
                if math.isnan(v) or 0.0 <= v <= high:
                    continue
                name = printable(str(row["metric"].get("gpuaas_stat") or field))
                # The labels are the server's: quoted and escaped, so that none can end the line or fake a label.
                who = ", ".join(f"{printable(k)}={printable(json.dumps(str(row['metric'][k]), ensure_ascii=False))}"
                                for k in sorted(row["metric"]) if k != "gpuaas_stat")
                raise MalformedResponse(
                    f"{name} of {{{who[:120]}}} at {_utc(float(t))} is {v:g}: not {field} from 0 to {high:,.0f}",
                    source=self.source, url=self.url)

    def _inspect(self, response: requests.Response, *_: Any, **__: Any) -> None:
        """Keep what ``prometheus_api_client`` throws away: ``Retry-After``, ``warnings``, an error's ``error``, and
        where an answer's shape is wrong (``_shape_problem``).

        A partial answer (a store timed out, a query limit hit) is ``status: success`` with
        ``warnings``; treating it as whole would decide on half the fleet's telemetry. A refused query
        (HTTP 400, 422) says why in ``error`` (``invalid parameter "step": ...``, a PromQL parse error):
        without it a person sees only the status.
        """
        self._answer.received = time.time()
        self._answer.date = _http_date(response.headers.get("Date"))
        self._answer.retry_after = retry_after_seconds(response.headers.get("Retry-After"))
        self._answer.warnings = []
        self._answer.error = None
        self._answer.shape = None
        content = response.content or b""
        with self._count:
            self.bytes_received += len(content)
        try:
            body = read_json(content)
        except UnreadableJSON as exc:
            # The library must not decode it again: the standard json module raises ``RecursionError`` on a
            # deeply nested answer, which is no error ``_call`` could name. It gets this one instead.
            response.json = _raising(exc)  # type: ignore[method-assign]
            return
        # Decoded once, by orjson (``read_json``): the library would decode again with the standard json module,
        # seconds a cycle for the 16,000-GPU answers (tens of MB).
        response.json = lambda **_: body  # type: ignore[method-assign]
        self._answer.shape = _shape_problem(body)
        if isinstance(body, dict) and isinstance(body.get("warnings"), list):
            self._answer.warnings = [str(w)[:200] for w in body["warnings"]]
        if response.status_code >= 400 and isinstance(body, dict) and body.get("error"):
            self._answer.error = _error_text(body["error"])

    def _call(self, fetch: Any, path: str) -> list[Any]:
        with self._count:
            self.queries += 1
        self._answer.retry_after, self._answer.warnings, self._answer.error, self._answer.shape = None, [], None, None
        self._answer.date = None
        sent = time.time()
        try:
            result = fetch()
        except UnreadableJSON as exc:  # from ``_inspect``, through the library's ``response.json()``
            raise MalformedResponse(f"query answer is {exc}", source=self.source, url=self.url) from exc
        except (KeyError, TypeError) as exc:
            shape = self._answer.shape or "not the documented shape"
            raise MalformedResponse(f"query answer: {shape}", source=self.source, url=self.url) from exc
        except requests.exceptions.RequestException as exc:
            # Not chained: requests quotes the whole URL (a ``?access_token=`` included) and a logged
            # traceback would print it; the message keeps what failed, scrubbed.
            text = scrub_secrets(_redirected(exc, self.url) + in_words(exc), self.url)[:300]  # scrub, then cut
            raise SourceUnavailable(text, source=self.source, url=self.url,
                                    too_slow=isinstance(exc, requests.exceptions.ReadTimeout)) from None
        except PrometheusApiClientException as exc:
            match = _STATUS.search(str(exc))
            status = int(match.group(1)) if match else 0
            text = f"HTTP {status or '?'} from {path}"
            if self._answer.error:
                text += f": {self._answer.error}"
            if status == 429 or status >= 500:
                raise SourceUnavailable(text, source=self.source, url=self.url,
                                        retry_after=self._answer.retry_after, too_slow=status == 503) from exc
            raise SourceError(text, source=self.source, url=self.url) from exc
        if self._answer.date is not None:
            with self._count:
                low, high = self._ahead
                self._ahead = (max(low, sent - self._answer.date - 1.0), min(high, self._answer.received - self._answer.date))
        if self._answer.warnings:  # transient: the next attempt usually gets the whole answer
            raise SourceUnavailable(f"partial answer from {path}: {'; '.join(self._answer.warnings)}"[:300],
                                    source=self.source, url=self.url)
        if not isinstance(result, list):
            raise MalformedResponse("query answer: 'data.result' is not a list", source=self.source, url=self.url)
        return result
