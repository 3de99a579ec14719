"""A ClusterQueue's ``spec.namespaceSelector``: which namespaces Kueue admits its Workloads from.

Why gpuaas reads it: Kueue keeps a Workload from a namespace its ClusterQueue does not select pending for
ever ("Workload namespace doesn't match ClusterQueue selector"), yet counts it in the queue's pending figures
and metrics. Read as demand, it would pull quota toward a queue that can never use it, and a deadline of it
would be planned as if more GPUs could save it.

The semantics are Kueue's, ``metav1.LabelSelectorAsSelector``: no selector (``null``, or no field) selects
**no** namespace, an empty one (``{}``) every namespace, and otherwise every ``matchLabels`` pair and every
``matchExpressions`` requirement must hold (``In``, ``NotIn``, ``Exists``, ``DoesNotExist``; ``NotIn`` and
``DoesNotExist`` hold where the label is absent). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["EVERY_NAMESPACE", "LabelSelector", "Operator", "Requirement"]


class Operator(StrEnum):
    """A ``matchExpressions`` operator, as Kubernetes spells it."""

    In = "In"
    NotIn = "NotIn"
    Exists = "Exists"
    DoesNotExist = "DoesNotExist"


@dataclass(frozen=True)
class Requirement:
    """One ``matchExpressions`` entry (a ``matchLabels`` pair is ``In`` with one value)."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def holds(self, labels: Mapping[str, str]) -> bool:
        match self.operator:
            case Operator.In:
                return self.key in labels and labels[self.key] in self.values
            case Operator.NotIn:
                return self.key not in labels or labels[self.key] not in self.values
            case Operator.Exists:
                return self.key in labels
            case Operator.DoesNotExist:
                return self.key not in labels

    def words(self) -> str:
        match self.operator:
            case Operator.In if len(self.values) == 1:
                return f"{self.key}={self.values[0]}"
            case Operator.In | Operator.NotIn:
                return f"{self.key} {self.operator.value.lower()} ({', '.join(self.values)})"
            case Operator.Exists:
                return self.key
            case Operator.DoesNotExist:
                return f"!{self.key}"


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector; ``LabelSelector.parse(None)`` is Kueue's null selector, which selects nothing."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    """True for a null selector: Kueue's ``labels.Nothing()``."""

    @classmethod
    def parse(cls, obj: Any) -> LabelSelector:
        """The selector of a ``LabelSelector`` object. Raises ``ValueError`` naming the part that is not one."""
        if obj is None:
            return cls(nothing=True)
        if not isinstance(obj, dict):
            raise ValueError(f"namespaceSelector is not an object: {obj!r:.60}")
        labels = obj.get("matchLabels") or {}
        exprs = obj.get("matchExpressions") or []
        if not isinstance(labels, dict) or not isinstance(exprs, list):
            raise ValueError("namespaceSelector: matchLabels must be an object and matchExpressions a list")
        reqs = [Requirement(str(k), Operator.In, (str(v),)) for k, v in sorted(labels.items())]
        for expr in exprs:
            if not isinstance(expr, dict) or expr.get("operator") not in set(Operator):
                raise ValueError(f"namespaceSelector: not a label selector requirement: {expr!r:.80}")
            values = expr.get("values") or []
            if not isinstance(values, list):
                raise ValueError(f"namespaceSelector: values of {expr.get('key')!r} is not a list")
            reqs.append(Requirement(str(expr.get("key", "")), Operator(expr["operator"]), tuple(map(str, values))))
        return cls(tuple(reqs))

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a namespace with ``labels`` is selected."""
        return not self.nothing and all(r.holds(labels) for r in self.requirements)

    def words(self) -> str:
        """``kubernetes.io/metadata.name=team-a``; ``not set (no namespace)``; ``{} (every namespace)``."""
        if self.nothing:
            return "not set (Kueue then selects no namespace)"
        if not self.requirements:
            return "{} (every namespace)"
        return ", ".join(r.words() for r in self.requirements)


EVERY_NAMESPACE = LabelSelector()
"""``{}``: the selector of a ClusterQueue built without one in code (tests, the replays)."""
