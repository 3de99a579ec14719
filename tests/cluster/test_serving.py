"""The embedded OpenAI endpoint and its latency model.

Cases: the model's formulas by hand; the offline replay (``simulate``) on hand-made arrivals
(a queue, a 503, round robin over replicas); the HTTP endpoint's completions and chat answers,
streamed and not, in the OpenAI shapes; 503 past the queue limit; the vLLM series on
``/metrics`` against the real vLLM capture. The endpoints inside the embedded cluster (replicas
from the service's pods, URLs in the env, series in its Prometheus) are checked with the load
tests in ``tests/loadtest/test_loadtest_embedded.py``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gpuaas.cluster._engine import EngineModel, model_capacity_rps, simulate
from gpuaas.cluster.scenario import parse_scenario
from gpuaas.cluster.serving import ServingEndpoint

MODEL = EngineModel(max_num_seqs=2, max_num_waiting=1, prefill_seconds_per_token=0.01,
                    decode_seconds_per_token=0.1, decode_slowdown_per_seq=0.5)


def test_formulas_by_hand() -> None:
    # P = 10 prompt tokens, M = 4 output tokens
    assert MODEL.prefill_seconds(10) == pytest.approx(0.1)
    assert MODEL.decode_seconds(1) == pytest.approx(0.1) and MODEL.decode_seconds(2) == pytest.approx(0.15)
    assert MODEL.unloaded_latency(10, 4) == pytest.approx(0.1 + 3 * 0.1)
    # full batch: 0.1 + 3 * 0.15 = 0.55 s per request, 2 slots -> 3.636 rps
    assert MODEL.saturation_rps(10, 4) == pytest.approx(2 / 0.55)
    # SLO rate: base = 0.1 + 0.3 * 0.5 = 0.25; (1 - 0.25 / 0.5) / (0.3 * 0.5) = 3.333 rps < saturation
    assert model_capacity_rps(MODEL, 10, 4, slo_seconds=0.5) == pytest.approx(1 / 0.3)
    assert model_capacity_rps(MODEL, 10, 4, slo_seconds=10, replicas=3) == pytest.approx(3 * 2 / 0.55)
    assert model_capacity_rps(MODEL, 10, 4, slo_seconds=0.3) == 0.0


def test_simulate_queues_refuses_and_slows_the_batch() -> None:
    # four requests at t=0 on one replica: two run, one waits, one is refused
    out = simulate(MODEL, [0.0, 0.0, 0.0, 0.0], prompt_tokens=10, output_tokens=4)
    by_status = sorted((r.status, r.e2e) for r in out)
    assert [s for s, _ in by_status] == [200, 200, 200, 503]
    # the two running ones: prefill 0.1, then three tokens at a batch of 2 (0.15 each)
    assert by_status[0][1] == pytest.approx(0.55) and by_status[1][1] == pytest.approx(0.55)
    # the queued one starts at 0.55 alone: 0.55 + 0.1 + 3 * 0.1
    assert by_status[2][1] == pytest.approx(0.95)
    ttft = sorted(r.ttft for r in out if r.ttft is not None)
    assert ttft == pytest.approx([0.1, 0.1, 0.65])


def test_simulate_round_robin_over_replicas() -> None:
    out = simulate(MODEL, [0.0, 0.0, 0.0, 0.0], prompt_tokens=10, output_tokens=4, replicas=2)
    assert all(r.status == 200 and r.e2e == pytest.approx(0.55) for r in out)


@pytest.fixture
def endpoint() -> Iterator[ServingEndpoint]:
    serving = parse_scenario({
        "flavors": [{"name": "f"}], "pools": [{"name": "p", "count": 1, "flavor": "f", "gpu_hourly_price": 1}],
        "tenants": [{"name": "t", "quotas": [{"flavor": "f", "gpus": 8}]}],
        "workloads": [{"name": "svc", "kind": "InferenceService", "tenant": "t", "serving": {
            "model_name": "org/model", "requests_per_second": {"profile": "constant", "value": 0},
            "engine": MODEL.model_dump()}}],
    }).workloads[0].serving
    assert serving is not None
    ep = ServingEndpoint("t", "svc", serving)
    ep.engine.set_pods(["svc-predictor-a"])
    ep.start()
    yield ep
    ep.stop()


def _events(response: httpx.Response) -> list[dict[str, object] | str]:
    out: list[dict[str, object] | str] = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line.removeprefix("data: ")
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_streamed_completion_and_chat(endpoint: ServingEndpoint) -> None:
    body = {"model": "org/model", "prompt": "one two three", "max_tokens": 4, "stream": True,
            "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{endpoint.url}/completions", json=body, timeout=10) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream"
        events = _events(r)
    assert events[-1] == "[DONE]"
    chunks = [e for e in events[:-1] if isinstance(e, dict)]
    texts = [c["choices"][0]["text"] for c in chunks if c["choices"]]  # type: ignore[index]
    assert "".join(texts) == "Hello from the embedded"
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"  # type: ignore[index]
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert all(c["object"] == "text_completion" for c in chunks)

    chat = {"model": "org/model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "stream": True}
    with httpx.stream("POST", f"{endpoint.url}/chat/completions", json=chat, timeout=10) as r:
        events = _events(r)
    deltas = [e["choices"][0]["delta"] for e in events if isinstance(e, dict)]  # type: ignore[index]
    assert deltas[0] == {"role": "assistant", "content": "Hello"} and deltas[-1] == {}
    assert {e["object"] for e in events if isinstance(e, dict)} == {"chat.completion.chunk"}


def test_plain_answers_errors_and_models(endpoint: ServingEndpoint) -> None:
    r = httpx.post(f"{endpoint.url}/chat/completions", timeout=10,
                   json={"model": "org/model", "messages": [{"role": "user", "content": "a b"}], "max_tokens": 3})
    answer = r.json()
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "Hello from the"}
    assert answer["usage"]["prompt_tokens"] == 2
    missing = httpx.post(f"{endpoint.url}/completions", json={"model": "other", "prompt": "x"}, timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "The model `other` does not exist."
    bad = httpx.post(f"{endpoint.url}/completions", json={"model": "org/model", "prompt": "x", "max_tokens": 0})
    assert bad.status_code == 400 and "max_tokens" in bad.json()["error"]["message"]
    assert httpx.get(f"{endpoint.url}/models").json()["data"][0]["id"] == "org/model"


def test_queue_limit_gives_503_and_metrics_count_what_ran(endpoint: ServingEndpoint, shared_dir: Path) -> None:
    # 2 slots + 1 waiting place: of 4 requests sent together one is refused (each runs >= 0.4 s)
    results: list[int] = []
    lock = threading.Lock()

    def send() -> None:
        r = httpx.post(f"{endpoint.url}/completions", json={"model": "org/model", "prompt": "x " * 10,
                                                            "max_tokens": 4}, timeout=30)
        with lock:
            results.append(r.status_code)

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
        time.sleep(0.02)  # in order, all well inside the first request's 0.55 s
    for t in threads:
        t.join()
    assert sorted(results) == [200, 200, 200, 503]
    text = httpx.get(endpoint.url.removesuffix("/v1") + "/metrics").text
    series = dict(re.findall(r"^(vllm:[^ ]+) ([0-9.e+]+)$", text, re.M))
    pod = 'engine="0",model_name="org/model",namespace="t",pod="svc-predictor-a"'
    assert series['vllm:request_success_total{' + pod.replace('model_name', 'finished_reason="length",model_name')
                  + '}'] == "3.0"
    assert series[f"vllm:e2e_request_latency_seconds_count{{{pod}}}"] == "3.0"
    assert series[f"vllm:time_to_first_token_seconds_count{{{pod}}}"] == "3.0"
    assert series[f"vllm:generation_tokens_total{{{pod}}}"] == "12.0"
    assert series[f"vllm:num_requests_running{{{pod}}}"] == "0.0"
    # bucket bounds and finish reasons as real vLLM exposes them
    capture = (shared_dir / "fixtures/telemetry/vllm/vllm-metrics.qwen2.5-0.5b-instruct.kops-conformance.prom").read_text()
    for name in ("vllm:time_to_first_token_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket"):
        real = re.findall(rf'^{name}{{[^}}]*le="([^"]+)"', capture, re.M)
        ours = re.findall(rf'^{name}{{[^}}]*le="([^"]+)"', text, re.M)
        assert ours == real
    assert set(re.findall(r'finished_reason="(\w+)"', text)) == set(re.findall(r'finished_reason="(\w+)"', capture))
