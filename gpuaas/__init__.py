"""gpuaas: reclaim idle GPUs, rebalance Kueue quotas, report cost per verified outcome.

The library never imports Prefect: ``flows/`` and ``tasks/`` wrap it. Dependencies point one
way: deployments -> flows -> tasks -> gpuaas. The one exception is the CLI's flow-running
commands, which import ``flows`` and ``reports`` lazily, inside the command (``gpuaas.cli._flows``).
"""

from typing import TYPE_CHECKING, Any

from gpuaas.errors import *  # noqa: F403
from gpuaas.errors import __all__ as _errors_all

if TYPE_CHECKING:
    from gpuaas.policy import Policy, load_policy
    from gpuaas.settings import GpuaasSettings, load_settings

__all__ = [*_errors_all, "GpuaasSettings", "Policy", "load_policy", "load_settings"]
__version__ = "0.1.0"

_LAZY = {"GpuaasSettings": "gpuaas.settings", "load_settings": "gpuaas.settings",
         "Policy": "gpuaas.policy", "load_policy": "gpuaas.policy"}


def __getattr__(name: str) -> Any:
    """Settings and policy load on first use: importing any ``gpuaas`` module (the command line's
    ``--help``) must not pay for pydantic first."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gpuaas' has no attribute {name!r}")
