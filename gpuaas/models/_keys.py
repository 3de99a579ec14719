"""Idempotency keys as the audit log stores them: bounded to its column, still one key per decision."""

from __future__ import annotations

import hashlib

__all__ = ["KEY_MAX_LENGTH", "bounded_key"]

KEY_MAX_LENGTH = 200
"""Characters of the audit log's ``idempotency_key`` column (``VARCHAR(200)``): PostgreSQL refuses a longer
value, and a key is built from names that may be longer (a Deployment's name alone may have 253)."""

_DIGEST_LENGTH = 64
"""Hex characters of the SHA-256 that stands for the tail of a key too long for the column."""


def bounded_key(key: str) -> str:
    """``key`` itself when it fits the column, else its head and ``#`` and the SHA-256 of the whole key.

    A cut alone would give two objects whose names differ past the cut (or the window stamp at a key's
    end) one key, and the second would be read as already decided; the digest of the whole key keeps
    them apart, and the head keeps the row readable (``reclaim/apply/Deployment/team-a/llm-…#3f…``).
    A key that fits is unchanged, so that what rows already hold is still found. Applying it twice
    gives the same key."""
    if len(key) <= KEY_MAX_LENGTH:
        return key
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return f"{key[:KEY_MAX_LENGTH - _DIGEST_LENGTH - 1]}#{digest}"
