"""The reclaim decisions table, as the Prefect UI shows it in headless Chromium at 1600 px, fits its box with
the longest rows ``reports._reclaim_rows.decision_rows`` makes: a long workload name, a skip unchanged since an
earlier run with a six-digit audit id, the widest cause. The character budget (``ROW_BUDGET``) was measured
this way; this check keeps it honest when the UI's font or padding changes. Screenshots go to the test's tmp dir.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpuaas.models import Outcome
from gpuaas.policies.reclaim import SkipCause
from reports._reclaim_rows import CAUSE_WORDS, decision_rows
from tests.e2e.test_prefect_e2e import _page, _table_fits, browser, prefect_env  # noqa: F401 - fixtures
from tests.test_reclaim_table_cells import LONG, result

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EARLIER = datetime(2026, 12, 7, 21, 9, tzinfo=UTC)
WIDEST = max(CAUSE_WORDS, key=lambda c: len(CAUSE_WORDS[c]))


@pytest.mark.timeout(300)
def test_the_longest_rows_fit_a_1600_pixel_screen(prefect_env: dict[str, str], browser: Any,  # noqa: F811
                                                  tmp_path: Path) -> None:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.actions import ArtifactCreate
    from prefect.settings import PREFECT_API_URL, temporary_settings

    walkthrough = [result("ray-hparam-sweep", Outcome.planned, kind="RayCluster", namespace="research", cause=None,
                          since=None, audit_id=16, method="min-replicas-zero"), result()]
    longest = [*walkthrough, result(LONG, Outcome.skipped, namespace="platform-inference", cause=WIDEST,
                                    audit_id=123456, since=EARLIER),
               result(LONG[:40], Outcome.deferred, cause=SkipCause.over_cap, audit_id=99999, since=EARLIER)]
    ui = prefect_env["PREFECT_API_URL"].removesuffix("/api")
    with temporary_settings({PREFECT_API_URL: prefect_env["PREFECT_API_URL"]}), \
            SyncPrefectClient(prefect_env["PREFECT_API_URL"]) as client:
        for name, results in (("walkthrough", walkthrough), ("longest", longest)):
            rows = [{k: str(v) for k, v in row.items()} for row in decision_rows(results)]
            artifact = client.create_artifact(ArtifactCreate(key="gpuaas-reclaim-decisions", type="table", data=rows,
                                                             description="Reclaim decisions (dry-run)"))
            shown = _page(browser, f"{ui}/artifacts/artifact/{artifact.id}", [rows[-1]["result"]],
                          tmp_path / f"reclaim-table-{name}.png")
            width, room = _table_fits(browser)
            assert 0 < width <= room, f"{name}: the decisions table is {width} px wide in a {room} px box"
            if name == "walkthrough":  # short names stay whole, and the pointer to the earlier row is on screen
                assert "InferenceService platform/llm-legacy" in shown
                assert "deferred: over the cap (unchanged since #7)" in shown
