"""Deadlines: which deadlines hold on today's GPUs, the pools a live cluster gives them, and the holds that nudge Kueue toward the plan."""

from gpuaas.policies.deadlines.marks import *  # noqa: F403
from gpuaas.policies.deadlines.marks import __all__ as _marks_all
from gpuaas.policies.deadlines.nudges import *  # noqa: F403
from gpuaas.policies.deadlines.nudges import __all__ as _nudges_all
from gpuaas.policies.deadlines.pools import *  # noqa: F403
from gpuaas.policies.deadlines.pools import __all__ as _pools_all
from gpuaas.policies.deadlines.problem import *  # noqa: F403
from gpuaas.policies.deadlines.problem import __all__ as _problem_all
from gpuaas.policies.deadlines.profile import *  # noqa: F403
from gpuaas.policies.deadlines.profile import __all__ as _profile_all
from gpuaas.policies.deadlines.stranded import *  # noqa: F403
from gpuaas.policies.deadlines.stranded import __all__ as _stranded_all

__all__ = [*_marks_all, *_nudges_all, *_pools_all, *_problem_all, *_profile_all, *_stranded_all]
