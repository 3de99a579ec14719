"""Reclaim: which GPU workloads are idle, which to stop this run, and the adaptive window that learns from
their idle spells, with the causal replay that the live flow and the backtests share."""

from gpuaas.policies.reclaim.adaptive_live import *  # noqa: F403
from gpuaas.policies.reclaim.adaptive_live import __all__ as _adaptive_live_all
from gpuaas.policies.reclaim.adaptive_window import *  # noqa: F403
from gpuaas.policies.reclaim.adaptive_window import __all__ as _adaptive_window_all
from gpuaas.policies.reclaim.causes import *  # noqa: F403
from gpuaas.policies.reclaim.causes import __all__ as _causes_all
from gpuaas.policies.reclaim.cold_start import *  # noqa: F403
from gpuaas.policies.reclaim.cold_start import __all__ as _cold_start_all
from gpuaas.policies.reclaim.coverage import *  # noqa: F403
from gpuaas.policies.reclaim.coverage import __all__ as _coverage_all
from gpuaas.policies.reclaim.idle import *  # noqa: F403
from gpuaas.policies.reclaim.idle import __all__ as _idle_all
from gpuaas.policies.reclaim.opt_out import *  # noqa: F403
from gpuaas.policies.reclaim.opt_out import __all__ as _opt_out_all
from gpuaas.policies.reclaim.plan import *  # noqa: F403
from gpuaas.policies.reclaim.plan import __all__ as _plan_all
from gpuaas.policies.reclaim.refit import *  # noqa: F403
from gpuaas.policies.reclaim.refit import __all__ as _refit_all
from gpuaas.policies.reclaim.replay import *  # noqa: F403
from gpuaas.policies.reclaim.replay import __all__ as _replay_all
from gpuaas.policies.reclaim.run_stream import *  # noqa: F403
from gpuaas.policies.reclaim.run_stream import __all__ as _run_stream_all
from gpuaas.policies.reclaim.spell_survival import *  # noqa: F403
from gpuaas.policies.reclaim.spell_survival import __all__ as _spell_survival_all

__all__ = [*_adaptive_live_all, *_adaptive_window_all, *_causes_all, *_cold_start_all, *_coverage_all, *_idle_all, *_opt_out_all, *_plan_all, *_refit_all, *_replay_all, *_run_stream_all, *_spell_survival_all]
