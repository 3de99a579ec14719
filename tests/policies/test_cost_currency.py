"""The cost report writes its money in the currency of OpenCost's prices (``GPUAAS_OPENCOST_CURRENCY``), never
converting it: a EUR fleet reads euros in the headline, the tables, the page and the summary, the JSON says which
currency its figures are in, a yen has no cents, and a report that does not say (USD, the default, or an older
document) reads dollars as before.

The figures are those of ``test_cost_report``'s inputs, worked out there by hand: tenant ``a`` $88.50 total ($76 GPU),
tenant ``b`` $17.50, the cluster $106 ($91 GPU, $28 waste); service ``chat`` $45 over 72 verified requests.
"""

from __future__ import annotations

import json

import pytest

from gpuaas.errors import ConfigError
from gpuaas.operations.cost_report import CostWindows, plan
from gpuaas.phrases import money, per_outcome
from gpuaas.policies.cost import build_cost_report
from gpuaas.settings import load_settings
from reports.cost_report import (
    cost_headline,
    cost_report_json,
    cost_report_metrics,
    funnel_rows,
    service_rows,
    summary_markdown,
)
from reports.cost_report_html import render_html
from tests.policies.test_cost_report import POLICY, _inputs


@pytest.mark.parametrize(("value", "currency", "written"), [
    (1234.56, "USD", "$1,234.56"),
    (1234.56, "EUR", "€1,234.56"),
    (1234.56, "GBP", "£1,234.56"),
    (1234.56, "CHF", "1,234.56 CHF"),
    (1234.5, "JPY", "¥1,235"),  # no minor unit: whole yen, half up
    (1234.4, "KRW", "1,234 KRW"),
    (1.2345, "KWD", "1.235 KWD"),  # three minor units (fils)
    (-4.895, "EUR", "-€4.90"),  # half up, the sign before the symbol
    (-4.895, "CHF", "-4.90 CHF"),
    (-3.5, "JPY", "-¥4"),
    (0.000064, "EUR", "€0.0000640"),  # three significant digits under one unit
    (0.5, "JPY", "¥0.500"),
    (0, "JPY", "¥0"),
])
def test_an_amount_is_written_in_its_currency(value: float, currency: str, written: str) -> None:
    assert money(value, currency=currency) == written


def test_an_amount_without_a_currency_is_in_dollars() -> None:
    assert money(9.79 / 2) == "$4.90"
    assert money(None, currency="EUR") == "unknown"


def test_a_cost_per_request_under_the_smallest_unit_is_priced_per_thousand() -> None:
    assert per_outcome(0.004, "serving", "EUR") == "€4.00 per 1,000 requests"
    assert per_outcome(0.5, "serving", "JPY") == "¥500 per 1,000 requests"  # half a yen: under the smallest coin
    assert per_outcome(12.0, "serving", "JPY") == "¥12 per request"
    assert per_outcome(17.5, "batch", "CHF") == "17.50 CHF per job"


def test_a_eur_report_says_euros_everywhere_and_never_dollars() -> None:
    report = build_cost_report(_inputs(), POLICY, currency="EUR")
    headline = cost_headline(report)
    assert headline.startswith("24 h of GPUs: €106.00 allocated to workloads (€91.00 on GPUs), €28.00 of it on "
                               "allocated but idle GPUs")
    a, b, cluster = funnel_rows(report)
    assert (a["total cost"], a["GPU cost"], b["total cost"], cluster["total cost"]) == (
        "€88.50", "€76.00", "€17.50", "€106.00")
    chat = service_rows(report)[0]
    assert (chat["total cost"], chat["cost per outcome (total)"]) == ("€45.00", "€0.625 per request")
    page = render_html(report)
    assert "<span>€106.00</span><small>allocated to workloads (total cost)</small>" in page
    assert headline in page.replace("&#x27;", "'")
    summary = summary_markdown(report, None, None)
    assert "**€106.00**" in summary
    for text in (headline, page, summary, json.dumps(cost_report_json(report, None), ensure_ascii=False)):
        assert "$" not in text


def test_the_json_says_the_currency_and_keeps_the_amounts_as_numbers() -> None:
    doc = cost_report_json(build_cost_report(_inputs(), POLICY, currency="EUR"), None)
    assert doc["currency"] == "EUR"
    assert doc["cluster"]["total_cost"] == 106.0
    assert cost_report_json(build_cost_report(_inputs(), POLICY), None)["currency"] == "USD"


def test_a_jpy_report_is_in_whole_yen_and_its_rows_still_add_up() -> None:
    """Tenant a's ¥88.5 and b's ¥17.5 cannot both round up: the rows add up to the cluster's ¥106 as printed."""
    report = build_cost_report(_inputs(), POLICY, currency="JPY")
    a, b, cluster = funnel_rows(report)
    assert cluster["total cost"] == "¥106"
    assert sorted([a["total cost"], b["total cost"]]) in (["¥17", "¥89"], ["¥18", "¥88"])
    assert report.tenants[0]["total_cost"] + report.tenants[1]["total_cost"] == report.cluster["total_cost"] == 106
    assert all(float(t["total_cost"]).is_integer() for t in report.tenants)
    assert service_rows(report)[0]["cost per outcome (total)"] == "¥625 per 1,000 requests"  # ¥45 / 72 requests


def test_a_usd_report_is_unchanged() -> None:
    report = build_cost_report(_inputs(), POLICY)
    assert report.currency == "USD"
    assert cost_headline(report).startswith("24 h of GPUs: $106.00 allocated to workloads ($91.00 on GPUs)")
    assert funnel_rows(report)[0]["total cost"] == "$88.50"


def test_an_older_document_without_a_currency_reads_as_dollars(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuaas.cli.cost_report_cmd import print_cost_tables

    doc = cost_report_json(build_cost_report(_inputs(), POLICY, currency="EUR"), None)
    print_cost_tables({**doc, "headline": "the headline", "degraded": False})
    assert "€106.00" in capsys.readouterr().out
    del doc["currency"]
    print_cost_tables({**doc, "headline": "the headline", "degraded": False})
    said = capsys.readouterr().out
    assert "$106.00" in said and "€" not in said


def test_the_pushed_money_says_its_currency_under_the_same_names() -> None:
    usd = {f.name: f for f in cost_report_metrics(build_cost_report(_inputs(), POLICY))}
    eur = {f.name: f for f in cost_report_metrics(build_cost_report(_inputs(), POLICY, currency="EUR"))}
    assert list(usd) == list(eur)
    for name in ("gpuaas_gpu_cost", "gpuaas_total_cost", "gpuaas_waste_cost", "gpuaas_cost_per_outcome",
                 "gpuaas_tenant_cost_per_outcome"):
        assert "EUR" in eur[name].help and "USD" in usd[name].help
        assert eur[name].labels == usd[name].labels
    assert "EUR" not in eur["gpuaas_gpu_hours"].help


def test_both_windows_of_a_plan_are_in_the_settings_currency() -> None:
    planned = plan(CostWindows(_inputs(), _inputs()), POLICY, currency="GBP")
    assert planned.report.currency == planned.previous.currency == "GBP"  # type: ignore[union-attr]


def test_the_currency_setting_defaults_to_usd_and_takes_a_code(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().opencost_currency == "USD"
    monkeypatch.setenv("GPUAAS_OPENCOST_CURRENCY", "JPY")
    assert load_settings().opencost_currency == "JPY"


@pytest.mark.parametrize("value", ["eur", "€", "EURO", "E1R", " EUR"])
def test_a_value_that_is_no_currency_code_is_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("GPUAAS_OPENCOST_CURRENCY", value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    said = str(info.value)
    assert said.startswith("environment: GPUAAS_OPENCOST_CURRENCY: ")
    assert "ISO 4217" in said and "\n" not in said
