"""The deployments' ``pull`` step: start each flow run in the gpuaas project, wherever it lives.

Prefect's own ``set_working_directory`` needs a fixed path in ``prefect.yaml``; on any machine
where the project lives elsewhere the run crashes before a flow log exists, and the UI shows only
"Process exited with status code: 1". This step takes the directory from ``GPUAAS_PROJECT_DIR``
(templated by ``prefect deploy``, or by the worker at run time), else from where the ``flows``
package is installed — the checkout for ``pip install -e .``, the image's install otherwise — and
a missing directory is written to the flow run's own log, naming the path and the variable.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from uuid import UUID

__all__ = ["ProjectDirectoryMissing", "installed_project_dir", "set_project_directory"]

ENTRYPOINT_PACKAGE = "flows"


class ProjectDirectoryMissing(FileNotFoundError):
    """The pull step's directory does not exist or holds no ``flows/`` package."""


def installed_project_dir() -> Path:
    """The directory that holds the importable ``flows`` package (the deployments' entrypoints)."""
    spec = importlib.util.find_spec(ENTRYPOINT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ProjectDirectoryMissing(
            "gpuaas is not installed here: no 'flows' package to import; install the project "
            "(pip install -e . in the checkout) or set GPUAAS_PROJECT_DIR")
    return Path(next(iter(spec.submodule_search_locations))).resolve().parent


def _flow_run_logger(run_id: str) -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
    """Prefect's own logger for the run (``flow_run_logger``), as Prefect logs a run outside its context.

    The step runs before the flow is loaded, so there is no run context and no flow run object, only
    its id: Prefect's console format names ``flow_run_name`` and ``flow_name``, and a record without
    them is a "Logging error" with a traceback in the worker's log instead of the line. The helper
    fills them (``<unknown>`` without the run object). An id that is not a UUID is no run to log under.
    """
    try:
        from prefect.logging.loggers import flow_run_logger

        return flow_run_logger(flow_run_id=UUID(run_id))
    except (ImportError, ValueError):
        return logging.getLogger(__name__)


def _log_to_flow_run(message: str) -> None:
    """Error lines the Prefect UI shows under the flow run (the worker sets ``PREFECT__FLOW_RUN_ID``)."""
    run_id = os.environ.get("PREFECT__FLOW_RUN_ID", "").strip()
    if not run_id:  # not started by a worker: no run to show it under, the raised error says it
        logging.getLogger(__name__).error(message)
        return
    _flow_run_logger(run_id).error(message)
    try:
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=10)  # the process exits right after: send the line now
    except Exception:  # noqa: BLE001 - logging the cause must never hide the cause
        pass


def set_project_directory(directory: str = "") -> dict[str, str]:
    """Change into the project directory; returns ``{"directory": ...}`` like Prefect's own step.

    ``directory`` empty (``GPUAAS_PROJECT_DIR`` unset at deploy and at run time) means the
    installed project.
    """
    source = "GPUAAS_PROJECT_DIR" if directory.strip() else "the installed gpuaas project"
    try:
        path = Path(directory.strip()).expanduser() if directory.strip() else installed_project_dir()
        if not (path / ENTRYPOINT_PACKAGE).is_dir():
            raise ProjectDirectoryMissing(
                f"project directory {str(path)!r} (from {source}) "
                f"{'has no flows/ package' if path.is_dir() else 'does not exist'} on this machine; "
                "set GPUAAS_PROJECT_DIR to the gpuaas checkout or image path (see prefect.yaml), "
                "or unset it to use the installed project")
    except ProjectDirectoryMissing as exc:
        _log_to_flow_run(f"pull step failed: {exc}")
        raise
    os.chdir(path)
    return {"directory": os.getcwd()}
