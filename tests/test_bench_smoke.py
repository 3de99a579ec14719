"""Every benchmark runs at its smallest size (``--smoke``), so that none rots between full runs.

A full ``make bench`` takes most of an hour and is run rarely, so an import error or a changed API
in a benchmark would otherwise surface first to whoever runs it next. Each benchmark runs here as
``make bench`` runs it (``python -m bench NAME --smoke``: the runner, its summary and its exit
status included), in its own process with a timeout. The benchmarks are started together by one
fixture, a few at a time: most of a smoke run is waiting for a server or a subprocess to start, and
the whole set has to add under a minute to the suite. For the same reason they use the session's
PostgreSQL (``GPUAAS_TEST_POSTGRES_URL``; each benchmark in schemas of its own) and its Prefect test
server (``PREFECT_API_URL``, which a smoke run uses instead of starting its own).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.__main__ import NAMES

ROOT = Path(__file__).resolve().parents[1]
AT_ONCE = 4
"""Benchmarks running at one time: enough to overlap their waits, few enough for two cores."""
TIMEOUT_S = 240


def _smoke(name: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench", name, "--smoke", "--timeout", str(TIMEOUT_S - 10)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


@pytest.fixture(scope="module")
def smoke_runs(postgres_url: str, prefect_harness: None, tmp_path_factory: pytest.TempPathFactory,
               ) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """Every benchmark's smoke run, all submitted at once; each test waits for its own."""
    from prefect.settings import PREFECT_API_URL

    base = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_"))}
    base.update({"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "GPUAAS_TEST_POSTGRES_URL": postgres_url,
                 "PREFECT_API_URL": str(PREFECT_API_URL.value())})
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        yield {name: pool.submit(_smoke, name, {**base, "PREFECT_HOME": str(tmp_path_factory.mktemp(f"prefect-{name}")),
                                                "GPUAAS_DATA_DIR": str(tmp_path_factory.mktemp(f"data-{name}"))})
               for name in NAMES}


def test_every_benchmark_is_listed() -> None:
    """The runner finds the benchmarks by file name: a renamed one would silently drop out of both."""
    assert set(NAMES) == {p.stem.removeprefix("bench_") for p in (ROOT / "bench").glob("bench_*.py")}
    assert len(NAMES) >= 16


def test_no_benchmark_imports_the_test_suite() -> None:
    """``tests`` is not installed: a benchmark that imports it works here and fails on a user's checkout."""
    offenders = []
    for path in sorted((ROOT / "bench").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] == "tests"]
        offenders += [f"{path.name}: names tests.* as a module to run" for _ in [0] if '"tests.' in path.read_text()]
    assert not offenders, offenders


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("name", NAMES)
def test_benchmark_runs_at_smoke_size(name: str,
                                      smoke_runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    done = smoke_runs[name].result(timeout=TIMEOUT_S * len(NAMES))
    summary = done.stdout[done.stdout.rfind("== summary"):]
    assert done.returncode == 0, f"bench {name} --smoke exited {done.returncode}:\n{summary}\n{done.stderr[-1500:]}"
    assert summary.splitlines()[1].startswith("ok"), summary
    assert "Traceback" not in done.stderr, done.stderr[-1500:]
