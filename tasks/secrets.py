"""Settings for a flow run: the environment first, then Prefect Secret blocks for the secrets.

A shared deployment keeps the Prometheus token, the database password and the webhook URL in
Prefect Secret blocks (``prefect block create secret``, names below) instead of the work pool's
environment; a set environment variable wins. Values stay ``SecretStr`` inside the settings, so a
log line or an artifact that prints the settings shows ``**********``.
"""

from __future__ import annotations

from gpuaas.settings import GpuaasSettings, load_settings
from tasks._steps import in_flow_run

__all__ = ["SECRET_BLOCKS", "flow_settings", "secret_block"]

SECRET_BLOCKS = {"prometheus_token": "gpuaas-prometheus-token", "database_password": "gpuaas-database-password"}


def secret_block(name: str) -> str | None:
    """The Secret block's value, or None when there is no such block (or no Prefect API to ask)."""
    try:
        from prefect.blocks.system import Secret

        value = Secret.load(name).get()  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - a missing block is ValueError; no API at all is the same answer
        return None
    return str(value) if value else None


def flow_settings() -> GpuaasSettings:
    """The settings; in a Prefect flow run, secrets the environment leaves unset come from Secret blocks
    (elsewhere there is no Prefect API to hold blocks, and Prefect is not imported)."""
    settings = load_settings()
    if not in_flow_run():
        return settings
    overrides: dict[str, object] = {}
    for field, block in SECRET_BLOCKS.items():
        if getattr(settings, field) is None and (value := secret_block(block)):
            overrides[field] = value
    return load_settings(**overrides) if overrides else settings
