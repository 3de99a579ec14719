"""The serving engine's latency model: what the embedded OpenAI endpoint does, as formulas.

Each replica (pod) of an InferenceService runs at most ``max_num_seqs`` sequences at once
(vLLM's ``--max-num-seqs``). With ``P`` prompt tokens and ``M`` output tokens (``max_tokens``;
the engine ignores EOS, so the finish reason is ``length``):

* **admission** — a request goes to the next replica in turn (round robin, as a Service
  spreads connections). It runs at once if the replica has a free sequence slot; otherwise it
  waits in the replica's FIFO queue; if ``max_num_waiting`` requests already wait there it is
  refused with **503**.
* **prefill** — ``P * prefill_seconds_per_token``; it produces the first token, so
  ``TTFT = queue wait + P * prefill_seconds_per_token``.
* **decode** — each of the other ``M - 1`` tokens takes
  ``d(n) = decode_seconds_per_token * (1 + decode_slowdown_per_seq * (n - 1))``, where ``n``
  is the number of sequences running on that replica when the token starts (the batch makes
  every token slower). ``e2e = TTFT + sum of d(n)``.

What a reader can compute from that (per replica; multiply by the replicas):

* unloaded latency ``L1 = P*p + (M-1)*d0``;
* service time at a full batch ``S = P*p + (M-1)*d0*(1 + s*(B-1))``;
* the **saturation rate** ``B / S``: above it the queue grows without bound (until 503s);
* below it, Little's law with the mean batch ``n = rate * e2e`` gives the mean-field latency
  ``e2e = (P*p + (M-1)*d0*(1-s)) / (1 - (M-1)*d0*s*rate)``, so an SLO on latency holds up to
  ``rate = (1 - (P*p + (M-1)*d0*(1-s)) / slo) / ((M-1)*d0*s)``.

``model_capacity_rps`` is the smaller of the two. It ignores Poisson fluctuation (quantiles
sit above the mean near the knee); ``simulate`` replays the exact same rules on a given
arrival schedule, event by event, for a reader who wants the quantiles too.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EngineModel", "SimulatedRequest", "model_capacity_rps", "simulate"]


class EngineModel(BaseModel):
    """Latency model of one serving replica (see the module docstring for the formulas)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_num_seqs: Annotated[int, Field(gt=0)] = 16
    """Sequences one replica runs at once (vLLM ``--max-num-seqs``)."""
    max_num_waiting: Annotated[int, Field(ge=0)] = 32
    """Requests that may wait for a slot on one replica; one more gets 503."""
    prefill_seconds_per_token: Annotated[float, Field(ge=0)] = 0.0002
    decode_seconds_per_token: Annotated[float, Field(gt=0)] = 0.03
    """Time per output token with a batch of one."""
    decode_slowdown_per_seq: Annotated[float, Field(ge=0)] = 0.01
    """Relative slowdown of each token per additional running sequence."""
    default_max_tokens: Annotated[int, Field(gt=0)] = 16
    """Output tokens when a request does not say ``max_tokens``."""

    def decode_seconds(self, running: int) -> float:
        return self.decode_seconds_per_token * (1.0 + self.decode_slowdown_per_seq * (max(running, 1) - 1))

    def prefill_seconds(self, prompt_tokens: int) -> float:
        return prompt_tokens * self.prefill_seconds_per_token

    def unloaded_latency(self, prompt_tokens: int, output_tokens: int) -> float:
        return self.prefill_seconds(prompt_tokens) + (output_tokens - 1) * self.decode_seconds(1)

    def saturation_rps(self, prompt_tokens: int, output_tokens: int) -> float:
        """Requests per second one replica completes with every slot busy."""
        full = self.prefill_seconds(prompt_tokens) + (output_tokens - 1) * self.decode_seconds(self.max_num_seqs)
        return math.inf if full <= 0 else self.max_num_seqs / full


def model_capacity_rps(model: EngineModel, prompt_tokens: int, output_tokens: int, slo_seconds: float,
                       replicas: int = 1) -> float:
    """Mean-field sustainable rate for an e2e-latency SLO: min(saturation, the SLO's rate) x replicas."""
    a = model.prefill_seconds(prompt_tokens)
    b = (output_tokens - 1) * model.decode_seconds_per_token
    s = model.decode_slowdown_per_seq
    base = a + b * (1 - s)  # e2e = base / (1 - b*s*rate), from e2e = a + b*(1 + s*(rate*e2e - 1))
    if model.unloaded_latency(prompt_tokens, output_tokens) > slo_seconds:
        return 0.0
    slo_rate = math.inf if b * s == 0 else (1 - base / slo_seconds) / (b * s)
    return min(model.saturation_rps(prompt_tokens, output_tokens), slo_rate) * replicas


@dataclass(frozen=True)
class SimulatedRequest:
    arrival: float
    status: int
    ttft: float | None
    e2e: float | None


def simulate(model: EngineModel, arrivals: Sequence[float], prompt_tokens: int, output_tokens: int,
             replicas: int = 1) -> list[SimulatedRequest]:
    """The endpoint's rules replayed on an arrival schedule (seconds), without sleeping."""
    # events: (time, order, kind, request index); kind 0 = a token (or prefill) ends, 1 = arrival
    events: list[tuple[float, int, int, int]] = [(t, i, 1, i) for i, t in enumerate(arrivals)]
    heapq.heapify(events)
    seq = len(arrivals)
    running = [0] * replicas
    waiting: list[deque[int]] = [deque() for _ in range(replicas)]
    replica_of = [0] * len(arrivals)
    tokens_left = [0] * len(arrivals)
    first: list[float | None] = [None] * len(arrivals)
    done: list[SimulatedRequest | None] = [None] * len(arrivals)
    turn = 0

    def start(i: int, now: float) -> None:
        nonlocal seq
        tokens_left[i] = output_tokens - 1
        seq += 1
        heapq.heappush(events, (now + model.prefill_seconds(prompt_tokens), seq, 0, i))

    while events:
        now, _, kind, i = heapq.heappop(events)
        if kind == 1:
            r = replica_of[i] = turn % replicas
            turn += 1
            if running[r] < model.max_num_seqs:
                running[r] += 1
                start(i, now)
            elif len(waiting[r]) < model.max_num_waiting:
                waiting[r].append(i)
            else:
                done[i] = SimulatedRequest(arrivals[i], 503, None, None)
            continue
        r = replica_of[i]
        if first[i] is None:
            first[i] = now
        if tokens_left[i] > 0:
            tokens_left[i] -= 1
            seq += 1
            heapq.heappush(events, (now + model.decode_seconds(running[r]), seq, 0, i))
            continue
        ttft = first[i]
        assert ttft is not None
        done[i] = SimulatedRequest(arrivals[i], 200, ttft - arrivals[i], now - arrivals[i])
        running[r] -= 1
        if waiting[r]:
            running[r] += 1
            start(waiting[r].popleft(), now)
    return [d for d in done if d is not None]
