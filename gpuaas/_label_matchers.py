"""PromQL label matchers written in a setting (``job="nvidia-dcgm-exporter"``), parsed rather than pasted.

A selector setting narrows which series of a metric's name gpuaas reads (a shared cluster's tenants can write
series under the DCGM and vLLM names). Its text never reaches a query as it is: it is parsed into (label,
operator, value) here, and the query builders write each value back through their own quoting, so a setting
cannot end a selector and add PromQL of its own.
"""

from __future__ import annotations

import re

__all__ = ["LabelMatcher", "label_matchers"]

LabelMatcher = tuple[str, str, str]
"""One PromQL label matcher: label, operator (``=``, ``!=``, ``=~``, ``!~``), value (unquoted)."""
_MATCHER = re.compile(r"""\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"""
                      r"""("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)\s*(?:,\s*|$)""")
_ESCAPE = re.compile(r"\\(?:([abfnrtv\\'\"])|x([0-9a-fA-F]{2})|([0-7]{3})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))",
                     re.S)
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _unquote(literal: str) -> str:
    """A PromQL string literal's text: Go's escapes in ``"..."`` and ``'...'``, none in a raw ```...```."""
    if literal[0] == "`":
        return literal[1:-1]

    def one(found: re.Match[str]) -> str:
        simple, *codes, wrong = found.groups()
        if wrong is not None:
            raise ValueError(f"unknown escape sequence \\{wrong} in {literal}")
        if simple is not None:
            return _SIMPLE_ESCAPES.get(simple, simple)
        code = next(int(c, 16 if i != 1 else 8) for i, c in enumerate(codes) if c is not None)
        if code > 0x10FFFF:
            raise ValueError(f"escape sequence out of range in {literal}")
        return chr(code)

    return _ESCAPE.sub(one, literal[1:-1])


def label_matchers(text: str) -> tuple[LabelMatcher, ...]:
    """``job="dcgm", namespace=~"gpu-.*"`` (braces optional) as matchers; ``ValueError`` naming where it stops
    being one. Parsed, not pasted: the queries write each value back through their own quoting, so a setting
    cannot end a selector and add PromQL of its own."""
    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1].strip()
    found: list[LabelMatcher] = []
    pos = 0
    while pos < len(body):
        match = _MATCHER.match(body, pos)
        if match is None:
            where = f" at {body[pos:pos + 20]!r}" if pos else ""
            raise ValueError(f"{text!r} is not a list of PromQL label matchers: expected label=\"value\"{where} "
                             f"(comma-separated, with =, !=, =~ or !~, e.g. job=\"nvidia-dcgm-exporter\")")
        label, op, literal = match.groups()
        if label == "__name__":
            raise ValueError(f"{text!r}: __name__ is not matched here; the metric settings name the metrics")
        found.append((label, op, _unquote(literal)))
        pos = match.end()
    return tuple(found)
