"""Cost per verified outcome: the report, the outcomes it counts, the GPU-hour funnel and serving capacity."""

from gpuaas.policies.cost.capacity import *  # noqa: F403
from gpuaas.policies.cost.capacity import __all__ as _capacity_all
from gpuaas.policies.cost.funnel import *  # noqa: F403
from gpuaas.policies.cost.funnel import __all__ as _funnel_all
from gpuaas.policies.cost.outcomes import *  # noqa: F403
from gpuaas.policies.cost.outcomes import __all__ as _outcomes_all
from gpuaas.policies.cost.report import *  # noqa: F403
from gpuaas.policies.cost.report import __all__ as _report_all
from gpuaas.policies.cost.services import *  # noqa: F403
from gpuaas.policies.cost.services import __all__ as _services_all

__all__ = [*_capacity_all, *_funnel_all, *_outcomes_all, *_report_all, *_services_all]
