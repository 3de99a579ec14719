"""Report builders: pure functions from snapshots and decisions to rows, markdown and Pushgateway metrics."""

from reports._format import *  # noqa: F403
from reports._format import __all__ as _format_all

__all__ = [*_format_all]
