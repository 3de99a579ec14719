"""gpuaas: reclaim idle GPUs, rebalance Kueue quotas, report cost per verified outcome.

The library never imports Prefect: ``flows/`` and ``tasks/`` wrap it. Dependencies point one
way: deployments -> flows -> tasks -> gpuaas. The one exception is the CLI's flow-running
commands, which import ``flows`` and ``reports`` lazily, inside the command (``gpuaas.cli._flows``).
"""

from gpuaas.errors import *  # noqa: F403
from gpuaas.errors import __all__ as _errors_all
from gpuaas.policy import Policy, load_policy
from gpuaas.settings import GpuaasSettings, load_settings

__all__ = [*_errors_all, "GpuaasSettings", "Policy", "load_policy", "load_settings"]
__version__ = "0.1.0"
