"""Prefect Secret blocks as a settings source: the last, lowest-priority source of ``GpuaasSettings``.

A shared deployment keeps the source tokens and the database password in Prefect Secret
blocks (``prefect block create secret``, names in ``SECRET_BLOCKS``) rather than in the work
pool's environment. Being a pydantic-settings source, they reach every caller of
``load_settings()`` (every flow, the CLI, the benchmarks) through one path; a set environment
variable or an explicit argument wins, and a field already given is never looked up.

When the blocks are asked (``prefect_api_configured``), and why:

- ``PREFECT_API_URL`` is in the environment: a Prefect server is named, so the blocks are there;
- Prefect is already imported and its current settings name an API (a profile, the test harness);
- a flow or task run is active in this process (the ephemeral server of a plain ``flow()`` call).

Otherwise never: this module does not import Prefect until it asks (``import prefect`` costs
about a second), and with no API configured an ask would start a temporary Prefect server
(several seconds) or fail; a command at the terminal must not pay that for a lookup that can
only come back empty. Nothing Prefect-specific is imported at module level, so the library
stays Prefect-free.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import PydanticBaseSettingsSource

__all__ = ["SECRET_BLOCKS", "PrefectSecretBlocks", "prefect_api_configured", "secret_block"]

SECRET_BLOCKS = {"prometheus_token": "gpuaas-prometheus-token", "opencost_token": "gpuaas-opencost-token",
                 "database_password": "gpuaas-database-password"}
"""Settings field -> the name of the Prefect Secret block that may hold it."""


def prefect_api_configured() -> bool:
    """True when a Prefect API is there to ask without starting one (see the module docstring)."""
    if os.environ.get("PREFECT_API_URL"):
        return True
    context = sys.modules.get("prefect.context")
    if context is None:  # Prefect not imported: no run is active and no profile was read
        return False
    if context.FlowRunContext.get() is not None or context.TaskRunContext.get() is not None:
        return True
    from prefect.settings import get_current_settings  # already imported with prefect.context: free

    return bool(get_current_settings().api.url)


def secret_block(name: str) -> str | None:
    """The Secret block's value, or None when there is no such block (or no Prefect API answers)."""
    try:
        from prefect.blocks.system import Secret

        value = Secret.load(name).get()  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - a missing block is ValueError; an unreachable API is the same answer
        return None
    return str(value) if value else None


class PrefectSecretBlocks(PydanticBaseSettingsSource):
    """The fields of ``SECRET_BLOCKS`` that no earlier source set, from their blocks."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: ``__call__`` reads only the block-backed fields (required by the base class)."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        wanted = {f: block for f, block in SECRET_BLOCKS.items() if self.current_state.get(f) is None}
        if not wanted or not prefect_api_configured():
            return {}
        found = {field: secret_block(block) for field, block in wanted.items()}
        return {field: value for field, value in found.items() if value}
