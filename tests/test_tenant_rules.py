"""``gpuaas config tenant-rules``: the shipped example rules are what the command makes of the example
policy (no drift), and a policy with no tenant namespace is one line naming the file and field, exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app

ROOT = Path(__file__).resolve().parents[1]


def test_shipped_rules_are_generated_from_the_example_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the file's header names the policy as given: relative to the repository
    out = tmp_path / "rules.yaml"
    result = CliRunner().invoke(app, ["config", "tenant-rules", "examples/policy.yaml", "-o", str(out)])
    assert result.exit_code == 0, result.output
    shipped = ROOT / "deployments" / "prometheus" / "gpuaas-tenant-rules.example.yaml"
    assert out.read_text() == shipped.read_text(), "regenerate: gpuaas config tenant-rules examples/policy.yaml -o " \
                                                   "deployments/prometheus/gpuaas-tenant-rules.example.yaml"
    assert 'label_replace(label_replace(vector(1), "namespace", "team-b-serving"' in out.read_text()


def test_a_policy_without_tenants_is_refused_in_one_line(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("tenants: []\n")
    result = CliRunner().invoke(app, ["config", "tenant-rules", str(policy)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == [f"error: {policy}: tenants: no tenant lists a namespace, so there is no mapping to record"]
