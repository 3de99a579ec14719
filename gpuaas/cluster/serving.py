"""OpenAI-compatible endpoints for the embedded cluster's InferenceServices, with vLLM metrics.

Each InferenceService of the scenario that serves traffic gets one HTTP server on
127.0.0.1 answering ``POST /v1/completions`` and ``POST /v1/chat/completions`` (JSON, or
server-sent events with ``"stream": true``), ``GET /v1/models``, ``GET /health`` and, as vLLM
does on its API port, ``GET /metrics``. Its replicas are the service's pods that hold GPUs
right now (re-read from the Kueue emulator on every live tick); with none, requests get 503.

**Latency model** (``gpuaas.cluster._engine``; parameters per service under
``serving.engine`` in the scenario). Per replica:

* at most ``max_num_seqs`` sequences run at once; a request goes to the replicas in turn
  (round robin), runs if its replica has a free slot, else waits in that replica's FIFO
  queue, and gets **503** when ``max_num_waiting`` requests already wait there;
* ``TTFT = wait + P * prefill_seconds_per_token`` (``P``: one prompt token per
  whitespace-separated word of the prompt or messages);
* each further output token takes
  ``decode_seconds_per_token * (1 + decode_slowdown_per_seq * (n - 1))`` with ``n`` the
  sequences running on the replica at that moment; ``max_tokens`` tokens are generated
  (EOS ignored), so the finish reason is ``length``.

So one replica saturates at ``max_num_seqs / (P*p + (M-1)*d(max_num_seqs))`` requests per
second (``model_capacity_rps``), and ``simulate`` replays the same rules offline on a given
arrival schedule. Sleeps aim at absolute deadlines, so a late wake-up does not add up over
the tokens of a request.

**Metrics**, as vLLM V1 names and labels them (``engine``, ``model_name``, plus the pod's
``namespace`` and ``pod`` as a scrape would add): ``vllm:e2e_request_latency_seconds`` and
``vllm:time_to_first_token_seconds`` (histograms with vLLM's bucket bounds),
``vllm:num_requests_running``/``_waiting``, ``vllm:request_success_total{finished_reason}``,
``vllm:prompt_tokens_total``, ``vllm:generation_tokens_total``. Prometheus scrapes each
endpoint's ``/metrics`` (wall-clock scrape stamps: this traffic is real, not simulated); the
series add to the simulated traffic's series of the same pods (a different ``instance``).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client import generate_latest

from gpuaas.cluster._engine import EngineModel, model_capacity_rps
from gpuaas.cluster._http_reply import EXPOSITION, reply, reply_json
from gpuaas.cluster._http_server import EmbeddedHTTPServer
from gpuaas.cluster._scenario_models import Scenario, Serving, WorkloadKind
from gpuaas.cluster._serving_metrics import TTFT_BUCKETS, ServingMetrics

__all__ = ["ANSWER", "TTFT_BUCKETS", "EngineModel", "ServingEndpoint", "ServingEndpoints", "endpoint_env_name",
           "model_capacity_rps"]

ANSWER = ("Hello", " from", " the", " embedded", " cluster", ".")
"""The words every answer cycles through (a quality check can look for ``Hello``)."""

def endpoint_env_name(namespace: str, name: str) -> str:
    """``GPUAAS_ENDPOINT_<NAMESPACE>_<NAME>``, upper case, other characters as ``_``."""
    return "GPUAAS_ENDPOINT_" + re.sub(r"[^A-Z0-9]", "_", f"{namespace}_{name}".upper())


@dataclass
class _Replica:
    pod: str
    running: int = 0
    waiting: deque[threading.Event] = field(default_factory=deque)


class _Refused(Exception):  # noqa: N818 - a 503 answer, not an error of ours
    pass


class _Engine:
    """Admission, slots and queues of one service's replicas; all state under one lock."""

    def __init__(self, model: EngineModel, metrics: ServingMetrics) -> None:
        self.model = model
        self.metrics = metrics
        self.lock = threading.Lock()
        self.replicas: list[_Replica] = []
        self._turn = 0

    def set_pods(self, pods: Iterable[str]) -> None:
        with self.lock:
            wanted = sorted(set(pods))
            kept = {r.pod: r for r in self.replicas}
            self.replicas = [kept.get(p) or _Replica(p) for p in wanted]
        for pod in wanted:
            self.metrics.add_pod(pod)

    def _gauges(self, replica: _Replica) -> None:
        lab = self.metrics.labels(replica.pod)
        self.metrics.running.labels(**lab).set(replica.running)
        self.metrics.waiting.labels(**lab).set(len(replica.waiting))

    def admit(self, timeout: float) -> _Replica:
        """A slot on the next replica in turn, waiting in its queue if need be; _Refused when full."""
        with self.lock:
            if not self.replicas:
                raise _Refused("no replica of this service is running")
            replica = self.replicas[self._turn % len(self.replicas)]
            self._turn += 1
            if replica.running < self.model.max_num_seqs:
                replica.running += 1
                self._gauges(replica)
                return replica
            if len(replica.waiting) >= self.model.max_num_waiting:
                raise _Refused(f"{self.model.max_num_waiting} requests already wait on {replica.pod}")
            ticket = threading.Event()
            replica.waiting.append(ticket)
            self._gauges(replica)
        if ticket.wait(timeout):
            return replica  # release() moved us into a slot
        with self.lock:
            if ticket.is_set():
                return replica
            replica.waiting.remove(ticket)
            self._gauges(replica)
        raise _Refused("timed out waiting for a slot")

    def running_on(self, replica: _Replica) -> int:
        with self.lock:
            return replica.running

    def release(self, replica: _Replica) -> None:
        with self.lock:
            if replica.waiting:
                replica.waiting.popleft().set()  # the slot passes to the head of the queue
            else:
                replica.running -= 1
            self._gauges(replica)


def _count_tokens(text: str) -> int:
    return max(1, len(text.split()))


@dataclass(frozen=True)
class _Request:
    chat: bool
    prompt_tokens: int
    max_tokens: int
    stream: bool
    include_usage: bool


class _HTTP(EmbeddedHTTPServer):
    request_queue_size = 1024  # Poisson bursts must not overflow the accept backlog
    endpoint: ServingEndpoint


class _Handler(BaseHTTPRequestHandler):
    server: _HTTP
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return

    def _json(self, status: int, body: dict[str, Any]) -> None:
        reply_json(self, status, body)

    def _error(self, status: int, kind: str, message: str) -> None:
        self._json(status, {"object": "error", "error": {"message": message, "type": kind, "code": status}})

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        ep = self.server.endpoint
        path = self.path.split("?")[0]
        if path == "/metrics":
            reply(self, 200, generate_latest(ep.metrics.registry), EXPOSITION)
        elif path == "/health":
            self._json(200, {})
        elif path == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": ep.model_name, "object": "model", "created": int(time.time()), "owned_by": "vllm"}]})
        else:
            self._error(404, "NotFoundError", f"no route {path}")

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?")[0]
        if path not in ("/v1/completions", "/v1/chat/completions"):
            self._error(404, "NotFoundError", f"no route {path}")
            return
        arrived = time.monotonic()
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            request = self._parse(body, chat=path.endswith("chat/completions"))
        except (ValueError, TypeError) as exc:
            self._error(400, "BadRequestError", str(exc)[:200])
            return
        if body.get("model") != self.server.endpoint.model_name:
            self._error(404, "NotFoundError", f"The model `{body.get('model')}` does not exist.")
            return
        self.server.endpoint.serve(self, request, arrived)

    def _parse(self, body: Any, chat: bool) -> _Request:
        if not isinstance(body, dict):
            raise ValueError("the body must be a JSON object")
        model = self.server.endpoint.engine.model
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise ValueError("messages: a non-empty list is required")
            text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
            max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list):
                prompt = " ".join(map(str, prompt))
            if not isinstance(prompt, str):
                raise ValueError("prompt: a string is required")
            text, max_tokens = prompt, body.get("max_tokens")
        max_tokens = model.default_max_tokens if max_tokens is None else max_tokens
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ValueError("max_tokens: a positive integer is required")
        options = body.get("stream_options") or {}
        return _Request(chat, _count_tokens(text), max_tokens, bool(body.get("stream")),
                        bool(isinstance(options, dict) and options.get("include_usage")))

    # --- streaming ---------------------------------------------------------------------
    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def event(self, payload: dict[str, Any] | str) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        data = f"data: {text}\n\n".encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class ServingEndpoint:
    """One InferenceService's OpenAI-compatible server (see the module docstring)."""

    def __init__(self, namespace: str, name: str, serving: Serving) -> None:
        self.namespace = namespace
        self.name = name
        self.serving = serving
        self.model_name = serving.model_name
        self.metrics = ServingMetrics(serving.model_name, namespace)
        self.engine = _Engine(serving.engine, self.metrics)
        self._httpd = _HTTP(("127.0.0.1", 0), _Handler)
        self._httpd.endpoint = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, name=f"serving-{name}", daemon=True)
        self._stopping = threading.Event()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The OpenAI base URL (``…/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._httpd.shutdown()
        self._httpd.server_close()

    def serve(self, handler: _Handler, request: _Request, arrived: float) -> None:
        model = self.engine.model
        try:
            replica = self.engine.admit(timeout=600)
        except _Refused as exc:
            handler._error(503, "ServiceUnavailableError", str(exc))
            return
        lab = self.metrics.labels(replica.pod)
        rid = ("chatcmpl-" if request.chat else "cmpl-") + uuid.uuid4().hex[:24]
        created = int(time.time())
        reason = "length"
        pieces: list[str] = []
        try:
            deadline = time.monotonic() + model.prefill_seconds(request.prompt_tokens)
            if request.stream:
                handler.start_stream()
            for k, token in enumerate(self._tokens(request.max_tokens)):
                if k > 0:
                    deadline += model.decode_seconds(self.engine.running_on(replica))
                self._sleep_until(deadline)
                if k == 0:
                    self.metrics.ttft.labels(**lab).observe(time.monotonic() - arrived)
                pieces.append(token)
                if request.stream:
                    handler.event(self._chunk(rid, created, request, token, k, None))
            if request.stream:
                handler.event(self._chunk(rid, created, request, "", -1, reason))
                if request.include_usage:
                    handler.event({"id": rid, "object": self._object(request, True), "created": created,
                                   "model": self.model_name, "choices": [], "usage": self._usage(request)})
                handler.event("[DONE]")
                handler.end_stream()
        except (BrokenPipeError, ConnectionResetError):
            reason = "abort"
            handler.close_connection = True
        finally:
            self.engine.release(replica)
            self.metrics.success.labels(**lab, finished_reason=reason).inc()
            self.metrics.prompt_tokens.labels(**lab).inc(request.prompt_tokens)
            self.metrics.generation_tokens.labels(**lab).inc(len(pieces))
            self.metrics.e2e.labels(**lab).observe(time.monotonic() - arrived)
        if not request.stream and reason != "abort":
            text = "".join(pieces)
            choice: dict[str, Any] = {"index": 0, "finish_reason": reason, "logprobs": None}
            choice.update({"message": {"role": "assistant", "content": text}} if request.chat else {"text": text})
            handler._json(200, {"id": rid, "object": self._object(request, False), "created": created,
                                "model": self.model_name, "choices": [choice], "usage": self._usage(request)})

    def _sleep_until(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left > 0:
            self._stopping.wait(left)

    @staticmethod
    def _tokens(n: int) -> Iterator[str]:
        for k in range(n):
            yield ANSWER[k % len(ANSWER)]

    @staticmethod
    def _object(request: _Request, stream: bool) -> str:
        if request.chat:
            return "chat.completion.chunk" if stream else "chat.completion"
        return "text_completion"

    def _usage(self, request: _Request) -> dict[str, int]:
        return {"prompt_tokens": request.prompt_tokens, "completion_tokens": request.max_tokens,
                "total_tokens": request.prompt_tokens + request.max_tokens}

    def _chunk(self, rid: str, created: int, request: _Request, token: str, k: int,
               finish: str | None) -> dict[str, Any]:
        if request.chat:
            delta: dict[str, Any] = {} if finish else {"content": token}
            if k == 0:
                delta["role"] = "assistant"
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": token, "logprobs": None, "finish_reason": finish}
        return {"id": rid, "object": self._object(request, True), "created": created, "model": self.model_name,
                "choices": [choice]}


class ServingEndpoints:
    """The endpoints of every serving InferenceService of a scenario (created bound, started later)."""

    def __init__(self, scenario: Scenario) -> None:
        self.endpoints: dict[tuple[str, str], ServingEndpoint] = {}
        for spec in scenario.workloads:
            if spec.kind is not WorkloadKind.INFERENCE_SERVICE or spec.serving is None:
                continue
            namespace = scenario.tenant(spec.tenant).ns
            for name in spec.instance_names():
                self.endpoints[(namespace, name)] = ServingEndpoint(namespace, name, spec.serving)

    @property
    def targets(self) -> list[str]:
        return [ep.target for ep in self.endpoints.values()]

    def env(self) -> dict[str, str]:
        return {endpoint_env_name(ns, name): ep.url for (ns, name), ep in self.endpoints.items()}

    def sync(self, assignments: Iterable[Any]) -> None:
        """Replicas = the service's pods that hold GPUs now (``KueueController.gpu_assignments()``)."""
        pods: dict[tuple[str, str], set[str]] = {key: set() for key in self.endpoints}
        for a in assignments:
            if a.owner_kind == WorkloadKind.INFERENCE_SERVICE.value and (a.namespace, a.owner_name) in pods:
                pods[(a.namespace, a.owner_name)].add(a.pod)
        for key, ep in self.endpoints.items():
            ep.engine.set_pods(pods[key])

    def start(self) -> None:
        for ep in self.endpoints.values():
            ep.start()

    def stop(self) -> None:
        for ep in self.endpoints.values():
            ep.stop()
