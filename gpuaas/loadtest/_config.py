"""What a load test is asked to do, validated once; and the loopback rule.

Why a loopback rule: a load test drives an endpoint to its limit and past it. Against
production that is a deliberate act, so a URL whose host is not a loopback address is refused
unless ``allow_remote`` says so (``--allow-remote`` on the command line).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from gpuaas.errors import ActionRefused, ConfigError
from gpuaas.models import MAX_GPUS
from gpuaas.policies.cost import parse_quantile
from gpuaas.policies.cost.capacity import MIN_RPS
from gpuaas.settings import http_url_problem

__all__ = ["MAX_REQUEST_TOKENS", "LoadTestConfig", "base_url", "is_loopback", "parse_rates"]

HARD_MAX_REQUESTS_PER_STEP = 100_000

MAX_REQUEST_TOKENS = 1_048_576
"""The most prompt words or ``max_tokens`` one request may ask for: 2**20, the longest context a serving engine
takes (the one-million-token models). More is a typo, and each step builds its prompts before it sends them."""


def is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def base_url(url: str) -> str:
    """The server root: ``http://h:p`` from ``http://h:p``, ``…/`` or ``…/v1``."""
    root = url.rstrip("/")
    return root.removesuffix("/v1")


def parse_rates(text: str) -> tuple[float, ...]:
    """``"1,2,4,8"`` as increasing positive rates; a ConfigError names the bad item."""
    rates: list[float] = []
    for i, item in enumerate(p.strip() for p in text.split(",")):
        try:
            value = float(item)
        except ValueError:
            raise ConfigError(f"item {i + 1} is not a number: {item!r}", field="rates") from None
        if not value > 0 or value == float("inf"):
            raise ConfigError(f"item {i + 1} must be a positive rate, got {item!r}", field="rates")
        if value < MIN_RPS:  # the capacity policy refuses a sweep row of less, after the step was sent
            raise ConfigError(f"item {i + 1} must be at least one request a day ({MIN_RPS:.3g}), got {item!r}",
                              field="rates")
        rates.append(value)
    if not rates:
        raise ConfigError("at least one rate is required", field="rates")
    if sorted(set(rates)) != rates:
        raise ConfigError(f"rates must increase without repeats, got {text!r}", field="rates")
    return tuple(rates)


@dataclass(frozen=True)
class LoadTestConfig:
    """One sweep. Each step sends ``warmup_seconds`` then ``step_seconds`` of open-loop Poisson load at its
    rate and is judged on the steady part only (the requests scheduled after the warm-up), the way
    vLLM's benchmark_serving, guidellm and aiperf measure: a step must be long enough to reach a steady
    state (60 s by default) and is never cut short by the request cap (a rate that would need more
    requests than the cap is refused before anything is sent)."""

    url: str
    model: str
    rates: tuple[float, ...]
    slo_quantile: str
    slo_seconds: float
    prompt_tokens: int = 128
    """Mean input length (words) of the synthetic prompts."""
    output_tokens: int = 32
    """Mean ``max_tokens``; with ``ignore_eos`` the answers have this length."""
    max_requests_per_step: int = 50_000
    step_seconds: float = 60.0
    """The steady part of each step, the part it is judged on."""
    warmup_seconds: float = 10.0
    """Load sent before the steady part at the same rate, not judged: queues and batches fill first."""
    prompt_spread: float = 0.25
    """Input lengths are uniform within ``prompt_tokens x (1 +- spread)``."""
    output_spread: float = 0.0
    """Output lengths (``max_tokens``) are uniform within ``output_tokens x (1 +- spread)``."""
    ignore_eos: bool = True
    """Ask the server to ignore end-of-sequence so that outputs have the asked length (dropped when refused)."""
    request_timeout_seconds: float = 60.0
    """Per request; a step ends at most this long after its last scheduled send."""
    api: Literal["completions", "chat"] = "completions"
    min_quality: float = 0.99
    """Share of requests that must succeed and pass the quality check."""
    finish_reasons: tuple[str, ...] = ("stop", "length")
    expect_substring: str | None = None
    replicas: int = 1
    gpus: int = 1
    seed: int = 0
    max_lateness_seconds: float = 0.05
    """p99 of how late requests left against their schedule above which the client could not keep up."""
    failing_steps_to_stop: int = 2
    allow_remote: bool = False
    service: str | None = None
    """``namespace/name`` of the service behind the URL, for the store and the cost report."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "slo_quantile", parse_quantile(self.slo_quantile))
        checks = [
            ("slo_seconds", self.slo_seconds > 0, "must be > 0"),
            # the capacity policy's own bound, which judges every step: refused now, not after the first step's load
            ("slo_seconds", self.slo_seconds <= 86_400, "must be at most a day (86400)"),
            ("prompt_tokens", self.prompt_tokens >= 1, "must be >= 1"),
            ("prompt_tokens", self.prompt_tokens <= MAX_REQUEST_TOKENS, f"must be at most {MAX_REQUEST_TOKENS:,}"),
            ("output_tokens", self.output_tokens >= 1, "must be >= 1"),
            ("output_tokens", self.output_tokens <= MAX_REQUEST_TOKENS, f"must be at most {MAX_REQUEST_TOKENS:,}"),
            ("max_requests_per_step", 1 <= self.max_requests_per_step <= HARD_MAX_REQUESTS_PER_STEP,
             f"must be within 1..{HARD_MAX_REQUESTS_PER_STEP}"),
            ("step_seconds", 0 < self.step_seconds <= 3600, "must be within (0, 3600]"),
            ("warmup_seconds", 0 <= self.warmup_seconds <= 3600, "must be within [0, 3600]"),
            ("prompt_spread", 0 <= self.prompt_spread < 1, "must be within [0, 1)"),
            ("output_spread", 0 <= self.output_spread < 1, "must be within [0, 1)"),
            ("request_timeout_seconds", 0 < self.request_timeout_seconds <= 3600, "must be within (0, 3600]"),
            ("min_quality", 0 <= self.min_quality <= 1, "must be within 0..1"),
            ("replicas", self.replicas >= 1, "must be >= 1"),
            ("replicas", self.replicas <= MAX_GPUS, f"must be at most {MAX_GPUS:,}"),
            ("gpus", self.gpus >= 1, "must be >= 1"),
            ("gpus", self.gpus <= MAX_GPUS, f"must be at most {MAX_GPUS:,}"),
            ("max_lateness_seconds", 0 < self.max_lateness_seconds <= 3600, "must be within (0, 3600]"),
            ("failing_steps_to_stop", self.failing_steps_to_stop >= 1, "must be >= 1"),
            ("api", self.api in ("completions", "chat"), "must be completions or chat"),
        ]
        for name, ok, message in checks:
            if not ok:
                raise ConfigError(f"{message}, got {getattr(self, name)!r}", field=name)
        if not self.rates or sorted(set(self.rates)) != list(self.rates) or min(self.rates) < MIN_RPS:
            raise ConfigError(f"must be increasing rates of at least one request a day ({MIN_RPS:.3g}), got "
                              f"{self.rates!r}", field="rates")
        needed = max(self.rates) * self.sent_seconds
        if needed > self.max_requests_per_step + 0.5:
            raise ConfigError(
                f"{max(self.rates):g} rps x {self.sent_seconds:g} s (warm-up + step) is {needed:,.0f} requests, over "
                f"the cap of {self.max_requests_per_step:,}; a step is never cut short (it would not reach a steady "
                "state): lower the top rate or raise the cap", field="max_requests_per_step")
        if (problem := http_url_problem(self.url)) is not None:
            raise ConfigError(problem, field="url")
        if self.service is not None and self.service.count("/") != 1:
            raise ConfigError(f"must be namespace/name, got {self.service!r}", field="service")

    def check_target(self) -> None:
        """Refuse a non-loopback URL unless ``allow_remote`` (a load test against production is deliberate)."""
        if not self.allow_remote and not is_loopback(self.url):
            raise ActionRefused(f"load test refused: {self.url} is not a loopback address; a load test against a "
                                "shared endpoint must be deliberate (pass --allow-remote)")

    @property
    def endpoint_url(self) -> str:
        path = "/v1/chat/completions" if self.api == "chat" else "/v1/completions"
        return base_url(self.url) + path

    @property
    def sent_seconds(self) -> float:
        """How long each step sends: the warm-up, then the steady part."""
        return self.warmup_seconds + self.step_seconds

    @property
    def max_step_seconds(self) -> float:
        """The hard bound of one step: the schedule, then the longest a request may still take."""
        return self.sent_seconds + self.request_timeout_seconds
