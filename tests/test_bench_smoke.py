"""Every benchmark runs at its smallest size (``--smoke``), so that none rots between full runs.

A full ``make bench`` takes most of an hour and is run rarely, so an import error or a changed API
in a benchmark would otherwise surface first to whoever runs it next. The set runs as ``make bench
SMOKE=1`` runs it (``python -m bench --smoke``: the runner, its summary and its exit status
included): in two processes side by side, each running its share in-process (``bench._smoke``: the imports are paid once), on the session's
PostgreSQL (``GPUAAS_TEST_POSTGRES_URL``; each benchmark in schemas of its own) and its Prefect test
server (``PREFECT_API_URL``), since the whole set has to add under a minute to the suite. Each
benchmark is then one test that reads its line of the summary.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.__main__ import NAMES
from bench._smoke import split

ROOT = Path(__file__).resolve().parents[1]
AT_ONCE = 2
"""Smoke runs side by side (``bench._smoke.split``): most of each is waiting, and the suite has two cores."""
TIMEOUT_S = 600
"""One run: about a minute on a quiet machine, several under a heavy load."""


@pytest.fixture(scope="module")
def smoke_run(postgres_url: str, prefect_harness: None, tmp_path_factory: pytest.TempPathFactory,
              ) -> tuple[subprocess.CompletedProcess[str], dict[str, str], list[str]]:
    """``python -m bench --smoke NAMES`` for each share of the set, side by side; the exit status (the worst)
    and output of both, each benchmark's summary line by name, and the ``bench-*`` scratch directories the runs
    left in the temporary directory."""
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_"))}
    env.update({"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "GPUAAS_TEST_POSTGRES_URL": postgres_url,
                "PREFECT_API_URL": str(PREFECT_API_URL.value()),
                "PREFECT_HOME": str(tmp_path_factory.mktemp("prefect-smoke")),
                "GPUAAS_DATA_DIR": str(tmp_path_factory.mktemp("data-smoke"))})

    def one(names: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bench", "--smoke", "--timeout", "240", *names], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)

    scratch = Path(tempfile.gettempdir())
    before = set(scratch.glob("bench-*"))
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        runs = list(pool.map(one, split(NAMES, AT_ONCE)))
    left = sorted(p.name for p in set(scratch.glob("bench-*")) - before)
    done = subprocess.CompletedProcess([], max(r.returncode for r in runs), "\n".join(r.stdout for r in runs),
                                       "\n".join(r.stderr for r in runs))
    lines = {}
    for run in runs:
        for line in run.stdout[run.stdout.rfind("== summary"):].splitlines()[1:]:
            fields = line.split()
            if len(fields) > 2 and fields[0] in ("ok", "FAILED"):
                lines[fields[2] if fields[0] == "FAILED" else fields[1]] = line
    return done, lines, left


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
@pytest.mark.timeout(TIMEOUT_S + 60)  # the first test waits for the whole set (the fixture)
@pytest.mark.parametrize("name", NAMES)
def test_benchmark_runs_at_smoke_size(
        name: str, smoke_run: tuple[subprocess.CompletedProcess[str], dict[str, str], list[str]]) -> None:
    done, lines, _ = smoke_run
    assert name in lines, f"bench --smoke exited {done.returncode} before {name}:\n{done.stdout[-1500:]}\n" \
                          f"{done.stderr[-1500:]}"
    assert lines[name].startswith("ok"), f"{lines[name]}\n{done.stderr[-1500:]}"
    assert f"bench_{name}: failed" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-1500:]


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.timeout(TIMEOUT_S + 60)
def test_benchmarks_leave_no_scratch_behind(
        smoke_run: tuple[subprocess.CompletedProcess[str], dict[str, str], list[str]]) -> None:
    """Every ``make test`` runs the whole set: each benchmark's clusters, databases and Prefect homes are removed
    as its process exits (``bench._run.scratch``), where they used to pile up in ``/tmp`` run after run."""
    done, _, left = smoke_run
    assert done.returncode == 0, done.stderr[-1500:]
    assert left == [], left


def test_shared_servers_that_do_not_start_are_one_line(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """PostgreSQL's ``initdb`` refused (run as root with a ``TMPDIR`` the postgres user cannot enter): one line
    with the command's last words, exit 1, no traceback."""
    from collections.abc import Iterator
    from contextlib import contextmanager

    import bench.__main__ as runner

    @contextmanager
    def refused() -> Iterator[None]:
        raise subprocess.CalledProcessError(1, ["runuser", "-u", "postgres", "--", "initdb"],
                                            stderr="initdb: error: could not access directory \"/tmp/x\": "
                                                   "Permission denied\n")
        yield

    monkeypatch.setattr(runner, "shared_servers", refused)
    assert runner.main(["--smoke", "quota_plan"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "bench: the shared servers did not start: CalledProcessError: Command '['runuser', '-u', 'postgres', '--', "
        "'initdb']' returned non-zero exit status 1.: initdb: error: could not access directory \"/tmp/x\": "
        "Permission denied"]
