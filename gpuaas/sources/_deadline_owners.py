"""Where a Kueue Workload's deadline annotations, and a batch job's reclaim opt-out, come from: the job
that owns it.

Teams annotate what they submit (a batch Job, a RayJob, a JobSet, a Kubeflow training job, a
RayCluster), and Kueue creates the Workload from it without copying any annotation, so a deadline
on the job is only seen by looking the Workload's controller owner up. The snapshot (the deadline
plan) and the cost report both do it with ``owner_deadlines``: one precedence, the Workload's own
annotation first, key by key, so the two never disagree on a job's deadline.

The batch kinds (``models.JOB_OWNERS``) are listed for their annotations alone: they never join the owners
reclaim acts on (a Workload of a Job is stopped through its ``spec.active``). So the same list carries a
job's ``gpuaas.io/reclaim: "never"``, which its Workloads take (``owner_opt_out``): a team that opts its
Job out is heard, as one that opts its RayCluster out is. Each kind is one paginated list per cycle
whatever the fleet size; a kind whose CRD is not installed (404) is skipped without a word, since most
clusters run only some of these operators. A 403 is left to fail the read: the reader role lacks a rule,
and the source's failure line names it (``sources.failures``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from gpuaas.errors import NotFound
from gpuaas.models import OPT_OUT_ANNOTATION, OPT_OUT_VALUE, OwnerKind, is_opted_out
from gpuaas.sources._kube_deadlines import DEADLINE, EXPECTED_RUNTIME

if TYPE_CHECKING:
    from gpuaas.sources._kube_client import KubeLister

__all__ = ["DEADLINE_KEYS", "DeadlineTable", "OwnerKey", "deadline_annotations", "list_deadline_owners",
           "owner_deadlines", "owner_opt_out", "read_deadline_owners"]

DEADLINE_KEYS = (DEADLINE, EXPECTED_RUNTIME)
"""The annotations a Workload takes from its owner where it has none of its own; any other (a hold) is the
Workload's own, but for a batch job's opt-out (``owner_opt_out``)."""
_JOB_KEYS = (*DEADLINE_KEYS, OPT_OUT_ANNOTATION)


OwnerKey = tuple[str, str, str]
"""(namespace, kind, name) of an owning object."""
DeadlineTable = dict[OwnerKey, dict[str, str]]
"""Each owner that carries a deadline annotation -> those annotations (``DEADLINE_KEYS``; a batch job's
opt-out too)."""


def deadline_annotations(annotations: Mapping[str, Any] | None, keys: tuple[str, ...] = DEADLINE_KEYS
                         ) -> dict[str, str]:
    """The ``keys`` among ``annotations``, as text."""
    return {key: str(annotations[key]) for key in keys if annotations and key in annotations}


def list_deadline_owners(lister: KubeLister, kind: OwnerKind) -> DeadlineTable | None:
    """One paginated list of ``kind``'s metadata alone (``PartialObjectMetadataList``: a Job's pod template and
    status are most of its bytes, and only annotations are read): the deadline and opt-out annotations of each
    object that has any, taken page by page; None when the cluster does not serve the kind (404: its CRD is not
    installed)."""
    def annotated(objs: list[dict[str, Any]]) -> Iterator[tuple[OwnerKey, dict[str, str]]]:
        for obj in objs:
            meta = obj.get("metadata") or {}
            if found := deadline_annotations(meta.get("annotations"), _JOB_KEYS):
                yield (str(meta.get("namespace", "")), kind.kind, str(meta.get("name", ""))), found

    try:
        return dict(lister.custom_objects(kind.group, kind.version, kind.plural, annotated, metadata_only=True))
    except NotFound:
        return None


def read_deadline_owners(lister: KubeLister, kinds: Iterable[OwnerKind]) -> DeadlineTable:
    """``list_deadline_owners`` of each kind, one after the other, in one table."""
    table: DeadlineTable = {}
    for kind in kinds:
        table.update(list_deadline_owners(lister, kind) or {})
    return table


def owner_deadlines(own: Mapping[str, str], owner: OwnerKey | None, table: Mapping[OwnerKey, Mapping[str, str]]
                    ) -> dict[str, str]:
    """The deadline annotations that hold for a Workload: each of ``DEADLINE_KEYS`` from the Workload's own
    annotations (``own``) where it has it, else from its owner's (``table[owner]``).

    Key by key, so a Workload annotated with a new deadline keeps its job's run time."""
    inherited = table.get(owner, {}) if owner is not None else {}
    out = {}
    for key in DEADLINE_KEYS:
        value = own.get(key, inherited.get(key))
        if value is not None:
            out[key] = str(value)
    return out


def owner_opt_out(own: Mapping[str, str], owner: OwnerKey | None, table: Mapping[OwnerKey, Mapping[str, str]]
                  ) -> dict[str, str]:
    """``{OPT_OUT_ANNOTATION: "never"}`` when the owner opts out and the Workload (``own``) does not already,
    else nothing: an opt-out on either object wins, whatever the other says."""
    inherited = table.get(owner, {}) if owner is not None else {}
    if is_opted_out(inherited.get(OPT_OUT_ANNOTATION)) and not is_opted_out(own.get(OPT_OUT_ANNOTATION)):
        return {OPT_OUT_ANNOTATION: OPT_OUT_VALUE}
    return {}
