"""Kueue's own order played on the plan's estimates (``kueue_order_ends``): BestEffortFIFO on one pool.

A head that does not fit lets smaller Workloads pass; a job waiting behind one of unknown end never ends; at no
instant do the admitted jobs hold more than the pool's GPUs, each starting now or when another ends; and in a
cohort of several ClusterQueues every job starts when Kueue's scheduling cycles, played literally, admit it.
"""

from __future__ import annotations

import math

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas.policies.deadlines import DeadlineJob
from gpuaas.policies.deadlines.kueue_order import (
    ClusterQueues,
    Preemption,
    kueue_order_ends,
    kueue_order_on_time,
    may_preempt,
    on_time_count,
    queue_keys,
)

MIN = 60.0


def test_a_head_that_does_not_fit_lets_a_smaller_one_pass_and_takes_the_gpus_when_they_free_up() -> None:
    running = DeadlineJob("r", 2, 60 * MIN, None, running_for=10 * MIN)  # 50 min left
    wide = DeadlineJob("wide", 4, 60 * MIN, 200 * MIN)
    small = DeadlineJob("small", 2, 30 * MIN, 20 * MIN)
    ends = kueue_order_ends([running, wide, small], 4, ["wide", "small"])
    assert ends == {"r": 50 * MIN, "small": 30 * MIN, "wide": 110 * MIN}
    assert on_time_count([running, wide, small], ends) == 1  # wide on time; small (due at 20 min) late
    assert kueue_order_ends([running, small, wide], 4, ["small", "wide"]) == ends  # the same here, in either order


def test_what_waits_behind_a_job_of_unknown_end_never_ends() -> None:
    blind = DeadlineJob("blind", 3, math.inf, None, running_for=MIN)
    ends = kueue_order_ends([blind, DeadlineJob("a", 1, MIN, 5 * MIN), DeadlineJob("b", 2, MIN, 5 * MIN)], 4, ["a", "b"])
    assert ends == {"blind": math.inf, "a": MIN}


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.lists(st.tuples(st.integers(1, 6), st.integers(1, 12), st.booleans()), min_size=1,
                                   max_size=8))
def test_the_admitted_never_exceed_the_pool_and_each_starts_now_or_at_an_end(
        capacity: int, raw: list[tuple[int, int, bool]]) -> None:
    jobs, held = [], 0
    for i, (gpus, minutes, running) in enumerate(raw):
        gpus = min(gpus, capacity)
        if running and held + gpus <= capacity:
            held += gpus
            jobs.append(DeadlineJob(f"j{i}", gpus, minutes * 10 * MIN, None, running_for=MIN))
        else:
            jobs.append(DeadlineJob(f"j{i}", gpus, minutes * 10 * MIN, None))
    ends = kueue_order_ends(jobs, capacity, [j.name for j in jobs])
    pending = [j for j in jobs if j.running_for is None]
    assert set(ends) == {j.name for j in jobs}  # nothing of unknown end here: everything runs
    starts = {j.name: ends[j.name] - j.duration for j in pending}
    instants = {0.0, *ends.values()}
    assert all(start in instants for start in starts.values())
    for t in instants:
        busy = sum(j.gpus for j in jobs if j.running_for is not None and ends[j.name] > t)
        busy += sum(j.gpus for j in pending if starts[j.name] <= t < ends[j.name])
        assert busy <= capacity


def test_in_a_cohort_a_head_within_its_own_quota_goes_before_an_older_one_that_would_borrow() -> None:
    # Two ClusterQueues of 2 GPUs each; b runs 3 (one borrowed from a), one GPU is free, another frees in 10 min.
    queues = ClusterQueues({"b-run": "b", "b-short": "b", "b-old": "b", "a-new": "a"}, {"a": 2, "b": 2})
    jobs = [DeadlineJob("b-run", 2, 60 * MIN, None, running_for=0.0),
            DeadlineJob("b-short", 1, 10 * MIN, None, running_for=0.0),
            DeadlineJob("b-old", 1, 30 * MIN, 35 * MIN), DeadlineJob("a-new", 1, 30 * MIN, 35 * MIN)]
    ends = kueue_order_ends(jobs, 4, ["b-old", "a-new"], queues)
    assert (ends["a-new"], ends["b-old"]) == (30 * MIN, 40 * MIN)  # a is within its quota, b would borrow: a first
    one_queue = kueue_order_ends(jobs, 4, ["b-old", "a-new"])
    assert (one_queue["b-old"], one_queue["a-new"]) == (30 * MIN, 40 * MIN)  # one queue: the older first


def test_kueues_order_is_priority_then_queue_time_then_uid() -> None:
    t0 = pd.Timestamp("2026-03-10T12:00:00Z")
    rows = [("evicted", 0, t0, t0 + pd.Timedelta(minutes=30), "a"),  # a PodsReady timeout queued it anew
            ("newer", 0, t0 + pd.Timedelta(minutes=10), t0 + pd.Timedelta(minutes=10), "b"),
            ("tie-z", 0, t0 + pd.Timedelta(minutes=20), t0 + pd.Timedelta(minutes=20), "0"),  # the same second:
            ("tie-a", 0, t0 + pd.Timedelta(minutes=20), t0 + pd.Timedelta(minutes=20), "f"),  # the smaller uid first
            ("unread", 0, t0 + pd.Timedelta(minutes=5), pd.NaT, "c"),  # no queue time read: its creation
            ("urgent", 5, t0 + pd.Timedelta(hours=1), t0 + pd.Timedelta(hours=1), "d")]
    frame = pd.DataFrame(rows, columns=["name", "priority", "created_at", "queued_at", "uid"]).assign(namespace="ns")
    keys = queue_keys(frame, {})
    assert sorted(keys, key=keys.__getitem__) == ["ns/urgent", "ns/unread", "ns/newer", "ns/tie-z", "ns/tie-a",
                                                  "ns/evicted"]
    assert queue_keys(frame, {"ns/urgent": 0})["ns/urgent"][0] == 0.0  # a demoted one at its recorded priority
    # One GPU: of the two created in the same second, the one Kueue takes first (uid "0") meets its deadline.
    jobs = [DeadlineJob("ns/tie-a", 1, 30 * MIN, 30 * MIN), DeadlineJob("ns/tie-z", 1, 30 * MIN, 60 * MIN)]
    assert kueue_order_on_time(jobs, 1, keys) == 1
    assert kueue_order_on_time(jobs, 1, keys | {"ns/tie-a": (0.0, keys["ns/tie-a"][1], "/")}) == 2


def test_a_queue_whose_head_does_not_fit_puts_forward_nothing_else_in_that_cycle() -> None:
    """Queues a and b of 2 GPUs each. When a's job ends, a's head (4 GPUs) does not fit and b's does: b's head is
    admitted, though a's next job (2 GPUs, within a's quota) would go before a borrower (Kueue v0.17; the
    real-cluster differential case ``head-no-fit``)."""
    queues = ClusterQueues({"a-run": "a", "b-run": "b", "a1": "a", "a2": "a", "b1": "b"}, {"a": 2, "b": 2})
    jobs = [DeadlineJob("a-run", 2, 10 * MIN, None, running_for=0.0), DeadlineJob("b-run", 2, 60 * MIN, None, running_for=0.0),
            DeadlineJob("a1", 4, 30 * MIN, None), DeadlineJob("a2", 2, 30 * MIN, None),
            DeadlineJob("b1", 2, 30 * MIN, 40 * MIN)]
    ends = kueue_order_ends(jobs, 4, ["a1", "a2", "b1"], queues)
    assert (ends["b1"], ends["a2"], ends["a1"]) == (40 * MIN, 70 * MIN, 100 * MIN)
    assert on_time_count(jobs, ends) == 1


def test_a_job_whose_backoff_ends_joins_its_queue_untried_while_the_set_aside_stay_aside() -> None:
    """Queues a and b of 1 GPU each; b's running job holds b's GPU for an hour. a's wide head is set aside at once.
    At 5 min the backoffs of a2 (queue a) and b2 (queue b) end: both are their queues' heads in the next cycle,
    and a2, within a's nominal quota, goes before b2, which would borrow. Were a's wide head tried again when the
    backoffs end (GPUs did not free up), a would lose that cycle to b and b2 would take the GPU."""
    queues = ClusterQueues({"b-run": "b", "a1": "a", "a2": "a", "b2": "b"}, {"a": 1, "b": 1})
    jobs = [DeadlineJob("b-run", 1, 60 * MIN, None, running_for=0.0), DeadlineJob("a1", 2, 30 * MIN, None),
            DeadlineJob("a2", 1, 30 * MIN, 40 * MIN, earliest_start=5 * MIN),
            DeadlineJob("b2", 1, 30 * MIN, None, earliest_start=5 * MIN)]
    ends = kueue_order_ends(jobs, 2, ["a1", "a2", "b2"], queues)
    assert (ends["a2"], ends["b2"], ends["a1"]) == (35 * MIN, 65 * MIN, 95 * MIN)
    assert on_time_count(jobs, ends) == 1
    assert kueue_order_ends([*jobs[:2], DeadlineJob("a2", 1, 30 * MIN, 40 * MIN), jobs[3]], 2, ["a1", "a2", "b2"],
                            queues)["a2"] == 30 * MIN  # without its backoff it starts at once


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=3),
       st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(1, 8), st.integers(0, 1), st.booleans(),
                          st.sampled_from([0, 0, 5, 10, 25, 50, 60, 180])), min_size=1, max_size=12))
def test_a_cohort_plays_as_kueues_scheduling_cycles_admit(
        nominal: list[int], raw: list[tuple[int, int, int, int, bool, int]]) -> None:
    """Each job starts when Kueue's classical scheduler, played cycle by cycle (``_kueue_cycles``), admits it; a job
    in its requeue backoff joins its queue when the backoff ends (also between two ends, and at one)."""
    capacity = sum(nominal)
    if capacity == 0:
        return
    names = [f"q{i}" for i in range(len(nominal))]
    jobs, queue_of, priority, held = [], {}, {}, 0
    for i, (q, gpus, tens, prio, running, backoff) in enumerate(raw):
        cq, gpus, name = names[q % len(names)], min(gpus, capacity), f"j{i:02d}"
        queue_of[name], priority[name] = cq, prio
        if running and held + gpus <= capacity:
            held += gpus
            jobs.append(DeadlineJob(name, gpus, tens * 10 * MIN, None, running_for=0.0))
        else:
            jobs.append(DeadlineJob(name, gpus, tens * 10 * MIN, None, earliest_start=backoff * MIN))
    order = sorted((j.name for j in jobs if j.running_for is None), key=lambda n: (-priority[n], n))
    quota = dict(zip(names, nominal, strict=True))
    assert kueue_order_ends(jobs, capacity, order, ClusterQueues(queue_of, quota)) == _kueue_cycles(
        jobs, quota, queue_of, order)


def test_a_job_joining_after_its_queue_skipped_past_set_aside_heads_is_admitted_as_the_literal_cycles_admit() -> None:
    """A regression found on random cases: queue q0's heads wider than the free GPUs are set aside one per cycle
    while q1 admits, and jobs whose backoffs end at 50 and 60 min join q0 behind and ahead of its cursor."""
    raw = [("j00", "q0", 3, 10, 50), ("j01", "q0", 2, 60, 180), ("j02", "q0", 3, 60, 60), ("j03", "q1", 1, 80, 0),
           ("j04", "q0", 1, 60, 60)]
    jobs = [DeadlineJob(name, gpus, minutes * MIN, None, earliest_start=backoff * MIN)
            for name, _, gpus, minutes, backoff in raw]
    queue_of, quota = {name: cq for name, cq, *_ in raw}, {"q0": 2, "q1": 1}
    order = ["j00", "j02", "j03", "j04", "j01"]
    ends = kueue_order_ends(jobs, 3, order, ClusterQueues(queue_of, quota))
    assert ends == _kueue_cycles(jobs, quota, queue_of, order) == {
        "j03": 80 * MIN, "j04": 120 * MIN, "j00": 130 * MIN, "j02": 190 * MIN, "j01": 250 * MIN}


def _kueue_cycles(jobs: list[DeadlineJob], nominal: dict[str, int], queue_of: dict[str, str],
                  order: list[str]) -> dict[str, float]:
    """Kueue v0.17's classical scheduler, literally, in simulated time. Each ClusterQueue keeps a heap in queue
    order and a list of jobs set aside; when GPUs free up, the set-aside jobs go back on the heaps. Each cycle
    takes every heap's top: a top that does not fit is set aside, the others are admitted within nominal quota
    first, then in queue order, while they fit (one that no longer fits goes back on top of its heap). A job in
    its requeue backoff goes on its heap when the backoff ends, and nothing else moves then."""
    place = {name: i for i, name in enumerate(order)}
    heaps: dict[str, list[DeadlineJob]] = {q: [] for q in nominal}
    aside: dict[str, list[DeadlineJob]] = {q: [] for q in nominal}
    used = dict.fromkeys(nominal, 0)
    free, now = sum(nominal.values()), 0.0
    ends: dict[str, float] = {}
    running: list[tuple[float, str, DeadlineJob]] = []
    later = sorted((job.earliest_start, place[job.name], job) for job in jobs if job.earliest_start)
    for job in jobs:
        if job.running_for is None and not job.earliest_start:
            aside[queue_of[job.name]].append(job)
        elif job.running_for is None:
            continue
        else:
            used[queue_of[job.name]] += job.gpus
            free -= job.gpus
            ends[job.name] = job.duration
            running.append((job.duration, job.name, job))
    freed = True
    while True:
        back = [job for at, _, job in later if at <= now]
        later = [w for w in later if w[0] > now]
        for q in nominal:
            again = [j for j in back if queue_of[j.name] == q] + (aside[q] if freed else [])
            heaps[q] = sorted(heaps[q] + again, key=lambda j: place[j.name])
            aside[q] = [] if freed else aside[q]
        while any(heaps.values()):
            fitting = []
            for q in nominal:
                if heaps[q]:
                    top = heaps[q].pop(0)
                    if top.gpus > free:
                        aside[q].append(top)
                    else:
                        fitting.append((q, top))
            fitting.sort(key=lambda e: (used[e[0]] + e[1].gpus > nominal[e[0]], place[e[1].name]))
            for q, job in fitting:
                if job.gpus > free:
                    heaps[q].insert(0, job)
                    continue
                used[q] += job.gpus
                free -= job.gpus
                ends[job.name] = now + job.duration
                running.append((now + job.duration, job.name, job))
        running.sort()
        end = running[0][0] if running else math.inf
        if later and later[0][0] < end:
            now, freed = later[0][0], False
            continue
        if (not any(aside.values()) and not later) or not running:
            return ends
        now, freed = end, True
        while running and running[0][0] == now:
            job = running.pop(0)[2]
            used[queue_of[job.name]] -= job.gpus
            free += job.gpus


def test_who_may_preempt_whom_follows_each_queues_rules() -> None:
    """Queue a runs ``low`` (priority 0) and ``peer`` (priority 5, queued after ``high``); queue b runs ``lent``
    (priority 9). ``high`` (priority 5) waits in a. Kueue v0.17's classical preemption, read conservatively:
    ``withinClusterQueue`` LowerPriority evicts only ``low``, LowerOrNewerEqualPriority also ``peer`` (same priority,
    queued later, not in the same second); ``reclaimWithinCohort`` Any evicts ``lent`` whatever its priority (whether
    b borrows then depends on admissions no plan can promise), LowerPriority not; the rules are the waiting one's
    queue's. A priority nobody read may be lower: counted as evictable."""
    jobs = [DeadlineJob("low", 1, 60 * MIN, None, running_for=0.0), DeadlineJob("peer", 1, 60 * MIN, None, running_for=0.0),
            DeadlineJob("lent", 3, 60 * MIN, None, running_for=0.0), DeadlineJob("high", 2, 30 * MIN, 90 * MIN)]
    keys = {"low": (0.0, 1.0, "a"), "peer": (-5.0, 3.0, "b"), "lent": (-9.0, 0.0, "c"), "high": (-5.0, 2.0, "d")}
    queue_of = {"low": "a", "peer": "a", "high": "a", "lent": "b"}

    def pairs(rules: dict[str, Preemption], known: dict[str, tuple[float, float, str]] = keys) -> list[tuple[str, str]]:
        return may_preempt(jobs, ClusterQueues(queue_of, {"a": 2, "b": 2}, rules), known)

    assert pairs({}) == [] and pairs({"a": Preemption()}) == []
    assert pairs({"a": Preemption(within_cluster_queue="LowerPriority")}) == [("high", "low")]
    assert pairs({"a": Preemption(within_cluster_queue="LowerOrNewerEqualPriority")}) == [("high", "low"),
                                                                                           ("high", "peer")]
    same_time = keys | {"peer": (-5.0, 2.0, "b")}  # queued in the same second: not newer
    assert pairs({"a": Preemption(within_cluster_queue="LowerOrNewerEqualPriority")}, same_time) == [("high", "low")]
    assert pairs({"a": Preemption(reclaim_within_cohort="Any")}) == [("high", "lent")]
    assert pairs({"a": Preemption(reclaim_within_cohort="LowerPriority")}) == []  # lent's priority is higher
    assert pairs({"b": Preemption(within_cluster_queue="LowerPriority", reclaim_within_cohort="Any")}) == []
    unread = {k: v for k, v in keys.items() if k != "low"}
    assert pairs({"a": Preemption(within_cluster_queue="LowerPriority")}, unread) == [("high", "low")]
    assert may_preempt(jobs, ClusterQueues(queue_of, {"a": 2, "b": 2}, {"a": Preemption(reclaim_within_cohort="Any",
                       within_cluster_queue="LowerOrNewerEqualPriority")}), keys, limit=2) == [("high", "low"),
                                                                                              ("high", "peer")]


def test_every_pending_workload_of_the_tree_may_preempt_any_job_of_the_pool() -> None:
    """Queue a: ``low`` (priority 0) has no known end; ``urgent`` (priority 0) and ``after`` (priority 0) are pending,
    whenever the plan starts them; ``best`` (best effort, priority 5) and ``back`` (in a requeue backoff, priority 5)
    are pending too, and so is ``elsewhere`` (priority 5), which the pool does not place (``waiting``). Each of the
    three may preempt every job of priority 0, whatever the plan's order."""
    jobs = [DeadlineJob("low", 1, math.inf, None, running_for=0.0), DeadlineJob("urgent", 1, 60 * MIN, 70 * MIN),
            DeadlineJob("after", 1, 60 * MIN, 300 * MIN), DeadlineJob("best", 1, 10 * MIN, None),
            DeadlineJob("back", 1, 10 * MIN, 400 * MIN, earliest_start=30 * MIN)]
    keys = {"low": (0.0, 0.0, "l"), "urgent": (0.0, 1.0, "u"), "after": (0.0, 3.0, "a"),
            "best": (-5.0, 4.0, "e"), "back": (-5.0, 5.0, "k"), "elsewhere": (-5.0, 6.0, "w")}
    queues = ClusterQueues(dict.fromkeys(keys, "a"), {"a": 3}, {"a": Preemption(within_cluster_queue="LowerPriority")},
                           waiting=(("elsewhere", "a"),))
    found = may_preempt(jobs, queues, keys)
    assert {a for a, _ in found} == {"best", "back", "elsewhere"}
    assert all({b for a, b in found if a == name} == {"low", "urgent", "after"} for name in ("best", "back", "elsewhere"))


RULES = st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any"])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.one_of(st.none(), st.tuples(st.integers(0, 2), st.integers(0, 3))),
                          st.booleans()), min_size=1, max_size=10),
       st.dictionaries(st.sampled_from("ab"), st.tuples(RULES, RULES)), st.integers(0, 2))
def test_the_pairs_are_every_pair_the_rules_allow_looked_for_only_where_some_is(
        raw: list[tuple[str, tuple[int, int] | None, bool]], rules: dict[str, tuple[str, str]], waiting: int) -> None:
    """Against a literal reading of each pair: the same queue's ``withinClusterQueue``, another's
    ``reclaimWithinCohort``; a lower priority, or (``LowerOrNewerEqualPriority``) the same queued later; ``Any``: all;
    an unknown priority or queue time: may."""
    jobs = [DeadlineJob(f"j{i}", 1, 60 * MIN, None, running_for=0.0 if running else None)
            for i, (_, _, running) in enumerate(raw)]
    queue_of = {f"j{i}": q for i, (q, _, _) in enumerate(raw)}
    keys = {f"j{i}": (-float(k[0]), float(k[1]), f"u{i}") for i, (_, k, _) in enumerate(raw) if k is not None}
    extra = tuple((f"w{i}", "ab"[i % 2]) for i in range(waiting))
    queues = ClusterQueues(queue_of, {}, {q: Preemption(*r) for q, r in rules.items()}, extra)

    def allows(policy: str, mine: tuple[float, float, str] | None, theirs: tuple[float, float, str] | None) -> bool:
        if policy == "Never":
            return False
        if policy == "Any" or mine is None or theirs is None:
            return True
        return -theirs[0] < -mine[0] or (policy == "LowerOrNewerEqualPriority" and theirs[0] == mine[0]
                                         and theirs[1] > mine[1])

    where = queue_of | dict(extra)
    expected = [(name, job.name) for name in [j.name for j in jobs if j.running_for is None] + [w for w, _ in extra]
                if where[name] in rules for job in jobs if job.name != name
                and allows(rules[where[name]][0 if where[job.name] == where[name] else 1], keys.get(name),
                           keys.get(job.name))]
    assert may_preempt(jobs, queues, keys) == expected
    assert may_preempt(jobs, queues, keys, limit=3) == expected[:3]
