"""No credential leaves gpuaas: planted secrets never appear in output, logs, artifacts or the audit log.

Planted: a Prometheus bearer token, a Prometheus header's value, an OpenCost bearer token and header
value, a database password (the real
PostgreSQL, which trusts any password on loopback, so the runs succeed), a password in a Prometheus URL that cannot
be reached (so the error paths run too), an ``?access_token=`` in one (refused when the settings load: a base URL
takes no query), and a database URL that cannot be reached. The real commands run (collect, reclaim, audit, all ``--format json``) on the embedded
cluster; then stdout, stderr, every log record, every Prefect artifact, every audit row and
every stored snapshot summary are searched for each planted string.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from gpuaas.cli._common import EXIT_DEGRADED
from gpuaas.cli.app import app
from gpuaas.cluster.runner import EmbeddedCluster
from gpuaas.cluster.services import fresh_schema_url
from gpuaas.cluster.testbed import write_policy
from gpuaas.errors import SourceUnavailable, redact_endpoint, scrub_secrets
from gpuaas.models import Snapshot
from gpuaas.settings import load_settings
from gpuaas.store import open_store
from tests.scenarios import point_at

pytestmark = [pytest.mark.integration, pytest.mark.flow]

PROM_TOKEN = "PLANTED-prom-bearer-5d1e"
DB_PASSWORD = "PLANTED-db-password-77aa"
URL_PASSWORD = "PLANTED-url-password-c0de"
URL_TOKEN = "PLANTED-url-token-b33f"
HEADER_VALUE = "PLANTED-header-value-9e1d"
OPENCOST_TOKEN = "PLANTED-opencost-bearer-41f0"
OPENCOST_HEADER = "PLANTED-opencost-header-a7c2"
PLANTED = (PROM_TOKEN, DB_PASSWORD, URL_PASSWORD, URL_TOKEN, HEADER_VALUE, OPENCOST_TOKEN, OPENCOST_HEADER)


@pytest.fixture()
def prefect_logs(caplog: pytest.LogCaptureFixture, prefect_harness: None) -> Iterator[None]:
    """Prefect's loggers do not propagate to the root (and the CLI quiets them): configure Prefect's
    logging now (a first flow run would otherwise do it and drop our handler), then listen on them."""
    from prefect.logging.configuration import setup_logging
    from prefect.settings import PREFECT_LOGGING_LEVEL, temporary_settings

    loggers = [logging.getLogger(n) for n in ("prefect", "prefect.flow_runs", "prefect.task_runs")]
    with temporary_settings(updates={PREFECT_LOGGING_LEVEL: "DEBUG"}):
        setup_logging(incremental=False)
        for logger in loggers:
            logger.addHandler(caplog.handler)
        try:
            yield
        finally:
            for logger in loggers:
                logger.removeHandler(caplog.handler)
    setup_logging(incremental=False)


@pytest.fixture(scope="module")
def cluster(reclaim_fleet: EmbeddedCluster) -> EmbeddedCluster:
    return reclaim_fleet


def _prefect_records() -> tuple[str, str]:
    """Every artifact, and every run log line the flows sent to the Prefect API."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        artifacts = json.dumps([{"key": a.key, "data": a.data, "description": a.description}
                                for a in client.read_artifacts()], default=str)
        logs = "\n".join(f"{log.name} {log.message}" for log in client.read_logs())
    return artifacts, logs


def _stored() -> str:
    store = open_store(load_settings())
    try:
        rows = [r.model_dump(mode="json") for r in store.audit(limit=None)]
        latest = store.latest_snapshot()
    finally:
        store.close()
    assert latest is not None
    sources = {n: s.as_dict() for n, s in Snapshot.from_json(latest.payload["snapshot"]).sources.items()}
    assert "127.0.0.1" in sources["prometheus"]["error"]  # the failure says where, without the secrets
    return json.dumps({"audit": rows, "summary": latest.summary, "sources": sources})


def test_planted_credentials_appear_nowhere(cluster: EmbeddedCluster, postgres_url: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                                            prefect_harness: None, prefect_logs: None) -> None:
    db_url = make_url(fresh_schema_url(postgres_url, "creds")).set(password=DB_PASSWORD)
    url = db_url.render_as_string(hide_password=False)
    point_at(cluster, monkeypatch, database_url=url, prometheus_token=PROM_TOKEN,
             prometheus_headers=f'{{"X-Api-Key": "{HEADER_VALUE}"}}', opencost_token=OPENCOST_TOKEN,
             opencost_headers=f'{{"X-Api-Key": "{OPENCOST_HEADER}"}}',
             policy_file=write_policy(tmp_path / "policy.yaml", max_actions_per_run=2))
    caplog.set_level(logging.DEBUG)
    runner = CliRunner()
    outputs, documents = [], []
    for args in (["collect", "--format", "json"], ["reclaim", "--format", "json"], ["audit", "list", "--format", "json"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout + result.stderr)  # progress lines go to stderr: both are searched
        documents.append(json.loads(result.stdout))
    assert documents[1]["decisions"]  # the dry run decided and audited something

    # A token in the URL's query: refused when the settings load, without showing it.
    monkeypatch.setenv("GPUAAS_PROMETHEUS_URL", f"http://gpuaas:{URL_PASSWORD}@127.0.0.1:9/?access_token={URL_TOKEN}")
    refused = runner.invoke(app, ["collect", "--format", "json"])
    assert refused.exit_code == 1 and "GPUAAS_PROMETHEUS_URL" in refused.stderr, refused.output
    outputs.append(refused.stdout + refused.stderr)

    # Prometheus unreachable at a URL carrying a password: the error paths.
    monkeypatch.setenv("GPUAAS_PROMETHEUS_URL", f"http://gpuaas:{URL_PASSWORD}@127.0.0.1:9/")
    monkeypatch.setenv("GPUAAS_RETRIES", "0")
    degraded = runner.invoke(app, ["collect", "--format", "json"])
    assert degraded.exit_code == EXIT_DEGRADED, degraded.output  # degraded is its own exit code, the JSON still printed
    assert json.loads(degraded.stdout)["sources"]["prometheus"]["ok"] is False
    outputs.append(degraded.stdout + degraded.stderr)
    stored = _stored()

    # The database unreachable, through the console script (its error handler): one line, password hidden.
    env = {**os.environ, "GPUAAS_DATABASE_URL": db_url.set(port=1).render_as_string(hide_password=False)}
    down = subprocess.run([str(Path(sys.executable).with_name("gpuaas")), "audit", "list", "--format", "json"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert down.returncode == 1 and down.stderr.startswith("error:") and "***" in down.stderr, down.stderr
    assert "Traceback" not in down.stderr and down.stdout == ""
    outputs.append(down.stdout + down.stderr)

    local = "\n".join(f"{r.getMessage()} {r.exc_text or ''} {r.args!r}" for r in caplog.records)
    artifacts, run_logs = _prefect_records()
    searched = {"cli output": "\n".join(outputs), "local logs": local, "run logs": run_logs,
                "artifacts": artifacts, "store": stored}
    assert [k for k, v in searched.items() if not v] == []
    for where, text in searched.items():
        for secret in PLANTED:
            assert secret not in text, f"{secret} found in {where}"


@pytest.mark.parametrize(("url", "shown"), [
    ("http://u:p4ss@prom:9090/", "http://u:***@prom:9090/"),
    ("http://tok3n@prom:9090/", "http://***@prom:9090/"),
    ("https://prom/api?access_token=t0k&x=1", "https://prom/api?access_token=***&x=1"),
    ("https://oc/?apiKey=k3y&sig=s1g", "https://oc/?apiKey=***&sig=***"),
    ("http://prom:9090/", "http://prom:9090/"),
], ids=["password", "bare-token-user", "query-token", "key-and-sig", "clean"])
def test_source_errors_carry_the_endpoint_without_its_credentials(url: str, shown: str) -> None:
    assert redact_endpoint(url) == shown
    error = SourceUnavailable("HTTP 503", source="prometheus", url=url)
    assert error.url == shown and str(error) == f"Prometheus at {shown}: HTTP 503"


def test_library_messages_quoting_the_url_are_scrubbed() -> None:
    url = "http://gpuaas:p%40ss-w0rd@prom:9090/?access_token=t0k3n-abc"
    message = "Max retries exceeded with url: /?access_token=t0k3n-abc (user gpuaas:p%40ss-w0rd, p@ss-w0rd)"
    assert scrub_secrets(message, url) == "Max retries exceeded with url: /?access_token=*** (user gpuaas:***, ***)"
    error = SourceUnavailable(message, source="prometheus", url=url)
    assert "t0k3n" not in str(error) and "w0rd" not in str(error)
