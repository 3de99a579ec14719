"""A seeded synthetic prompt corpus: every request its own prompt, of a length drawn from a distribution. Pure.

Why distinct prompts: one prompt repeated lets a server's prefix cache skip the prefill of every
request after the first, and the sweep then measures the cache, not the capacity. Each prompt here
starts with words drawn afresh for that request (no two requests share a prefix beyond chance),
and the seed is ``(seed, step, index)``, so a run is repeatable and two steps never share prompts.

Lengths: input and output lengths are drawn uniformly within ``mean x (1 +- spread)`` (at least
one token); ``spread`` 0 gives every request the mean. One word is one token for the embedded
engine; for a real tokenizer a word is about 1.3 tokens, so the lengths are nominal there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PromptSpec", "request_specs"]

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "qu", "do", "fe", "gi", "ho", "ju")
_VOCABULARY = tuple(a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES[:8])
"""2,048 pseudo-words: enough that two random 16-word prefixes never collide in practice."""


@dataclass(frozen=True)
class PromptSpec:
    prompt: str
    prompt_tokens: int
    max_tokens: int


def _length(rng: np.random.Generator, mean: int, spread: float) -> int:
    if spread <= 0:
        return mean
    return max(1, int(round(rng.uniform(mean * (1 - spread), mean * (1 + spread)))))


def request_specs(count: int, *, prompt_tokens: int, output_tokens: int, prompt_spread: float = 0.0,
                  output_spread: float = 0.0, seed: int = 0, step: int = 0) -> list[PromptSpec]:
    """``count`` distinct prompts with their lengths, repeatable for the same ``(seed, step)``."""
    out = []
    for index in range(count):
        rng = np.random.default_rng([seed, step, index])
        n = _length(rng, prompt_tokens, prompt_spread)
        words = rng.integers(0, len(_VOCABULARY), size=n)
        out.append(PromptSpec(" ".join(_VOCABULARY[w] for w in words), n, _length(rng, output_tokens, output_spread)))
    return out
