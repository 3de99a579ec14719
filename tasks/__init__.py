"""Prefect tasks: retries, timeouts and logging around the library's plain functions.

Nothing here decides anything; decisions live in ``gpuaas.policies`` and are pure.
"""

from tasks._artifacts import markdown_artifact, summary_artifact, table_artifact
from tasks._options import IO_TASK_OPTIONS, current_run_id, gpuaas_task, push_or_warn, retry_options, unwalked
from tasks._steps import OUTCOME_SAYS, PlainState, failed_state, run_logger, run_retried

__all__ = ["IO_TASK_OPTIONS", "OUTCOME_SAYS", "PlainState", "current_run_id", "failed_state", "gpuaas_task", "run_retried",
           "markdown_artifact", "push_or_warn", "retry_options", "run_logger", "summary_artifact", "table_artifact",
           "unwalked"]
