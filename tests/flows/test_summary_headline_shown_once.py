"""A summary artifact shows its run's headline once: as its description, not again as the markdown's first line.

The Prefect UI puts an artifact's description above its markdown on the artifact's page, and alone on its
card (the run page's Artifacts tab, the artifacts list); a headline in both read twice on the page.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.flow]

HEADLINE = "Stopped 2 idle workloads, freeing 2 GPUs ($6.00 per hour); to reverse: gpuaas undo 3 5."
SUMMARY = f"{HEADLINE}\n\n# gpuaas reclaim (apply)\n\n- **2** GPUs: **2** with their quota returned to the queue\n"


def _published(key: str, markdown: str) -> Any:
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    from tasks import summary_artifact

    @flow(name="summary-artifact-probe")
    def probe() -> None:
        summary_artifact(key=key, markdown=markdown)

    state = probe(return_state=True)
    run_id = state.state_details.flow_run_id
    assert state.is_completed() and run_id is not None, state.message
    with get_client(sync_client=True) as client:
        [artifact] = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=[key]), flow_run_id=ArtifactFilterFlowRunId(any_=[run_id])))
    return artifact


def test_the_headline_is_the_description_and_not_the_markdown(prefect_harness: None) -> None:
    artifact = _published("probe-summary", SUMMARY)
    assert artifact.description == HEADLINE  # the card on the run page and in the artifacts list
    assert HEADLINE not in str(artifact.data)  # the page shows the description above the markdown: once
    assert str(artifact.data) == "# gpuaas reclaim (apply)\n\n- **2** GPUs: **2** with their quota returned to the queue\n"


def test_a_summary_that_is_its_headline_alone_keeps_a_body(prefect_harness: None) -> None:
    artifact = _published("probe-headline-only", f"{HEADLINE}\n")
    assert artifact.description == HEADLINE and str(artifact.data).strip() == HEADLINE
