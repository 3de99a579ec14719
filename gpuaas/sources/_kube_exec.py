"""A kubeconfig's exec credential plugin (``aws eks get-token``, ``gke-gcloud-auth-plugin``, ``kubelogin``), bounded
and named.

The official client runs the plugin while it loads the kubeconfig, and leaves two gaps a scheduled run cannot
afford: it waits for the plugin without a limit (a plugin stuck on a browser login or an unreachable identity
provider hangs the run for ever, past every request timeout), and when the plugin fails or answers without a
credential it logs the error at the root logger and goes on with no credentials at all (the API server then
refuses every request as anonymous, and the cause is a stray ``ERROR:root:exec: …`` line). ``loading_credentials``
closes both for the loads gpuaas makes: the plugin is killed after the run's request timeout (unless a person is
at the terminal, logging in), and what the client would have logged is collected, for the caller to raise as the
one line that names the kubeconfig.

The client's own module globals are replaced once, by shims that change nothing outside ``loading_credentials``
(in another thread, or when the client refreshes an expired credential mid-request, it behaves as it always did).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

__all__ = ["loading_credentials"]

_local = threading.local()


class _BoundedPopen(subprocess.Popen[Any]):
    """``subprocess.Popen`` whose ``communicate`` gives up after the bound of the load in progress, if any."""

    def communicate(self, input: Any = None, timeout: float | None = None) -> tuple[Any, Any]:  # noqa: A002
        bound = getattr(_local, "timeout", None)
        if bound is None or timeout is not None:
            return super().communicate(input, timeout)
        try:
            return super().communicate(input, bound)
        except subprocess.TimeoutExpired:
            self.kill()
            super().communicate()
            from kubernetes.config.config_exception import ConfigException

            args = self.args
            command = str(args[0] if isinstance(args, list | tuple) and args else args)
            raise ConfigException(f"exec: the credential plugin {command} gave no answer in {bound:g} s "
                                  "(GPUAAS_REQUEST_TIMEOUT_SECONDS): stopped") from None


def _error(message: object, *args: Any, **kwargs: Any) -> None:
    """The client's ``logging.error``: collected while a load is in progress in this thread, else logged."""
    collected = getattr(_local, "errors", None)
    if collected is None:
        logging.error(message, *args, **kwargs)
    else:
        collected.append(str(message) % args if args else str(message))


def _interactive() -> bool:
    """Whether the client would run the plugin interactively (its own test: standard output is a terminal)."""
    return hasattr(sys.stdout, "isatty") and sys.stdout.isatty()


def _install() -> None:
    """Point the client's exec provider and kubeconfig loader at the shims (once; idempotent)."""
    from kubernetes.config import exec_provider, kube_config

    if not isinstance(exec_provider.subprocess, SimpleNamespace):
        exec_provider.subprocess = SimpleNamespace(Popen=_BoundedPopen, PIPE=subprocess.PIPE)
    if not isinstance(kube_config.logging, SimpleNamespace):
        kube_config.logging = SimpleNamespace(error=_error)


@contextmanager
def loading_credentials(timeout: float) -> Iterator[list[str]]:
    """Within: an exec plugin the kubeconfig loader runs is stopped after ``timeout`` seconds, and the errors the
    loader would log (the plugin failed, timed out, or answered without a credential) fill the list yielded.

    Not stopped where a person is at the terminal: the client then hands the plugin this terminal for a login
    (a browser flow, a second factor) that takes as long as the person does."""
    _install()
    errors: list[str] = []
    _local.timeout, _local.errors = (None if _interactive() else timeout), errors
    try:
        yield errors
    finally:
        _local.timeout = _local.errors = None
