"""The typed records and the snapshot that policies read; frozen, no I/O."""

from gpuaas.models._records import *  # noqa: F403
from gpuaas.models._records import __all__ as _records_all
from gpuaas.models._snapshot import *  # noqa: F403
from gpuaas.models._snapshot import __all__ as _snapshot_all

__all__ = [*_records_all, *_snapshot_all]
