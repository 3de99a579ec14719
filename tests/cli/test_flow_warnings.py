"""A run called from the command line says after it what its steps warned of: a lock it could not renew, a
notification not delivered, a push that failed. Prefect's console handler is quiet for the command line, so
these reach the terminal only as the command's own ``warning:`` lines."""

from __future__ import annotations

import logging

import pytest

from gpuaas.cli._flows import _warnings_after


def test_the_steps_and_notification_warnings_are_said_after_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    with _warnings_after():
        logging.getLogger("tasks.writes").warning("could not renew the %r lock: %s", "cluster-writes", "db busy")
        logging.getLogger("gpuaas.notify").error("notification to %s not delivered", "http://127.0.0.1:9")
        logging.getLogger("gpuaas.run").warning("push to the Pushgateway failed")
        logging.getLogger("tasks.writes").info("an info line stays in the logs")
    err = capsys.readouterr().err.splitlines()
    assert err == ["warning: could not renew the 'cluster-writes' lock: db busy",
                   "warning: notification to http://127.0.0.1:9 not delivered",
                   "warning: push to the Pushgateway failed"]
