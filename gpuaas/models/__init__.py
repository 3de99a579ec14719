"""The typed records and the snapshot that policies read, and Kueue's cohort tree as a snapshot shows it;
frozen, no I/O."""

from gpuaas.models._cohort_tree import *  # noqa: F403
from gpuaas.models._cohort_tree import __all__ as _cohort_tree_all
from gpuaas.models._cost import *  # noqa: F403
from gpuaas.models._cost import __all__ as _cost_all
from gpuaas.models._job_kinds import *  # noqa: F403
from gpuaas.models._job_kinds import __all__ as _job_kinds_all
from gpuaas.models._keys import *  # noqa: F403
from gpuaas.models._keys import __all__ as _keys_all
from gpuaas.models._limits import *  # noqa: F403
from gpuaas.models._limits import __all__ as _limits_all
from gpuaas.models._opt_out import *  # noqa: F403
from gpuaas.models._opt_out import __all__ as _opt_out_all
from gpuaas.models._outcome import *  # noqa: F403
from gpuaas.models._outcome import __all__ as _outcome_all
from gpuaas.models._records import *  # noqa: F403
from gpuaas.models._records import __all__ as _records_all
from gpuaas.models._selector import *  # noqa: F403
from gpuaas.models._selector import __all__ as _selector_all
from gpuaas.models._snapshot import *  # noqa: F403
from gpuaas.models._snapshot import __all__ as _snapshot_all
from gpuaas.models._telemetry import *  # noqa: F403
from gpuaas.models._telemetry import __all__ as _telemetry_all

__all__ = [*_cohort_tree_all, *_cost_all, *_job_kinds_all, *_keys_all, *_limits_all, *_opt_out_all, *_outcome_all,
           *_records_all, *_selector_all, *_snapshot_all, *_telemetry_all]
