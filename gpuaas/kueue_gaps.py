"""What gpuaas reads in Kueue but cannot act on, said where people look instead of left out without a word.

Set-ups beyond the textbook make capacity or work vanish from every figure gpuaas gives, or count as demand
what can never be admitted:

- **Accelerators other than ``nvidia.com/gpu``** (``ACCELERATOR_RESOURCES``: MIG slices under the mixed
  strategy, AMD, Intel, Gaudi, Neuron, TPU). gpuaas manages ``nvidia.com/gpu`` only, so a ClusterQueue of
  ``amd.com/gpu`` reads as 0 GPUs and its Workloads as 0 GPUs each: never judged, never moved, which is
  safe, but the team must be told its capacity is out of scope rather than absent.
- **A LocalQueue whose ClusterQueue does not exist** (a typo, a queue deleted): Kueue never admits what is
  queued to it, and no ClusterQueue's backlog row counts it, so its GPUs and deadlines fall out of the
  collect's backlog and the deadline plan.
- **A LocalQueue in a namespace its ClusterQueue's ``namespaceSelector`` does not select**, the selector being
  unset included (Kueue reads a null selector as no namespace): Kueue keeps its Workloads pending for ever, and
  still counts them in the ClusterQueue's pending figures and metrics. Read as backlog they would pull quota
  toward a queue that cannot use it; the rebalance ignores them and the deadline plan calls their deadlines
  missed. Where the Namespaces could not be listed, a selector that needs their labels is not checked, and
  that is said too.

All are found at the join (``with_gap_rows``: rows of the snapshot's ``data_quality`` frame, so that a stored
snapshot keeps them) and said in the same words everywhere (``gap_notes``): the collect's notes, the
preflight's warning, the deadline plan's note. Pure.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import StrEnum

import pandas as pd

from gpuaas.models import LabelSelector, WorkloadState
from gpuaas.phrases import counted, first_few
from gpuaas.snapshot_deadlines import DATA_QUALITY_COLUMNS
from gpuaas.sources.kube import DEFAULT_GPU_RESOURCES, KubeState, unmanaged_accelerators

__all__ = ["STRANDED", "UNSELECTED", "Gap", "gap_notes", "gap_rows", "missing_note", "missing_queues",
           "stranded_workloads", "unselected_queues", "with_gap_rows"]


class Gap(StrEnum):
    """The ``problem`` of a data-quality row this module adds: what keeps gpuaas from acting on the object."""

    unmanaged_accelerator = "asks for an accelerator gpuaas does not manage"
    missing_cluster_queue = "points at a ClusterQueue that does not exist"
    unselected_namespace = "is in a namespace its ClusterQueue's namespaceSelector does not select"
    no_namespace_selector = "points at a ClusterQueue without a namespaceSelector, which selects no namespace"
    namespaces_unread = "could not be listed: the ClusterQueues' namespaceSelectors are not checked"


UNSELECTED = (Gap.unselected_namespace, Gap.no_namespace_selector)
"""The gaps of a LocalQueue whose ClusterQueue exists but does not admit from its namespace."""
STRANDED = (Gap.missing_cluster_queue, *UNSELECTED)
"""The gaps of a LocalQueue whose Workloads Kueue never admits, whatever the quota."""


def gap_rows(kube: KubeState, gpu_resources: Collection[str] = DEFAULT_GPU_RESOURCES) -> pd.DataFrame:
    """One data-quality row per ClusterQueue with quota of, and per Workload asking for, an accelerator gpuaas does
    not manage (``value``: the resources), and per LocalQueue whose ClusterQueue does not exist (``value``: its name)."""
    rows: list[tuple[str, str, str, str, str, str]] = []
    for cq in kube.cluster_queues:
        if found := unmanaged_accelerators((q.resource for q in cq.quotas), gpu_resources):
            rows.append(("ClusterQueue", "", cq.name, "spec.resourceGroups", ", ".join(found),
                         Gap.unmanaged_accelerator.value))
    rows += [("Workload", r.namespace, r.name, "spec.podSets", ", ".join(r.resources), Gap.unmanaged_accelerator.value)
             for r in kube.unmanaged_requests]
    known = {cq.name: cq for cq in kube.cluster_queues}
    unread = False
    for lq in kube.local_queues:
        if not lq.cluster_queue:
            continue
        target = known.get(lq.cluster_queue)
        gap = (Gap.missing_cluster_queue if target is None
               else _selector_gap(target.namespace_selector, lq.namespace, kube))
        unread |= gap is Gap.namespaces_unread
        if gap is not None and gap is not Gap.namespaces_unread:
            rows.append(("LocalQueue", lq.namespace, lq.name, "spec.clusterQueue", lq.cluster_queue, gap.value))
    if unread:
        rows.append(("Namespace", "", "", "metadata.labels", "", Gap.namespaces_unread.value))
    return pd.DataFrame(rows, columns=DATA_QUALITY_COLUMNS)


def _selector_gap(selector: LabelSelector, namespace: str, kube: KubeState) -> Gap | None:
    """Why Kueue admits nothing from ``namespace`` through a ClusterQueue with ``selector``; None when it may."""
    if selector.nothing:
        return Gap.no_namespace_selector
    if not selector.requirements:
        return None
    if kube.namespace_labels is None:
        return Gap.namespaces_unread
    return None if selector.selects(kube.namespace_labels.get(namespace, {})) else Gap.unselected_namespace


def with_gap_rows(data_quality: pd.DataFrame, kube: KubeState,
                  gpu_resources: Collection[str] = DEFAULT_GPU_RESOURCES) -> pd.DataFrame:
    """``data_quality`` and ``gap_rows`` after it (unchanged where there are none)."""
    gaps = gap_rows(kube, gpu_resources)
    if gaps.empty:
        return data_quality
    return gaps if data_quality.empty else pd.concat([data_quality, gaps], ignore_index=True)


def _of(data_quality: pd.DataFrame, *gaps: Gap) -> pd.DataFrame:
    if data_quality.empty or "problem" not in data_quality:
        return pd.DataFrame(columns=DATA_QUALITY_COLUMNS)
    return data_quality[data_quality["problem"].isin([g.value for g in gaps])]


def missing_queues(data_quality: pd.DataFrame, *gaps: Gap) -> dict[tuple[str, str], str]:
    """(namespace, LocalQueue) -> the ClusterQueue it points at, which does not exist (or, given ``gaps``, the
    LocalQueues of those gaps: ``STRANDED`` for every one whose Workloads Kueue never admits)."""
    rows = _of(data_quality, *(gaps or (Gap.missing_cluster_queue,)))
    return {(str(ns), str(name)): str(cq) for ns, name, cq in zip(rows["namespace"], rows["name"], rows["value"],
                                                                   strict=True)}


def unselected_queues(data_quality: pd.DataFrame) -> dict[tuple[str, str], tuple[str, Gap]]:
    """(namespace, LocalQueue) -> its ClusterQueue and which ``UNSELECTED`` gap keeps Kueue from admitting from it:
    what the rebalance's demand and the deadline plan leave out, and say why."""
    return {lq: (cq, gap) for gap in UNSELECTED for lq, cq in missing_queues(data_quality, gap).items()}


def stranded_workloads(workloads: pd.DataFrame, namespace: str, local_queue: str) -> pd.DataFrame:
    """The pending Workloads queued to ``namespace/local_queue``: what waits on a LocalQueue Kueue never admits
    from."""
    if workloads.empty or "queue" not in workloads:
        return workloads.iloc[0:0]
    return workloads[(workloads["namespace"] == namespace) & (workloads["queue"] == local_queue)
                     & (workloads["state"] == WorkloadState.pending.value)]


def _unmanaged_note(rows: pd.DataFrame) -> str | None:
    if rows.empty:
        return None
    queues = sorted(str(n) for n in rows.loc[rows["kind"] == "ClusterQueue", "name"])
    workloads = int((rows["kind"] == "Workload").sum())
    resources = sorted({r for value in rows["value"] for r in str(value).split(", ") if r})
    who = [f"{counted(len(queues), 'ClusterQueue')} ({first_few(queues)})" if queues else "",
           counted(workloads, "Workload") if workloads else ""]
    subject = " and ".join(w for w in who if w)
    one = len(queues) + workloads == 1
    what = "an accelerator" if len(resources) == 1 else "accelerators"
    return (f"{subject} ask{'s' if one else ''} for {what} gpuaas does not manage ({', '.join(resources)}): "
            f"not judged, not moved (gpuaas manages {', '.join(DEFAULT_GPU_RESOURCES)} only)")


_WHY: dict[Gap, str] = {
    Gap.missing_cluster_queue: "which does not exist",
    Gap.unselected_namespace: "whose namespaceSelector does not select namespace {namespace}",
    Gap.no_namespace_selector: "which has no namespaceSelector, so Kueue admits Workloads from no namespace",
}


def missing_note(namespace: str, local_queue: str, cluster_queue: str, workloads: pd.DataFrame,
                 gap: Gap = Gap.missing_cluster_queue) -> str:
    """``team-e/ghost-queue points at ClusterQueue ghost-cq, which does not exist: 1 Workload (32 GPUs, 1 with a
    deadline) can never be admitted``: the LocalQueue, why Kueue never admits from it (``gap``, one of
    ``STRANDED``) and what waits on it."""
    waiting = stranded_workloads(workloads, namespace, local_queue)
    where = f"{namespace}/{local_queue} points at ClusterQueue {cluster_queue}, {_WHY[gap].format(namespace=namespace)}"
    if waiting.empty:
        return f"{where}: nothing queued to it can be admitted"
    dated = int(waiting["deadline_at"].notna().sum()) if "deadline_at" in waiting else 0
    about = [counted(float(waiting["gpus"].sum()), "GPU")] + ([f"{dated} with a deadline"] if dated else [])
    return f"{where}: {counted(len(waiting), 'Workload')} ({', '.join(about)}) can never be admitted"


def gap_notes(data_quality: pd.DataFrame, workloads: pd.DataFrame) -> list[str]:
    """The sentences every command says about the gaps of a snapshot (its ``data_quality`` and ``workloads``):
    ``2 ClusterQueues (amd-cq, mig-cq) and 2 Workloads ask for accelerators gpuaas does not manage (amd.com/gpu,
    nvidia.com/mig-1g.10gb): not judged, not moved (...)``; ``team-e/ghost-queue points at ClusterQueue ghost-cq,
    which does not exist: 1 Workload (32 GPUs, 1 with a deadline) can never be admitted``."""
    unmanaged = _unmanaged_note(_of(data_quality, Gap.unmanaged_accelerator))
    stranded = [missing_note(ns, lq, cq, workloads, gap) for gap in STRANDED
                for (ns, lq), cq in sorted(missing_queues(data_quality, gap).items())]
    unread = ([f"Namespaces {Gap.namespaces_unread.value} (grant the gpuaas role list on namespaces)"]
              if not _of(data_quality, Gap.namespaces_unread).empty else [])
    return ([unmanaged] if unmanaged else []) + stranded + unread
