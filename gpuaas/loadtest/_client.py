"""The load generator: one step of open-loop requests against an OpenAI-compatible endpoint.

A dispatcher walks the step's schedule and starts each request as its own task at its time,
with its own prompt and ``max_tokens`` from the seeded corpus (``_corpus``),
never waiting for earlier ones (open loop). How late each left is recorded: when the event
loop itself falls behind, that is the *client* failing to keep up, and the step says so
rather than passing it off as the server's limit. The connection pool is unbounded for the
same reason (a pool wait would be a hidden closed loop). Requests stream (SSE) so that the
time to first token is measured where the client sees it.

Bounds: at most ``max_requests_per_step`` requests, none sent after the warm-up and the step,
each cut at ``request_timeout_seconds``, and whatever is still running at
``warmup_seconds + step_seconds + request_timeout_seconds`` is cancelled and recorded as such.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from gpuaas.loadtest._config import LoadTestConfig, base_url
from gpuaas.loadtest._corpus import PromptSpec, request_specs

__all__ = ["RequestResult", "client_for", "run_step", "warm_up"]


@dataclass
class RequestResult:
    step: int
    rate_rps: float
    index: int
    scheduled_s: float
    """Offset from the step's start at which the request was due."""
    measured: bool = True
    """Due after the step's warm-up: part of the steady state the step is judged on."""
    prompt_tokens: int = 0
    max_tokens: int = 0
    lateness_s: float | None = None
    """How late it actually left (None: never sent, the step's time ran out first)."""
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: float | None = None
    """Mean time between output tokens after the first: ``(e2e - ttft) / (tokens - 1)``."""
    output_tokens: int = 0
    status: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    ok: bool = False
    """HTTP 200 and a complete stream."""
    quality_ok: bool = False
    """``ok`` and the answer passed the quality check (finish reason, expected substring)."""

    @property
    def done_s(self) -> float | None:
        """When it finished, from the step's start (None: it did not finish)."""
        if self.e2e_s is None or self.lateness_s is None:
            return None
        return self.scheduled_s + self.lateness_s + self.e2e_s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _body(config: LoadTestConfig, spec: PromptSpec, ignore_eos: bool, stream: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": config.model, "max_tokens": spec.max_tokens, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True  # vLLM's extra parameter: the answer has max_tokens tokens
    if config.api == "chat":
        body["messages"] = [{"role": "user", "content": spec.prompt}]
    else:
        body["prompt"] = spec.prompt
    return body


def _piece(choice: dict[str, Any]) -> str:
    if "delta" in choice:
        return str((choice.get("delta") or {}).get("content") or "")
    return str(choice.get("text") or "")


async def _send(client: httpx.AsyncClient, config: LoadTestConfig, body: dict[str, Any],
                result: RequestResult, due: float) -> None:
    loop = asyncio.get_running_loop()
    sent = loop.time()
    result.lateness_s = max(0.0, sent - due)
    text: list[str] = []
    usage_tokens: int | None = None
    usage_prompt: int | None = None
    try:
        async with asyncio.timeout(config.request_timeout_seconds), \
                client.stream("POST", config.endpoint_url, json=body) as response:
            result.status = response.status_code
            if response.status_code != 200:
                detail = (await response.aread())[:200].decode(errors="replace")
                result.error = f"HTTP {response.status_code}: {detail}"
                return
            done = False
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if chunk.get("usage"):
                    usage_tokens = int(chunk["usage"].get("completion_tokens") or 0)
                    usage_prompt = int(chunk["usage"].get("prompt_tokens") or 0) or None
                for choice in chunk.get("choices") or []:
                    piece = _piece(choice)
                    if piece:
                        if result.ttft_s is None:
                            result.ttft_s = loop.time() - sent
                        text.append(piece)
                        result.output_tokens += 1
                    if choice.get("finish_reason"):
                        result.finish_reason = str(choice["finish_reason"])
            result.e2e_s = loop.time() - sent
            if usage_tokens is not None:
                result.output_tokens = usage_tokens
            if usage_prompt is not None:
                result.prompt_tokens = usage_prompt
            if result.ttft_s is not None and result.output_tokens > 1:
                result.itl_s = (result.e2e_s - result.ttft_s) / (result.output_tokens - 1)
            if not done:
                result.error = "the stream ended without [DONE]"
                return
            result.ok = True
            answer = "".join(text)
            reasons_ok = result.finish_reason in config.finish_reasons
            substring_ok = config.expect_substring is None or config.expect_substring in answer
            result.quality_ok = reasons_ok and substring_ok
            if not result.quality_ok:
                result.error = (f"quality: finish_reason {result.finish_reason!r}" if not reasons_ok
                                else f"quality: answer lacks {config.expect_substring!r}")
    except (TimeoutError, httpx.TimeoutException):
        result.error = f"timed out after {config.request_timeout_seconds:g}s"
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        result.error = f"{type(exc).__name__}: {str(exc)[:200]}"
    except asyncio.CancelledError:
        result.error = f"cancelled at the step's time limit ({config.max_step_seconds:g}s)"
        raise


async def _run(client: httpx.AsyncClient, config: LoadTestConfig, step: int, rate: float,
               schedule: list[float], ignore_eos: bool) -> list[RequestResult]:
    specs = request_specs(len(schedule), prompt_tokens=config.prompt_tokens, output_tokens=config.output_tokens,
                          prompt_spread=config.prompt_spread, output_spread=config.output_spread, seed=config.seed,
                          step=step)
    results = [RequestResult(step, rate, i, s, measured=s >= config.warmup_seconds, prompt_tokens=spec.prompt_tokens,
                             max_tokens=spec.max_tokens) for i, (s, spec) in enumerate(zip(schedule, specs))]
    bodies = [_body(config, spec, ignore_eos) for spec in specs]
    loop = asyncio.get_running_loop()
    start = loop.time()
    hard_stop = start + config.max_step_seconds
    tasks: list[asyncio.Task[None]] = []
    for result in results:
        due = start + result.scheduled_s
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_send(client, config, bodies[result.index], result, due)))
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=max(0.0, hard_stop - loop.time()))
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
    return results


async def warm_up(client: httpx.AsyncClient, config: LoadTestConfig) -> bool:
    """``GET /v1/models`` and one short request before the first step (not counted): the first
    connection and the client's own first-use costs must not show up as lateness, or as latency,
    of step one. Returns whether the server takes ``ignore_eos`` (a 400 naming it: it does not)."""
    try:
        await client.get(base_url(config.url) + "/v1/models")
        if not config.ignore_eos:
            return False
        probe = PromptSpec("warm up", 2, 1)
        answer = await client.post(config.endpoint_url, json=_body(config, probe, True, stream=False))
        return not (answer.status_code == 400 and "ignore_eos" in answer.text)
    except httpx.HTTPError:
        return config.ignore_eos  # the steps will record whatever is wrong, request by request


def client_for(config: LoadTestConfig) -> httpx.AsyncClient:
    """One client for the whole sweep: connections opened by one step serve the next."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    return httpx.AsyncClient(limits=limits, timeout=httpx.Timeout(config.request_timeout_seconds))


async def run_step(client: httpx.AsyncClient, config: LoadTestConfig, step: int, rate: float,
                   schedule: list[float], ignore_eos: bool = False) -> tuple[list[RequestResult], float]:
    """Send one step's schedule; returns the results and the step's wall time in seconds."""
    began = time.monotonic()
    results = await _run(client, config, step, rate, schedule, ignore_eos)
    return results, time.monotonic() - began
