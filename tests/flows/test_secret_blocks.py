"""One way to load settings: the Prefect Secret blocks are a settings source every flow sees.

Cases:
- every flow in ``flows/`` (found by scanning, so a new flow is covered too), cost report and load
  test included, run on the session's Prefect test server with the Prometheus and OpenCost tokens
  and the database password held only in Secret blocks, loads settings that carry all three; each run is
  stopped right after it loaded them (what it does next is its own test's business);
- a set environment variable wins over its block;
- with no Prefect API configured, loading settings neither imports Prefect nor asks a server
  (a fresh interpreter: the command line stays fast).
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefect import Flow

import gpuaas.settings
from gpuaas.settings import SECRET_BLOCKS, GpuaasSettings, load_settings

pytestmark = [pytest.mark.flow]

ROOT = Path(__file__).resolve().parents[2]
BLOCK_VALUES = {"prometheus_token": "prom-token-only-in-a-block", "opencost_token": "opencost-token-only-in-a-block",
                "database_password": "db-pw-only-in-a-block"}
REQUIRED = {"load_test": {"url": "http://127.0.0.1:9/v1", "model": "m", "rates": [1.0]}}
"""Parameters a flow cannot run without (the others all have defaults)."""


def _flows() -> list[tuple[str, Flow[Any, Any]]]:
    found = []
    for path in sorted((ROOT / "flows").glob("[!_]*.py")):
        module = importlib.import_module(f"flows.{path.stem}")
        found += [(path.stem, obj) for obj in vars(module).values()
                  if isinstance(obj, Flow) and obj.fn.__module__ == module.__name__]
    return found


FLOWS = _flows()


class _Loaded(Exception):  # noqa: N818 - a stop signal, not an error
    """Ends a run right after it loaded its settings, carrying them out."""

    def __init__(self, settings: GpuaasSettings) -> None:
        super().__init__("settings loaded")
        self.settings = settings


@pytest.fixture()
def blocks_only(prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The secrets in Secret blocks on the test server, and nowhere else."""
    from prefect.blocks.system import Secret
    from prefect.client.orchestration import get_client

    for field in SECRET_BLOCKS:
        monkeypatch.delenv(f"GPUAAS_{field.upper()}", raising=False)
    for field, block in SECRET_BLOCKS.items():
        Secret(value=BLOCK_VALUES[field]).save(block, overwrite=True)
    try:
        yield
    finally:
        with get_client(sync_client=True) as client:
            for block in SECRET_BLOCKS.values():
                client.delete_block_document(Secret.load(block)._block_document_id)  # type: ignore[arg-type]


def test_every_flow_is_found() -> None:
    assert {module for module, _ in FLOWS} >= {"collect", "reclaim", "rebalance", "deadlines", "incident",
                                                "cost_report", "load_test"}


@pytest.mark.parametrize(("module", "flow"), FLOWS, ids=[f"{m}.{f.name}" for m, f in FLOWS])
def test_every_flow_sees_the_secrets_held_only_in_blocks(module: str, flow: Flow[Any, Any], blocks_only: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def loaded(**overrides: object) -> GpuaasSettings:
        raise _Loaded(gpuaas.settings.load_settings(**overrides))

    body = "flows._collect" if module == "collect" else f"flows.{module}"  # the collect's Prefect-free body
    monkeypatch.setattr(f"{body}.load_settings", loaded)
    state = flow(**REQUIRED.get(module, {}), return_state=True)
    error = state.result(raise_on_failure=False)
    assert isinstance(error, _Loaded), f"{module}: the flow did not load its settings with load_settings(): {error!r}"
    held = {field: getattr(error.settings, field) for field in BLOCK_VALUES}
    assert {field: value and value.get_secret_value() for field, value in held.items()} == BLOCK_VALUES


def test_an_environment_variable_wins_over_its_block(blocks_only: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN", "from-the-environment")
    settings = load_settings()
    assert settings.prometheus_token is not None and settings.database_password is not None
    assert settings.opencost_token is not None
    assert settings.prometheus_token.get_secret_value() == "from-the-environment"
    assert settings.database_password.get_secret_value() == BLOCK_VALUES["database_password"]
    assert settings.opencost_token.get_secret_value() == BLOCK_VALUES["opencost_token"]


def test_without_a_prefect_api_no_block_is_asked_and_prefect_is_not_imported(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "GPUAAS_"))}
    env.update(PYTHONPATH=str(ROOT), GPUAAS_DATA_DIR=str(tmp_path), PREFECT_HOME=str(tmp_path / "prefect"))
    script = ("import sys; from gpuaas.settings import load_settings; s = load_settings(); "
              "print('prefect' in sys.modules, s.prometheus_token, s.opencost_token, s.database_password)")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "None", "None", "None"]
