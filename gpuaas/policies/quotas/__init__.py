"""Quotas: demand per ClusterQueue and flavor, the cohort tree it is shared in, and the planner that moves nominal quota."""

from gpuaas.policies.quotas.demand import *  # noqa: F403
from gpuaas.policies.quotas.demand import __all__ as _demand_all
from gpuaas.policies.quotas.plan import *  # noqa: F403
from gpuaas.policies.quotas.plan import __all__ as _plan_all
from gpuaas.policies.quotas.resources import *  # noqa: F403
from gpuaas.policies.quotas.resources import __all__ as _resources_all

__all__ = [*_demand_all, *_plan_all, *_resources_all]
