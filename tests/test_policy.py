"""Policy and settings validation: errors name the file, the field and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.errors import ConfigError
from gpuaas.policy import FreeGoal, Mode, Policy, load_policy
from gpuaas.settings import load_settings

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "policy.yaml"


def test_the_documented_example_is_valid_and_means_what_it_says() -> None:
    policy = load_policy(EXAMPLE)
    assert policy.reclaim.mode is Mode.dry_run
    assert policy.reclaim.kinds["Notebook"].window_minutes == 60
    assert policy.tenant_for("team-b-serving") is not None
    assert policy.tenant_for("team-b-serving").name == "team-b"  # type: ignore[union-attr]
    assert policy.tenant_for(None, "team-a-cq").reclaim.free is FreeGoal.quota  # type: ignore[union-attr]


def test_defaults_are_dry_run_everywhere() -> None:
    policy = Policy()
    assert policy.reclaim.mode is Mode.dry_run and policy.rebalance.mode is Mode.dry_run


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("reclaim:\n  window_minutes: -5\n", r"policy\.yaml: reclaim\.window_minutes: Input should be greater than 0"),
        ("tenants:\n  - name: a\n  - name: b\n    guaranteed_gpus: -1\n",
         r"policy\.yaml: tenants\[1\]\.guaranteed_gpus: Input should be greater than or equal to 0"),
        ("reclaim:\n  mode: yolo\n", r"policy\.yaml: reclaim\.mode: Input should be 'dry-run' or 'apply'"),
        ("reclaim:\n  idle_minutes: 5\n", r"policy\.yaml: reclaim\.idle_minutes: unknown field"),
        ("reclaim:\n  kinds:\n    Pod: {}\n", r"policy\.yaml: reclaim: .*unknown workload kind 'Pod' in kinds"),
        ("reclaim:\n  serving_kinds: [Pod]\n", r"policy\.yaml: reclaim: .*unknown workload kind 'Pod' in serving_kinds"),
        ("tenants:\n  - name: a\n  - name: a\n", r"policy\.yaml: \(top level\): .*tenant 'a' is defined twice"),
        ("reclaim: [1, 2\n", r"policy\.yaml: line 2, column 1: invalid YAML"),
        ("- just\n- a list\n", r"policy\.yaml: expected a mapping at the top level, got list"),
        ("reclaim:\n  tenants[2]: 1\n  activity_threshold: 1.5\n",
         r"reclaim\.activity_threshold: Input should be less than or equal to 1"),
    ],
    ids=["negative-window", "negative-quota", "bad-enum", "typo", "unknown-kind", "unknown-serving-kind",
         "duplicate-tenant",
         "broken-yaml", "not-a-mapping", "fraction-range"],
)
def test_broken_policy_names_file_and_field(tmp_path: Path, yaml_text: str, expected: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=expected) as info:
        load_policy(path)
    assert info.value.file == str(path)


def test_missing_policy_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read policy file"):
        load_policy(tmp_path / "nope.yaml")


def test_settings_come_from_gpuaas_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("GPUAAS_PROMETHEUS_URL", "http://127.0.0.1:9090")
    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY", "my_activity")
    monkeypatch.setenv("GPUAAS_METRICS__GPU_ACTIVITY_SCALE", "1")
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(EXAMPLE))
    settings = load_settings()
    assert settings.prometheus_url == "http://127.0.0.1:9090"
    assert settings.metrics.gpu_activity == "my_activity"
    assert settings.database_url_value == f"sqlite:///{tmp_path / 'd' / 'gpuaas.db'}"
    assert settings.policy.reclaim.max_actions_per_run == 10


def test_a_structured_variable_that_is_not_json_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_METRICS__POD_LABELS", "[not json")
    with pytest.raises(ConfigError, match=r"^environment: GPUAAS_METRICS \(or one of its GPUAAS_METRICS__ parts\): "
                                          r"not a valid value; a list or mapping is written as JSON"):
        load_settings()


def test_bad_environment_value_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_KUBE_PAGE_SIZE", "-3")
    with pytest.raises(ConfigError, match=r"environment: GPUAAS_KUBE_PAGE_SIZE: Input should be greater than 0"):
        load_settings()


def test_settings_policy_error_is_raised_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("rebalance:\n  max_step_gpus: lots\n")
    monkeypatch.setenv("GPUAAS_POLICY_FILE", str(bad))
    with pytest.raises(ConfigError, match=r"p\.yaml: rebalance\.max_step_gpus: Input should be a valid integer"):
        load_settings()
