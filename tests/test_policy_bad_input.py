"""Bad policy files: each is one ``ConfigError`` naming the file and the field, never a traceback.

A table of the mistakes an operator makes (wrong types, unknown kinds, negative and absurd
quotas, infinities, duplicate tenants, a namespace or ClusterQueue in two tenants, broken
YAML, dates no calendar has), run through ``gpuaas config check`` (exit 1, one ``error:`` line on stderr) and a
property: any YAML-like document either loads or raises ``ConfigError``, nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuaas._validation import shown_message
from gpuaas.cli.app import app
from gpuaas.errors import ConfigError
from gpuaas.policy import Policy, Tenant, load_policy, parse_policy

FREEZE = "version: 1\nfreezes:\n  - name: x\n    start: {start}\n    end: 2027-01-04T00:00:00Z\n"

CASES = {
    "wrong type": ("reclaim:\n  max_actions_per_run: ten\n",
                   "reclaim.max_actions_per_run: Input should be a valid integer"),
    "tenants not a list": ("tenants: {a: 1}\n", "tenants: Input should be a valid list"),
    "unknown kind": ("reclaim:\n  kinds:\n    Job: {}\n", "unknown workload kind 'Job' in kinds"),
    "unknown field": ("reclaim:\n  windows_minute: 30\n", "reclaim.windows_minute: unknown field"),
    "negative quota": ("tenants:\n  - {name: a, guaranteed_gpus: -1}\n",
                       "tenants[0].guaranteed_gpus: Input should be greater than or equal to 0"),
    "absurd quota": ("tenants:\n  - {name: a, guaranteed_gpus: 1000000000000000000000000000000}\n",
                     "tenants[0].guaranteed_gpus: Input should be less than or equal to 10000000"),
    "negative flavor guarantee": ("tenants:\n  - {name: a, guaranteed_gpus_per_flavor: {h100: -3}}\n",
                                  "tenants[0].guaranteed_gpus_per_flavor.h100: Input should be greater than"),
    "denormal weight": ("tenants:\n  - {name: a, weight: 1.0e-320}\n",
                        "tenants[0].weight: Input should be greater than or equal to 0.000001"),
    "absurd weight": ("tenants:\n  - {name: a, weight: 1.0e+7}\n",
                      "tenants[0].weight: Input should be less than or equal to 1000000"),
    "absurd window": ("reclaim:\n  window_minutes: 1e308\n",
                      "reclaim.window_minutes: Input should be less than or equal to 44640"),
    "absurd cap": ("reclaim:\n  max_actions_per_run: 99999999999999999999\n",
                   "reclaim.max_actions_per_run: Input should be less than or equal to 10000000"),
    "a key given twice": ("reclaim:\n  mode: dry-run\n  window_minutes: 30\n  mode: apply\n",
                          "line 4: 'mode' is given twice in the same mapping"),
    "namespace not a Kubernetes name": ("tenants:\n  - {name: a, namespaces: [Team-A]}\n",
                                        "tenants[0].namespaces[0]: 'Team-A' is not a Kubernetes namespace"),
    "queue not a Kubernetes name": ("tenants:\n  - {name: a, cluster_queues: [\"q a\"]}\n",
                                    "tenants[0].cluster_queues[0]: 'q a' is not a Kubernetes object name"),
    "infinite window": ("reclaim:\n  window_minutes: .inf\n", "reclaim.window_minutes: Input should be a finite number"),
    "NaN threshold": ("reclaim:\n  activity_threshold: .nan\n", "reclaim.activity_threshold: Input should be a finite"),
    "duplicate tenants": ("tenants:\n  - {name: a}\n  - {name: a}\n", "tenant 'a' is defined twice"),
    "namespace in two tenants": ("tenants:\n  - {name: a, namespaces: [x]}\n  - {name: b, namespaces: [x]}\n",
                                 "namespace 'x' is in tenants 'a' and 'b'"),
    "queue in two tenants": ("tenants:\n  - {name: a, cluster_queues: [q]}\n  - {name: b, cluster_queues: [q]}\n",
                             "cluster queue 'q' is in tenants 'a' and 'b'"),
    "keep no snapshot": ("store:\n  keep_full_snapshots: 0\n", "store.keep_full_snapshots: Input should be greater"),
    "unknown schema version": ("version: 99\n",
                               "version: 99 is not a policy version this gpuaas reads (it reads version 1)"),
    "version zero": ("version: 0\n", "version: 0 is not a policy version this gpuaas reads (it reads version 1)"),
    "version a word": ("version: one\n",
                       "version: 'one' is not a policy version this gpuaas reads (it reads version 1)"),
    "version a quoted number": ("version: \"1\"\n", "version: '1' is not a policy version"),
    "version a boolean": ("version: true\n", "version: True is not a policy version"),
    "top level list": ("- 1\n- 2\n", "expected a mapping at the top level, got list"),
    "broken YAML": ("reclaim: [\n", "policy.yaml"),
    "tab indentation": ("reclaim:\n\tmode: apply\n", "policy.yaml"),
    # Values PyYAML recognises but Python cannot build: its own errors named no file, field or line.
    "a day February lacks": (FREEZE.format(start="2026-02-30T00:00:00Z"), "line 4, column 12: freezes[0].start: "
                             "2026-02-30T00:00:00Z is not a valid timestamp: day is out of range for month"),
    "month 13": (FREEZE.format(start="2026-13-01"),
                 "freezes[0].start: 2026-13-01 is not a valid timestamp: month must be in 1..12"),
    "hour 25": (FREEZE.format(start="2026-12-20T25:00:00Z"), "freezes[0].start: 2026-12-20T25:00:00Z is not a valid "
                "timestamp: hour must be in 0..23"),
    "offset past a day": (FREEZE.format(start="2026-12-20T00:00:00+25:00"), "freezes[0].start: 2026-12-20T00:00:00+25:00 "
                          "is not a valid timestamp: its UTC offset must be less than 24 hours"),
    "an end UTC cannot hold": (FREEZE.replace("2027-01-04T00:00:00Z", "9999-12-31T23:59:59-12:00").format(
        start="2026-12-20T00:00:00Z"), "freezes[0].end: 9999-12-31T23:59:59-12:00 is outside what UTC can hold"),
    "an integer too long to read": ("reclaim:\n  max_actions_per_run: " + "9" * 5000 + "\n",
                                    "line 2, column 24: reclaim.max_actions_per_run: " + "9" * 40
                                    + "... (5,000 characters) is not a valid integer"),
    "a tag its text does not fit": ("reclaim: !!timestamp soon\n", "line 1, column 10: reclaim: soon is not a valid "
                                    "timestamp"),
    "nested too deeply": ("version: 1\nx: " + "[" * 20000 + "]" * 20000 + "\n", "invalid YAML: nested too deeply"),
    "a NUL byte": ("version: 1\x00\n", "line 1, column 11: invalid YAML: character 0x00 is not allowed"),
    "an escape byte": ("reclaim:\n  mode: \x1b[31mapply\n", "line 2, column 9: invalid YAML: character 0x1b is not"),
    "two documents": ("version: 1\n---\nversion: 1\n", "line 2, column 1: invalid YAML: expected a single document "
                      "in the stream but found another document"),
    "a merge of several mappings": ("reclaim:\n  <<: [{mode: dry-run}, {mode: apply, max_actions_per_run: 5}]\n",
                                    "line 2, column 3: reclaim.<<: a merge of several mappings (<<: [a, b]) is "
                                    "refused"),
}


@pytest.mark.parametrize(("text", "message"), CASES.values(), ids=CASES.keys())
def test_config_check_names_file_and_field(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert str(path) in str(caught.value) and message in str(caught.value)
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "error:" in result.stderr and message.split(":")[0] in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize(("text", "field", "says"), [
    ("freezes:\n  - name: x\n    start: 2026-12-20\n    end: 2027-01-04\n", "freezes[0].start",
     "Input should have timezone info (and 1 more)"),
    ("".join(f"k{i}: 1\n" for i in range(1, 10)), "k1",
     "unknown field; check its spelling against examples/policy.yaml (and 8 more)"),
], ids=["a freeze without time zones", "nine unknown keys"])
def test_several_problems_are_the_first_and_how_many_more(text: str, field: str, says: str, tmp_path: Path) -> None:
    """One ``error:`` line, as every configuration error: a line per problem put the later ones without the
    prefix, as if they were output, and nine of them buried the first."""
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert (caught.value.file, caught.value.field) == (str(path), field)
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [f"error: {path}: {field}: {says}"]


LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdef", "bcdefg", strict=True)
) + "version: *g\n"
"""Seven nested aliases of nine: ``version`` is 9**7 (4.8 million) items once expanded, 34 MB as Python prints it."""


def test_a_value_an_alias_bomb_expands_is_cut_in_the_error_line(tmp_path: Path) -> None:
    """The error quoted the refused value whole: one line of 34 MB. It quotes its first 200 characters, and says
    how long it was and what was wrong with it."""
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    said = str(caught.value)
    shown = "[[[[[[['lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol'], ['lol', "
    assert said.startswith(f"{path}: version: {shown}"), said[:300]
    assert said.endswith(" is not a policy version this gpuaas reads (it reads version 1) (and 7 more)"), said[-300:]
    assert len(said) < len(str(path)) + 400 and "characters)" in said
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 1 and result.stderr.splitlines() == [f"error: {said}"]


def test_a_message_quoting_a_value_in_another_form_is_kept_to_its_ends() -> None:
    """A check may quote a value other than as Python prints it (converted, joined): the message is then kept to
    its start and its end, where it says what was wrong."""
    said = shown_message("got " + "x" * 5000 + ", expected a name", ["y"] * 3000)
    assert len(said) < 1100 and said.startswith("got xxx") and said.endswith("x, expected a name")
    assert "... (5,021 characters) ..." in said
    assert shown_message("short: " + "z" * 100, "z" * 100) == "short: " + "z" * 100


def test_a_missing_or_binary_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="missing.yaml"):
        load_policy(tmp_path / "missing.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x01reclaim")
    with pytest.raises(ConfigError, match="binary.yaml"):
        load_policy(binary)


YAML_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
KEYS = st.sampled_from(["version", "collect", "reclaim", "rebalance", "tenants", "services", "store", "name",
                        "namespaces", "cluster_queues", "guaranteed_gpus", "mode", "kinds", "window_minutes",
                        "max_actions_per_run", "activity_threshold", "keep_full_snapshots", "retention_days"])
DOCS = st.recursive(YAML_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(DOCS)
def test_any_document_loads_or_is_a_config_error(doc: Any) -> None:
    try:
        policy = parse_policy(doc, "p.yaml")
    except ConfigError as exc:
        assert str(exc).startswith("p.yaml")
        return
    assert isinstance(policy, Policy)
    assert parse_policy(yaml.safe_load(yaml.safe_dump(policy.model_dump(mode="json"))), "again.yaml") == policy


@pytest.mark.parametrize("text", ["version: 1\n", "reclaim:\n  mode: dry-run\n", ""], ids=["version 1", "no version", "empty"])
def test_the_known_version_or_none_loads(text: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    assert load_policy(path).version == 1
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output


def test_the_weights_a_policy_takes_are_weights_the_quota_planner_solves(tmp_path: Path) -> None:
    """A denormal weight (``1.0e-320``) passed ``config check`` and then failed the nightly plan; the policy's
    bounds are the planner's range, and a plan with a queue at each end of it solves."""
    bounds = {type(m).__name__: m for m in Tenant.model_fields["weight"].metadata}
    low, high = bounds["Ge"].ge, bounds["Le"].le
    policy = tmp_path / "policy.yaml"
    for weight, code in ((low, 0), (high, 0), (low * 0.99, 1), (high * 1.01, 1), (1.0e-320, 1)):
        policy.write_text(f"tenants:\n  - name: a\n    weight: {weight:.6e}\n")  # a float to YAML 1.1: a dot before the e
        checked = CliRunner().invoke(app, ["config", "check", str(policy)])
        assert checked.exit_code == code, (weight, checked.output)
        if code:
            assert "weight" in checked.stderr and len(checked.stderr.strip().splitlines()) == 1, checked.stderr
    problem = tmp_path / "p.yaml"
    problem.write_text("limits: {max_step_gpus: 8, max_step_percent: 50, max_total_moved_gpus: 32}\nqueues:\n"
                       f"  - {{name: a, nominal: {{a100: 16}}, demand: {{a100: 3}}, weight: {high:.1e}}}\n"
                       f"  - {{name: b, nominal: {{a100: 8}}, demand: {{a100: 20}}, weight: {low:.1e}}}\n")
    result = CliRunner().invoke(app, ["plan", "quotas", str(problem), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
