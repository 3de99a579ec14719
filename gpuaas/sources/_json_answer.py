"""A source's answer decoded as JSON, or one ``UnreadableJSON``: the one decoder every source reads through.

A decoder fails in more ways than ``ValueError``: the standard ``json`` module recurses once per nested
array or object, so an answer of 100,000 ``[`` (a fuzzer's, a broken proxy's) raises ``RecursionError``,
which no source's ``except ValueError`` caught and which ended a command with Python's own words instead
of a degraded source. Here every failure is the one ``ValueError`` subclass, whose words say what the
answer was (``not JSON``, ``JSON nested too deeply to read``): each source wraps it in ``MalformedResponse``
as ``f"... answer is {exc}"``, with its own name and URL.

An answer that decodes can still be too deep to use: Python's ``str``, ``repr`` and ``==`` recurse too, so a
value 1,000 levels deep (orjson reads up to 1,024) ended a command when a reader quoted it in an error message.
What is deeper than ``MAX_DEPTH`` is refused here, in the same words, before any reader sees it.

orjson decodes first: several times faster on the tens of MB of a large fleet's answer, and it refuses
depth past 1,024 without recursing. What it refuses otherwise is asked of the standard module, which the
sources read with before (``requests``' and ``httpx``' ``.json()``, the Kubernetes writer): it also takes
UTF-16 and UTF-32, ``NaN`` and lone surrogate escapes, so no answer read before is refused now.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["MAX_DEPTH", "NESTED_TOO_DEEPLY", "UnreadableJSON", "read_json"]

NESTED_TOO_DEEPLY = "JSON nested too deeply to read"
"""What ``UnreadableJSON`` says of an answer nested past ``MAX_DEPTH`` (``failures`` words it for a person)."""

MAX_DEPTH = 254
"""The deepest nesting read: orjson's bound on what it encodes, which measures it at C speed (a few percent of
the decoding), and far below where Python recurses out (1,000 frames, less the caller's). Kubernetes objects,
the deepest answers a source reads, nest a few dozen levels."""


class UnreadableJSON(ValueError):
    """The answer is not JSON a decoder could read; ``str()`` says which: ``not JSON`` or ``NESTED_TOO_DEEPLY``.

    A ``ValueError``, as ``json.JSONDecodeError`` is, so that callers catching that keep catching it."""


def read_json(data: bytes | bytearray | memoryview | str) -> Any:
    """``data`` decoded; ``UnreadableJSON`` (never ``RecursionError`` nor another decoder's error) when it is
    not JSON or is nested deeper than ``MAX_DEPTH``."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc):  # past 1,024 levels: the standard module would recurse out of stack
            raise UnreadableJSON(NESTED_TOO_DEEPLY) from exc
        value = _standard_loads(data)
    if isinstance(value, (list, dict)):
        _within_depth(value)
    return value


def _standard_loads(data: bytes | bytearray | memoryview | str) -> Any:
    try:
        return json.loads(bytes(data) if isinstance(data, (bytearray, memoryview)) else data)
    except RecursionError as exc:  # where orjson's words for its depth limit changed: the same answer
        raise UnreadableJSON(NESTED_TOO_DEEPLY) from exc
    except (ValueError, TypeError) as exc:  # JSONDecodeError, UnicodeDecodeError; TypeError: not text at all
        raise UnreadableJSON("not JSON") from exc


def _within_depth(value: list[Any] | dict[str, Any]) -> None:
    """Raise ``UnreadableJSON`` where ``value`` nests deeper than ``MAX_DEPTH``: orjson refuses to encode it.

    A lone surrogate the standard module decoded is refused by orjson's encoder too, before it has measured the
    depth, and is no reason to refuse the answer: then the depth is measured here, without recursing."""
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        if "recursion" in str(exc).lower() or _deeper_than(value, MAX_DEPTH):
            raise UnreadableJSON(NESTED_TOO_DEEPLY) from exc


def _deeper_than(value: list[Any] | dict[str, Any], limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (list, dict)))
    return False
