"""A policy file's mistakes that pydantic's lax reading let through, or named at a place the file does not have.

Each is run through ``gpuaas config check``: exit 1, one ``error:`` line naming the file and the field the
operator has to edit, nothing on stdout, no traceback. The cases are how people get YAML wrong: a boolean
where a number goes (pydantic reads ``true`` as 1), a key YAML reads as a number or null, a namespace
Kubernetes could not name, a freeze's start written as a number, and a cross-field refusal (two services of
one name, a namespace in two tenants) that named the whole file or a whole list instead of the entry.
Opt-outs (``exclude_namespaces``) and cohorts that no Kubernetes object can be named are refused too: the
exclusion would exclude nothing, and reclaim would act where the file says it must not.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.app import app

SERVICE = "{name: %s, namespace: %s, latency_slo_seconds: 1}"
CASES = {
    # YAML booleans where a number goes: pydantic read each as 1 (one GPU, one minute, weight 1) and passed it.
    "a boolean GPU count": ("tenants:\n  - {name: a, guaranteed_gpus: yes}\n", "tenants[0].guaranteed_gpus",
                            "expected a number, got a boolean"),
    "a boolean window": ("reclaim:\n  window_minutes: true\n", "reclaim.window_minutes", "expected a number"),
    "a boolean cap": ("reclaim:\n  max_actions_per_run: on\n", "reclaim.max_actions_per_run", "expected a number"),
    "a boolean weight": ("tenants:\n  - {name: a, weight: yes}\n", "tenants[0].weight", "expected a number"),
    "a boolean in a list of windows": ("collect:\n  windows_minutes: [30, true]\n", "collect.windows_minutes[1]",
                                       "expected a number"),
    "a boolean flavor guarantee": ("tenants:\n  - {name: a, guaranteed_gpus_per_flavor: {h100: yes}}\n",
                                   "tenants[0].guaranteed_gpus_per_flavor.h100", "expected a number"),
    "a boolean quality threshold": ("services:\n  - {name: a, namespace: x, model_name: m, latency_slo_seconds: 1,"
                                    " quality: {metric: m, threshold: true}}\n", "services[0].quality.threshold",
                                    "expected a number"),
    "a namespace YAML reads as false": ("tenants:\n  - {name: a, namespaces: [no]}\n", "tenants[0].namespaces[0]",
                                        "expected text, got a boolean (YAML reads yes, no, on, off, true and false "
                                        "as booleans: quote it)"),
    # Keys YAML reads as something other than text: refused in pydantic's words at ``None`` or ``[1].[key]``.
    "a number as a flavor": ("tenants:\n  - {name: a, guaranteed_gpus_per_flavor: {1: 3}}\n",
                             "tenants[0].guaranteed_gpus_per_flavor.1", "key must be text, got 1 (quote it: '1')"),
    "null as a key": ("null: 3\n", "null", "key must be text, got null"),
    "a number as a top-level key": ("1: 3\n", "1", "key must be text, got 1"),
    # A service's namespace no Kubernetes namespace can have: it would match no pod and no series, silently.
    "a service namespace Kubernetes cannot name": (f"services:\n  - {SERVICE % ('chat', 'Team-B')}\n",
                                                   "services[0].namespace", "'Team-B' is not a Kubernetes namespace"),
    # Values no fleet has, with no upper bound: a 24-digit count became the store's LIMIT and every collect's
    # pruning failed with an OverflowError; the others are typos the planners would take at face value.
    "a keep count past 64 bits": ("store:\n  keep_full_snapshots: 99999999999999999999999\n",
                                  "store.keep_full_snapshots", "Input should be less than or equal to 1000000"),
    "an absurd estimate error": ("deadlines:\n  runtime_estimate_error: 1e300\n",
                                 "deadlines.runtime_estimate_error", "Input should be less than or equal to 1000"),
    "an absurd SLO": ("services:\n  - {name: a, namespace: x, latency_slo_seconds: 1.0e+300}\n",
                      "services[0].latency_slo_seconds", "Input should be less than or equal to 86400"),
    # Opt-outs and cohorts no Kubernetes object can be named: the exclusion would exclude nothing.
    "an excluded namespace with an underscore": ("reclaim:\n  exclude_namespaces: [kube_system]\n",
                                                 "reclaim.exclude_namespaces[0]",
                                                 "'kube_system' is not a Kubernetes namespace"),
    "an excluded queue with a space": ("reclaim:\n  exclude_queues: [\"Team A\"]\n", "reclaim.exclude_queues[0]",
                                       "'Team A' is not a Kubernetes object name"),
    "a cohort with capitals": ("rebalance:\n  cohorts: [Main]\n", "rebalance.cohorts[0]",
                               "'Main' is not a Kubernetes object name"),
    # A section or entry that is not a mapping: pydantic said "instance of Tenant", a class the file never names.
    "tenants as a list of names": ("tenants: [team-a, team-b]\n", "tenants[0]",
                                   "expected a mapping of keys to values, got text 'team-a' (and 1 more)"),
    "a section left empty": ("reclaim:\n", "reclaim", "expected a mapping of keys to values, got nothing (null)"),
    "a kind rule as a number": ("reclaim:\n  kinds:\n    Notebook: 60\n", "reclaim.kinds.Notebook",
                                "expected a mapping of keys to values, got a number (60)"),
    # A key with an invisible character pasted in looked right in the error: "reclaim.mo<ZWSP>de: unknown field".
    "a zero-width space in a key": ("reclaim:\n  mo\u200bde: apply\n", "reclaim.mo\\u200bde", "unknown field"),
    "a byte-order mark before a key": ("version: 1\n\ufeffreclaim: {}\n", "\\ufeffreclaim", "unknown field"),
    "a no-break space after a key": ('reclaim:\n  "mode\u00a0": apply\n', "reclaim.mode\\xa0", "unknown field"),
    # A number is read as seconds since 1970: 20261220 (a date without dashes) was a freeze from August 1970.
    "a freeze start written as a number": ("freezes:\n  - {name: x, start: 20261220, end: 2027-01-04T00:00:00Z}\n",
                                           "freezes[0].start", "20261220 is not a date and time"),
    # Cross-field refusals named "(top level)" or the list, not the entry to edit.
    "two services of one name": (f"services:\n  - {SERVICE % ('a', 'x')}\n  - {SERVICE % ('a', 'y')}\n",
                                 "services[1].name", "service 'a' is defined twice"),
    "two freezes of one name": ("freezes:\n" + "  - {name: x, schedule: '0 0 * * *', duration_minutes: 3}\n" * 2,
                                "freezes[1].name", "freeze 'x' is defined twice"),
    "a namespace in two tenants": ("tenants:\n  - {name: a, namespaces: [x]}\n  - {name: b, namespaces: [y, x]}\n",
                                   "tenants[1].namespaces[1]", "namespace 'x' is in tenants 'a' and 'b'"),
    "a serving service without its SLO": ("services:\n  - {name: a, namespace: x}\n",
                                          "services[0].latency_slo_seconds", "missing: a serving service needs it"),
    "an abort counted as good": ("services:\n  - {name: a, namespace: x, latency_slo_seconds: 1, "
                                 "good_finished_reasons: [stop, abort]}\n",
                                 "services[0].good_finished_reasons[1]", "abort never counts as a verified outcome"),
}


@pytest.mark.parametrize(("text", "field", "says"), CASES.values(), ids=CASES.keys())
def test_config_check_names_the_field_to_edit(text: str, field: str, says: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 1, result.output
    assert result.stdout == "" and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {path}: {field}: {says}"), result.stderr


def test_a_boolean_is_refused_only_where_a_number_goes(tmp_path: Path) -> None:
    """``enabled: no`` is a boolean where one goes; ``guaranteed_gpus: yes`` beside it is not."""
    path = tmp_path / "policy.yaml"
    path.write_text("tenants:\n  - {name: a, weight: 2, reclaim: {enabled: no, window_minutes: 60}}\n")
    assert CliRunner().invoke(app, ["config", "check", str(path)]).exit_code == 0
    path.write_text("tenants:\n  - {name: a, guaranteed_gpus: yes, reclaim: {enabled: no}}\n")
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 1 and "tenants[0].guaranteed_gpus: expected a number" in result.stderr


@pytest.mark.timeout(60)
def test_a_boolean_among_aliases_nine_deep_is_found_at_once(tmp_path: Path) -> None:
    """YAML aliases share one list: nine of nine of nine... is 387 million numbers if walked one by one. The
    boolean check walks each list once, so the file is refused in well under the time limit."""
    levels = "[1, 1, 1, 1, 1, 1, 1, 1, 1]"
    for _ in range(8):
        levels = f"[&a{_} {levels}, " + ", ".join([f"*a{_}"] * 8) + "]"
    path = tmp_path / "policy.yaml"
    path.write_text(f"collect:\n  windows_minutes: [{levels}, true]\n")
    result = CliRunner().invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {path}: collect.windows_minutes[1]: expected a number, got a boolean")
