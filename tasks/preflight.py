"""Tasks of the preflight flow: the checks (one read of each source), and their table on the run's page."""

from __future__ import annotations

from collections.abc import Sequence

from gpuaas.operations import preflight as operation
from gpuaas.settings import GpuaasSettings
from tasks._artifacts import summary_artifact
from tasks._options import gpuaas_task


@gpuaas_task("preflight-checks")
def run_checks(settings: GpuaasSettings, writes_of: list[str] | None) -> list[operation.Check]:
    """Every check; a source that fails is a failed check, so there is nothing to retry."""
    return operation.preflight(settings, writes_of=writes_of)


def publish_checks(checks: Sequence[operation.Check]) -> None:
    """The checks on the run's page, as a list: a table would cut the long details off at the screen's edge."""
    lines = [operation.headline(checks), ""]
    lines += [f"- **{c.name}** ({c.verdict.value}): {c.detail}" for c in checks]
    summary_artifact(key="gpuaas-preflight", markdown="\n".join(lines))
