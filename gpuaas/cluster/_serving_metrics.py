"""The vLLM series of one embedded OpenAI endpoint, as vLLM V1 names, labels and buckets them.

One registry per endpoint (``prometheus_client``, as vLLM itself uses), one label set per pod:
``engine``, ``model_name`` and the ``namespace``/``pod`` a scrape would add. Bucket bounds and
finish reasons are vLLM's (checked against the real capture in the shared fixtures).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gpuaas.cluster._telemetry_serving import E2E_BUCKETS, FINISHED_REASONS

__all__ = ["TTFT_BUCKETS", "ServingMetrics"]

TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0,
)
"""Bucket bounds of ``vllm:time_to_first_token_seconds`` as vLLM V1 exposes them."""

_LABELS = ("engine", "model_name", "namespace", "pod")


class ServingMetrics:
    """The vLLM series of one endpoint, one label set per pod."""

    def __init__(self, model_name: str, namespace: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.model_name = model_name
        self.namespace = namespace
        r = self.registry
        self.running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                             _LABELS, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                             _LABELS, registry=r)
        self.success = Counter("vllm:request_success", "Count of successfully processed requests.",
                               (*_LABELS, "finished_reason"), registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", _LABELS, registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.",
                                         _LABELS, registry=r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                             _LABELS, buckets=E2E_BUCKETS, registry=r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              _LABELS, buckets=TTFT_BUCKETS, registry=r)

    def labels(self, pod: str) -> dict[str, str]:
        return {"engine": "0", "model_name": self.model_name, "namespace": self.namespace, "pod": pod}

    def add_pod(self, pod: str) -> None:
        """Every series exists from the start (as vLLM's do), so ``rate()`` sees the first request."""
        lab = self.labels(pod)
        for metric in (self.running, self.waiting, self.prompt_tokens, self.generation_tokens, self.e2e, self.ttft):
            metric.labels(**lab)
        for reason in FINISHED_REASONS:
            self.success.labels(**lab, finished_reason=reason)
