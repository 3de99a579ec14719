"""A counted, error-mapped PromQL client for Prometheus's HTTP API and the backends that speak it.

Every query is evaluated at an explicit ``time`` so a snapshot is reproducible, retries are left to the calling
task (they depend on the error type), and ``requests``' exceptions are translated into ``gpuaas.errors`` here.

Every query is a POST with the query in a form-encoded body, never the URL: an nginx in front answers 414 past an
8 KB request line, and the activity query alone is longer. Prometheus, Thanos, Mimir and VictoriaMetrics all read
``/api/v1/query`` and ``/query_range`` parameters from a POST body, and ignore the ones they do not know (``_FORM``):

* ``nocache=1``: VictoriaMetrics evaluates an instant query for the last ``-search.latencyOffset`` (30 s) that
  much earlier, then moves the answer's time back to the time asked, and aligns a range of 50 or more points to
  its step, unless ``nocache`` is sent (``QueryHandler``, ``queryRangeHandler`` in its
  ``app/vmselect/prometheus/prometheus.go``). No age check could see it: a GPU busy only in its last 30 s read idle.
* ``max_source_resolution=0s``: a Thanos querier with ``--query.auto-downsampling`` answers a day-step range from
  downsampled blocks, whose hourly samples a sub-query reads as gaps. Raw data only: a range past the raw
  retention reads as missing, which every reader treats as unknown.

An answer is streamed, within ``DEADLINE_FACTOR`` request timeouts in all and ``MAX_ANSWER_BYTES`` decoded: a server
sending a byte a second, or without end, fails the source in one line instead of holding the run. Every point is
then checked before any reader sees it: ``[time, "number"]``, an instant's time finite and within ``TIME_SLACK_S``
of what was asked (``1e308`` from a proxy rewriting answers would put a point in the wrong period), a range's on
its ``start + k * step`` grid (``GRID_SLACK_S``). Where a reader knows more of a value, it asks here: times a query
computed with ``timestamp()`` (``PromClient.check_sample_times``), figures with a bound (``PromClient.check_bounded``).
What fails is one ``MalformedResponse`` naming the source and the field. A refusal naming one of the server's query
limits is an ``OverQueryLimit``: no retry will pass, a smaller query may (``smaller_may_answer``).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from gpuaas._https import auth_headers, verify_setting
from gpuaas.errors import ConfigError, MalformedResponse, SourceError, SourceUnavailable, redact_endpoint, scrub_secrets
from gpuaas.phrases import printable
from gpuaas.settings import GpuaasSettings
from gpuaas.sources._json_answer import UnreadableJSON, read_json
from gpuaas.sources._promql import duration
from gpuaas.sources._retry_after import retry_after_seconds
from gpuaas.sources.failures import in_words

__all__ = ["DEADLINE_FACTOR", "ERROR_CHARS", "GRID_SLACK_S", "MAX_ANSWER_BYTES", "MAX_POINTS", "TIME_SLACK_S",
           "OverQueryLimit", "PromClient", "sample_value", "smaller_may_answer"]

ERROR_CHARS = 300
"""How much of Prometheus' own ``error`` text an error message keeps: enough for a parse error and its
position, not a whole echoed query."""

_FORM = {"nocache": "1", "max_source_resolution": "0s"}
"""Sent with every query, for the backends that read them (the module docstring says why)."""

MAX_POINTS = 11_000
"""The most points a range query may ask for per series: Prometheus (and Thanos, Mimir) refuse more with
``exceeded maximum resolution of 11,000 points per timeseries``."""

DEADLINE_FACTOR = 3
"""A whole answer must arrive within this many request timeouts of the request leaving: the timeout bounds
each read, and a server sending a byte at a time would otherwise never time out."""

MAX_ANSWER_BYTES = 512 * 2**20
"""The most an answer may hold, decoded: a 16,000-GPU fleet's answers are tens of MB."""

_READ_BYTES = 2**20

_NO_STORE = "No StoreAPIs matched for this query"
"""Thanos' warning when none of its stores holds the time range asked: it says the same on every attempt."""

_LIMIT = re.compile(
    r"too many samples|maximum resolution of [\d,]+ points|err-mimir-max-|max number of (?:series|chunks)"
    r"|maxSamplesPerQuery|maxUniqueTimeseries|maxPointsPerTimeseries|-search\.max(?!QueryLen)\w+", re.IGNORECASE)
"""A refusal's words that name a query limit a smaller range may stay within: Prometheus' ``--query.max-samples``
and 11,000 points, Mimir's ``err-mimir-max-*``, Cortex's chunk and series limits, VictoriaMetrics'
``-search.max*`` flags (not ``-search.maxQueryLen``: the query's own length does not shrink)."""

_ECHOED_QUERY = re.compile(r'query="(?:[^"\\]|\\.)*"')


class OverQueryLimit(SourceError):
    """The server refused a query as over one of its limits (samples, series, chunks, points, time range): the
    same query will be refused again, so it is no ``TransientError``, but a smaller one may answer."""


def smaller_may_answer(exc: SourceError) -> bool:
    """Whether asking the same over a shorter range may get an answer: the server was too slow (a read timeout,
    its own query timeout) or refused the query as over a limit."""
    return isinstance(exc, OverQueryLimit) or (isinstance(exc, SourceUnavailable) and exc.too_slow)


def _error_text(value: object) -> str:
    """Prometheus' ``error`` field as one bounded line: whitespace runs as one space, other control
    characters escaped (``\\x1b``), so that the text a server sent cannot move a terminal's cursor or split
    a log line. A query VictoriaMetrics echoes (``query="..."``) is left out: it would fill the line."""
    text = _ECHOED_QUERY.sub('query="…"', " ".join(str(value).split()))
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
    """Where a decoded answer departs from ``{"data": {"result": [...]}}``, in words; None where it does not."""
    if not isinstance(body, dict):
        return "not a JSON object"
    if "data" not in body:
        return "'data' is missing"
    if not isinstance(body["data"], dict):
        return "'data' is not an object"
    if "result" not in body["data"]:
        return "'data.result' is missing"
    return None if isinstance(body["data"]["result"], list) else "'data.result' is not a list"


def sample_value(result: dict[str, Any]) -> float:
    """The float of an instant-vector element (``"NaN"``/``"+Inf"`` included)."""
    return float(result["value"][1])


TIME_SLACK_S = 60.0
"""How far from what was asked an instant answer's time may lie: Prometheus answers at exactly the instant
asked. A minute is far more than that, and far less than a period."""

GRID_SLACK_S = 1.0
"""How far from its ``start + k * step`` a range point may lie. Prometheus puts every point on that grid (to the
millisecond, from the whole-second start sent). A query frontend that aligns a range to its step (Thanos'
query-frontend by default, Cortex and Mimir with ``align_queries_with_step``) moves every point up to a step:
a day-step cost query's points to midnight, its days merged or shifted, which must fail, not pass."""


def _utc(t: float) -> str:
    return f"{datetime.fromtimestamp(t, UTC):%Y-%m-%d %H:%M:%S} UTC"


def _time_problem(t: float, lo: float, hi: float, slack_s: float) -> str:
    """What is wrong with ``t`` as the time of a point asked for within ``[lo, hi]`` (unix seconds), give or take
    ``slack_s``, in words."""
    if not math.isfinite(t):
        return f"time {t:g} is not a finite number"
    asked = f"the time asked, {_utc(lo)}" if hi == lo else f"the range asked, {_utc(lo)} – {_utc(hi)}"
    return f"time {t:g} is not within {slack_s:g} s of {asked}"


def _off_grid(t: float, lo: float, step_s: float) -> bool:
    """Whether ``t`` lies more than ``GRID_SLACK_S`` from every ``lo + k * step_s``."""
    off = (t - lo) % step_s
    return GRID_SLACK_S < off < step_s - GRID_SLACK_S


def _point_problem(t: float, lo: float, hi: float, step_s: float) -> str:
    """What is wrong with ``t`` as the time of a range point, in words: off the grid by less than a step is what a
    query frontend aligning the range to its step writes, and says so; anything else is far from what was asked."""
    if lo - step_s < t < hi + step_s and _off_grid(t, lo, step_s):
        return (f"time {_utc(t)} is not on the step grid asked ({_utc(lo)} + k x {duration(step_s)}): a query "
                "frontend aligning queries to the step? (Thanos query-frontend, Mimir align_queries_with_step)")
    return _time_problem(t, lo, hi, GRID_SLACK_S)


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
        self._headers = auth_headers(settings, "prometheus")
        self._timeout = settings.request_timeout_seconds
        self.queries = 0
        self.bytes_received = 0
        self._count = threading.Lock()  # readers send several queries at once (``_concurrent``)
        self._session = _Session(frozenset(name.lower() for name in settings.prometheus_headers))
        self._session.verify = verify_setting(settings)
        self._session.mount(self.url, HTTPAdapter(max_retries=Retry(total=0, raise_on_status=False)))
        self._ahead = (-math.inf, math.inf)  # bounds on how far this worker's clock runs ahead of Prometheus's

    def close(self) -> None:
        self._session.close()

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
        result = self._call("/api/v1/query", {"query": expr, "time": f"{at.timestamp():.3f}"})
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

        Start and end go out in whole seconds; the step as a PromQL duration (``1209600s``): ``:g`` would write a
        14-day step as ``1.2096e+06s``, which Prometheus refuses."""
        lo, hi = round(start.timestamp()), round(end.timestamp())  # as sent
        result = self._call("/api/v1/query_range", {"query": expr, "start": str(lo), "end": str(hi),
                                                    "step": duration(step_s)})
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
                if not lo - GRID_SLACK_S <= t <= hi + GRID_SLACK_S or _off_grid(t, lo, step_s):  # NaN fails too
                    raise MalformedResponse(f"field 'data.result[{i}].values[{j}]': {_point_problem(t, lo, hi, step_s)}",
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

    def _call(self, path: str, form: dict[str, str]) -> list[Any]:
        """``data.result`` of the answer to ``form`` POSTed to ``path``, read within the deadline and size.

        Kept from the answer beyond the result: ``Retry-After``, the ``Date`` (``clock_ahead_s``), a refusal's
        ``error`` (HTTP 400, 422: ``invalid parameter "step": ...``, a PromQL parse error, a limit hit: without it
        a person sees only the status) and ``warnings``. A partial answer (a store timed out, a query limit hit) is
        ``status: success`` with ``warnings``; treating it as whole would decide on half the fleet's telemetry."""
        with self._count:
            self.queries += 1
        sent, started = time.time(), time.monotonic()
        try:
            with self._session.post(self.url + path, data={**form, **_FORM}, headers=self._headers,
                                    timeout=self._timeout, stream=True) as response:
                received = time.time()
                content = self._read_body(response, started + DEADLINE_FACTOR * self._timeout)
        except requests.exceptions.RequestException as exc:
            # Not chained: requests quotes the whole URL (a ``?access_token=`` included) and a logged
            # traceback would print it; the message keeps what failed, scrubbed.
            text = scrub_secrets(_redirected(exc, self.url) + in_words(exc), self.url)[:300]  # scrub, then cut
            raise SourceUnavailable(text, source=self.source, url=self.url,
                                    too_slow=isinstance(exc, requests.exceptions.ReadTimeout)) from None
        with self._count:
            self.bytes_received += len(content)
        try:
            body = read_json(content)  # orjson: the 16,000-GPU answers are tens of MB
        except UnreadableJSON as exc:
            if response.status_code == 200:
                raise MalformedResponse(f"query answer is {exc}", source=self.source, url=self.url) from exc
            body = None  # an error page (a proxy's HTML): the status says it
        if response.status_code != 200:
            self._refused(response, path, body)
        date = _http_date(response.headers.get("Date"))
        if date is not None:
            with self._count:
                low, high = self._ahead
                self._ahead = (max(low, sent - date - 1.0), min(high, received - date))
        shape = _shape_problem(body)
        if shape is not None:
            raise MalformedResponse(f"query answer: {shape}", source=self.source, url=self.url)
        assert isinstance(body, dict)
        self._check_warnings(body, path)
        result: list[Any] = body["data"]["result"]
        return result

    def _read_body(self, response: requests.Response, deadline: float) -> bytes:
        """The decoded body of a streamed ``response``, read a chunk at a time: whatever each read brings, the
        deadline and the size are checked before the next (``read1``: one read of the socket, where ``read`` loops
        until its chunk is full, which a drip keeps going). Raises ``requests``' errors for the socket's."""
        length = response.headers.get("Content-Length", "")
        declared, size, parts = int(length) if length.isdigit() else 0, 0, list[bytes]()
        try:
            while declared <= MAX_ANSWER_BYTES and size <= MAX_ANSWER_BYTES and time.monotonic() <= deadline:
                if not (chunk := response.raw.read1(_READ_BYTES, decode_content=True)):
                    return b"".join(parts)
                size += len(chunk)
                parts.append(chunk)
        except urllib3.exceptions.ReadTimeoutError as exc:
            raise requests.exceptions.ReadTimeout(exc) from exc
        except urllib3.exceptions.DecodeError as exc:
            raise requests.exceptions.ContentDecodingError(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise requests.exceptions.ConnectionError(exc) from exc
        if max(declared, size) > MAX_ANSWER_BYTES:
            raise MalformedResponse(f"answer over {MAX_ANSWER_BYTES // 2**20} MiB: not read further",
                                    source=self.source, url=self.url)
        raise SourceUnavailable(f"answer still incomplete after {DEADLINE_FACTOR} x {self._timeout:g} s "
                                "(GPUAAS_REQUEST_TIMEOUT_SECONDS): the server sends too slowly",
                                source=self.source, url=self.url, too_slow=True)

    def _refused(self, response: requests.Response, path: str, body: object) -> None:
        """Raise what an error status means: 429 and 5xx are worth another attempt (a 503 is Prometheus' own
        query timeout: too slow); a limit refusal may answer smaller; any other refusal will be refused again."""
        status = response.status_code
        error = str(body.get("error") or "") if isinstance(body, dict) else ""
        reason = _error_text(error) if error else ""
        text = f"HTTP {status} from {path}" + (f": {reason}" if reason else "")
        if status == 429 or status >= 500:
            raise SourceUnavailable(text, source=self.source, url=self.url, too_slow=status == 503,
                                    retry_after=retry_after_seconds(response.headers.get("Retry-After")))
        if status in (400, 422) and _LIMIT.search(_ECHOED_QUERY.sub("", error)):
            raise OverQueryLimit(text, source=self.source, url=self.url)
        raise SourceError(text, source=self.source, url=self.url)

    def _check_warnings(self, body: dict[str, Any], path: str) -> None:
        """Raise for an answer whose ``warnings`` say it is not whole. Left out: ``PromQL info:`` annotations, which
        Prometheus releases before mid-2024 put there (newer ones answer them as ``infos``): they describe the
        query, not the answer, and come on every attempt. Thanos' ``No StoreAPIs matched`` comes on every attempt too: no retry."""
        warnings = body.get("warnings")
        if not isinstance(warnings, list):
            return
        kept = [_error_text(w) for w in warnings if not str(w).startswith("PromQL info:")]
        if any(_NO_STORE in w for w in kept):
            raise SourceError(f"no store holds this range: older than the backend keeps? (Thanos, {path}: "
                              f"{_NO_STORE})", source=self.source, url=self.url)
        if kept:  # transient: the next attempt usually gets the whole answer
            raise SourceUnavailable(f"partial answer from {path}: {'; '.join(kept)}"[:300],
                                    source=self.source, url=self.url)
