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

__all__ = ["headline_of", "markdown_artifact", "summary_artifact", "table_artifact", "without_headline"]


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


def without_headline(markdown: str) -> str:
    """``markdown`` from the line after its headline (the blank lines after it dropped too).

    A markdown that is its headline alone is kept whole: an artifact needs a body, and a page with
    only the description would read as if its content had failed to load.
    """
    lines = markdown.splitlines(keepends=True)
    first = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    rest = lines[first + 1:]
    while rest and not rest[0].strip():
        rest.pop(0)
    return "".join(rest) if rest else markdown


def summary_artifact(*, key: str, markdown: str) -> None:
    """A summary whose first line is the run's headline: that line becomes the artifact's description only.

    The Prefect UI shows the description above the markdown on the artifact's page, and alone on its
    card (the run page's Artifacts tab, the artifacts list), so the headline published in both places
    read twice on the page; as the description it is still on every card and page that shows the artifact.
    """
    markdown_artifact(key=key, markdown=without_headline(markdown), description=headline_of(markdown))


def table_artifact(*, key: str, table: list[dict[str, Any]] | dict[str, list[Any]], description: str) -> None:
    """Publish a table on the flow run's page under ``key`` (lowercase and dashes)."""
    if not in_flow_run():
        return
    from prefect.artifacts import TableArtifact

    _publish(TableArtifact(key=key, table=table, description=description))
