"""Incident review: what the fleet looked like in a window, and what gpuaas decided and did in it."""

from gpuaas.policies.incident.review import *  # noqa: F403
from gpuaas.policies.incident.review import __all__ as _review_all

__all__ = [*_review_all]
