"""The base of every policy model, shared by the policy's modules (``gpuaas.policy`` re-exports what users need)."""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from gpuaas._validation import FieldProblem

__all__ = ["SUBDOMAIN", "Fraction", "Namespace", "ObjectName", "_Model"]

Fraction = Annotated[float, Field(ge=0, le=1)]


def _leaf_types(annotation: Any) -> set[Any]:
    """Every type a field's annotation is made of (``list[Annotated[float, ...]] | None``: float, NoneType)."""
    if get_origin(annotation) is Annotated:
        return _leaf_types(get_args(annotation)[0])
    args = get_args(annotation)
    if not args:
        return {annotation}
    own = set() if get_origin(annotation) in (Union, types.UnionType) else {get_origin(annotation)}
    return own.union(*(_leaf_types(arg) for arg in args))


def _boolean_at(value: Any) -> tuple[int | str, ...] | None:
    """Where ``value`` holds a boolean: ``()`` when it is one, ``(1,)`` for the second item of a list, ``("h100",)``
    for a mapping's value; None when it holds none. Walked as far as it nests, without recursion, and each list or
    mapping once: YAML aliases share one object, and nine of nine of nine... are millions of items unshared."""
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(value, ())]
    seen: set[int] = set()
    while stack:
        item, at = stack.pop()
        if isinstance(item, bool):
            return at
        if isinstance(item, list | dict):
            if id(item) in seen:
                continue
            seen.add(id(item))
        if isinstance(item, list):
            stack.extend((child, (*at, i)) for i, child in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            stack.extend((child, (*at, str(key))) for key, child in reversed(list(item.items())))
    return None


class _Model(BaseModel):
    # No inf/NaN anywhere: ``.inf`` minutes or a NaN threshold would pass every bound check.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """A number or a name is never a YAML boolean: pydantic reads ``true`` as 1, so ``guaranteed_gpus: yes``
        would be one GPU and ``window_minutes: on`` one minute, where the file meant something else entirely;
        and a namespace ``no`` (YAML's false) was refused as "Input should be a valid string", though it
        looks like one. Where a field takes a boolean (``enabled``), it is left to pydantic."""
        at = None if info.field_name is None else _boolean_at(value)
        if at is None:
            return value
        leaves = _leaf_types(cls.model_fields[str(info.field_name)].annotation)
        if bool in leaves:
            return value
        if leaves & {int, float}:
            raise FieldProblem(at, f"expected a number, got a boolean ({_YAML_BOOLEANS})")
        if str in leaves:
            raise FieldProblem(at, f"expected text, got a boolean ({_YAML_BOOLEANS}: quote it)")
        return value


_YAML_BOOLEANS = "YAML reads yes, no, on, off, true and false as booleans"


_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


def kubernetes_name_problem(value: str, *, label: bool) -> str | None:
    """Why ``value`` is no Kubernetes namespace (``label``) or object name, else None: one the API server cannot
    hold is a typo that would match nothing."""
    pattern, what, spelling = ((_LABEL, "namespace", "lowercase letters, digits and '-', at most 63") if label
                               else (SUBDOMAIN, "object name", "lowercase letters, digits, '-' and '.', at most 253"))
    if pattern.fullmatch(value):
        return None
    return f"{value!r} is not a Kubernetes {what}: {spelling}, starting and ending with a letter or digit"


def _kubernetes_name(*, label: bool) -> AfterValidator:
    def check(value: str) -> str:
        if (problem := kubernetes_name_problem(value, label=label)) is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


Namespace = Annotated[str, _kubernetes_name(label=True)]
"""A Kubernetes namespace (an RFC 1123 label): one the API server cannot hold is a typo that would
match no workload, and a tenant or service would silently own nothing."""
ObjectName = Annotated[str, _kubernetes_name(label=False)]
"""A Kubernetes object name (an RFC 1123 subdomain), such as a ClusterQueue's."""
