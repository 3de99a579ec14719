"""A gpuaas annotation anyone may edit (a team owns its Workload) nested past the JSON decoder's depth is an
unreadable mark, as any other malformed one: never a ``RecursionError`` that ends the release sweep, a reclaim or
a plan."""

from __future__ import annotations

from gpuaas.actions._patches import RECLAIMED_ANNOTATION, reclaimed_by
from gpuaas.actions._quota_patches import QUOTA_ANNOTATION, marked_by
from gpuaas.policies.deadlines import parse_hold

DEEP = "[" * 100_000 + "]" * 100_000


def test_a_deeply_nested_mark_is_unreadable_not_a_crash() -> None:
    assert parse_hold(DEEP) == {}  # unreadable: released, never kept
    assert reclaimed_by({"metadata": {"annotations": {RECLAIMED_ANNOTATION: DEEP}}}) is None
    assert marked_by({"metadata": {"annotations": {QUOTA_ANNOTATION: DEEP}}}) is None
