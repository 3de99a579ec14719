"""Prefect artifacts of a flow run: always described, always on the flow run's page.

Why not ``create_markdown_artifact`` as is: called inside a task it files the artifact under the
task run, so the run page shows nothing until one opens that task, and without a description
its card reads "No description". Here every artifact needs a description (the card's one line)
and is attached to the flow run only, wherever it is created.

Outside a Prefect flow run (the command line running a flow directly) nothing is published: the
command prints the same rows itself.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from tasks._steps import in_flow_run

__all__ = ["headline_of", "markdown_artifact", "summary_artifact", "table_artifact"]


def _publish(artifact: Any) -> None:
    from prefect import runtime

    flow_run_id = runtime.flow_run.id
    if not flow_run_id:
        return
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import ArtifactCreate

    with get_client(sync_client=True) as client:
        client.create_artifact(ArtifactCreate(
            key=artifact.key, type=artifact.type, description=artifact.description,
            data=artifact.format(_sync=True), flow_run_id=UUID(str(flow_run_id)), task_run_id=None))


def markdown_artifact(*, key: str, markdown: str, description: str) -> None:
    """Publish ``markdown`` on the flow run's page under ``key`` (lowercase and dashes)."""
    if not in_flow_run():
        return
    from prefect.artifacts import MarkdownArtifact

    _publish(MarkdownArtifact(key=key, markdown=markdown, description=description))


def headline_of(markdown: str) -> str:
    """The first non-empty line of ``markdown``, without heading marks: a summary's headline sentence."""
    return next((line.lstrip("# ").strip() for line in markdown.splitlines() if line.strip()), "")


def summary_artifact(*, key: str, markdown: str) -> None:
    """A summary whose first line is the run's headline: that line is also the card's description."""
    markdown_artifact(key=key, markdown=markdown, description=headline_of(markdown))


def table_artifact(*, key: str, table: list[dict[str, Any]] | dict[str, list[Any]], description: str) -> None:
    """Publish a table on the flow run's page under ``key`` (lowercase and dashes)."""
    if not in_flow_run():
        return
    from prefect.artifacts import TableArtifact

    _publish(TableArtifact(key=key, table=table, description=description))
