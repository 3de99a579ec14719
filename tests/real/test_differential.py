"""The emulator against the real Kueue: every case of ``differential_cases`` run step by step on both
backends, and after each step the admitted Workloads (with their GPU flavor) and the evicted ones
must be equal. The real cases run concurrently, each in its own namespace, queues and cohort, so
the suite takes as long as its longest case; a case in ``KNOWN_DIFFERENCES`` is listed with its
reason in the fidelity table and not asserted. The fidelity table in ``docs/real-cluster.md`` is the
one ``python -m tests.real.fidelity`` prints.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gpuaas.cluster.real import KubeHTTP
from tests.real.differential import EmbeddedBackend, Observation, RealBackend, common_objects, run_case
from tests.real.differential_cases import CASES, KNOWN_DIFFERENCES, Case
from tests.real.fidelity import table

pytestmark = [pytest.mark.real]


def _prefix(case: Case) -> str:
    return f"d-{case.name}-"


@pytest.fixture(scope="module")
def real_runs(api: KubeHTTP) -> Iterator[dict[str, list[Observation] | BaseException]]:
    backend = RealBackend(api)
    for obj in common_objects():
        backend.create(obj)

    def one(case: Case) -> list[Observation] | BaseException:
        try:
            return run_case(backend, case, _prefix(case))
        except Exception as exc:  # noqa: BLE001 - reported by the case's own test
            return exc

    with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
        runs = dict(zip([c.name for c in CASES], pool.map(one, CASES)))
    yield runs
    # The cases share the session's cluster, where the pods of what Kueue admits run: deactivate
    # every case's Workloads so their RayClusters are suspended and their pods leave the nodes for the
    # tests that come after (no controller here deletes a namespace's objects).
    for case in CASES:
        ns = f"{_prefix(case)}ns".rstrip("-")
        for wl in api.list("Workload", ns):
            api.merge_patch("Workload", wl["metadata"]["name"], {"spec": {"active": False}}, ns)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_emulator_decides_as_kueue(case: Case, real_runs: dict[str, list[Observation] | BaseException]) -> None:
    real = real_runs[case.name]
    if isinstance(real, BaseException):
        raise real
    emulated = EmbeddedBackend()
    for obj in common_objects():
        emulated.create(obj)
    mine = run_case(emulated, case, _prefix(case))
    differences = [f"after step {i + 1} ({step.what}): Kueue {want}, emulator {got}"
                   for i, (step, want, got) in enumerate(zip(case.steps, real, mine)) if want != got]
    if case.name not in KNOWN_DIFFERENCES:  # a listed case is reported in the fidelity table, not asserted
        assert not differences, "; ".join(differences)


def test_the_fidelity_table_is_current() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "real-cluster.md").read_text()
    assert table() in doc, "docs/real-cluster.md is stale: paste `python -m tests.real.fidelity` into it"
