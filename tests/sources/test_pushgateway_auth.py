"""The Pushgateway is sent its credentials, and nothing that names it shows them.

A stub gateway on loopback records each request's method, path and ``Authorization`` header, and
answers with the status a case sets. Covered: a bearer token from its file (read again at each push),
basic auth from the URL's user-info (percent-encoded), and from the URL's user with
``GPUAAS_PUSHGATEWAY_PASSWORD``; the withdrawal carries them too; no request line carries user-info; a
refusal (401) is a permanent one-line ``SourceError`` and an unreachable gateway a transient one, neither
showing the password; a redirect is not followed; credentials that cannot go together are refused
when the settings load, naming the variables.
"""

from __future__ import annotations

import threading
from base64 import b64encode
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import SecretStr

from gpuaas.errors import ConfigError, SourceError, SourceUnavailable
from gpuaas.pushgateway import MetricFamily, auth_headers, base_url, delete_metrics, push_metrics
from gpuaas.settings import GpuaasSettings, load_settings

PASSWORD = "PLANTED-pgw-p@ss"
ENCODED = "PLANTED-pgw-p%40ss"


@dataclass
class StubGateway:
    """What the stub received, and what it answers: ``status`` (and ``location`` for a redirect)."""

    url: str
    received: list[tuple[str, str, str | None]] = field(default_factory=list)
    status: int = 200
    location: str | None = None


@pytest.fixture
def gateway() -> Iterator[StubGateway]:
    stub = StubGateway("")

    class Handler(BaseHTTPRequestHandler):
        timeout = 5  # a request that stalls ends the handler, never the test

        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            stub.received.append((self.command, self.path, self.headers.get("Authorization")))
            self.send_response(stub.status)
            if stub.location:
                self.send_header("Location", stub.location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_PUT = do_POST = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _with_user(url: str, userinfo: str) -> str:
    return url.replace("http://", f"http://{userinfo}@")


def _basic(user: str, password: str) -> str:
    return "Basic " + b64encode(f"{user}:{password}".encode()).decode()


def _families() -> list[MetricFamily]:
    return [MetricFamily("gpuaas_test_value", "a test gauge", ("namespace",)).add(1, "team-a")]


def test_a_bearer_token_file_is_sent_and_read_again_at_each_push(gateway: StubGateway, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken-one\n")
    settings = GpuaasSettings(pushgateway_url=gateway.url, pushgateway_token_file=token)
    assert push_metrics(settings, "gpuaas_test", _families()) == 1
    token.write_text("t0ken-two\n")  # rotated by the kubelet under a long-lived worker
    delete_metrics(settings, "gpuaas_test")
    assert gateway.received == [("PUT", "/metrics/job/gpuaas_test", "Bearer t0ken-one"),
                                ("DELETE", "/metrics/job/gpuaas_test", "Bearer t0ken-two")]


def test_a_bearer_token_setting_is_sent(gateway: StubGateway) -> None:
    push_metrics(GpuaasSettings(pushgateway_url=gateway.url, pushgateway_token=SecretStr("t0ken")), "gpuaas_test", _families())
    assert gateway.received == [("PUT", "/metrics/job/gpuaas_test", "Bearer t0ken")]


def test_the_urls_user_info_is_sent_as_basic_auth_and_not_as_a_host(gateway: StubGateway) -> None:
    """``http://user:pass@host`` was read as a host name by urllib (``Name or service not known``)."""
    settings = GpuaasSettings(pushgateway_url=_with_user(gateway.url, f"gpuaas:{ENCODED}"))
    push_metrics(settings, "gpuaas_test", _families())
    delete_metrics(settings, "gpuaas_test")
    assert gateway.received == [("PUT", "/metrics/job/gpuaas_test", _basic("gpuaas", PASSWORD)),
                                ("DELETE", "/metrics/job/gpuaas_test", _basic("gpuaas", PASSWORD))]


def test_the_password_setting_goes_with_the_urls_user(gateway: StubGateway, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_PUSHGATEWAY_URL", _with_user(gateway.url, "gpuaas"))
    monkeypatch.setenv("GPUAAS_PUSHGATEWAY_PASSWORD", PASSWORD)
    push_metrics(load_settings(), "gpuaas_test", _families())
    assert gateway.received == [("PUT", "/metrics/job/gpuaas_test", _basic("gpuaas", PASSWORD))]


def test_without_credentials_no_authorization_is_sent(gateway: StubGateway) -> None:
    push_metrics(GpuaasSettings(pushgateway_url=gateway.url), "gpuaas_test", _families())
    assert gateway.received == [("PUT", "/metrics/job/gpuaas_test", None)]


def test_a_refusal_is_one_permanent_line_without_the_password(gateway: StubGateway) -> None:
    gateway.status = 401
    url = _with_user(gateway.url, f"gpuaas:{ENCODED}")
    with pytest.raises(SourceError) as raised:
        push_metrics(GpuaasSettings(pushgateway_url=url), "gpuaas_test", _families())
    assert not isinstance(raised.value, SourceUnavailable)  # a retry would send the same credentials
    message = str(raised.value)
    assert message.startswith(f"Pushgateway at {_with_user(gateway.url, 'gpuaas:***')}: push refused: HTTP 401 ")
    assert "\n" not in message and "PLANTED" not in message and "p%40ss" not in message


def test_an_unreachable_gateway_is_transient_and_never_shows_the_password(gateway: StubGateway) -> None:
    closed = gateway.url.rsplit(":", 1)[0] + ":9"  # the discard port: nothing listens on loopback
    url = _with_user(closed, f"gpuaas:{ENCODED}")
    with pytest.raises(SourceUnavailable) as raised:
        delete_metrics(GpuaasSettings(pushgateway_url=url, request_timeout_seconds=2), "gpuaas_test")
    message = str(raised.value)
    assert message.startswith(f"Pushgateway at {_with_user(closed, 'gpuaas:***')}: withdraw failed: "), message
    assert "refused" in message.lower() and "Name or service not known" not in message
    assert "PLANTED" not in message and "p%40ss" not in message


def test_a_redirect_is_not_followed_with_the_credentials(gateway: StubGateway, tmp_path: Path) -> None:
    gateway.status, gateway.location = 307, "http://127.0.0.1:9/elsewhere"
    settings = GpuaasSettings(pushgateway_url=gateway.url, pushgateway_token=SecretStr("t0ken"))
    with pytest.raises(SourceError, match="a redirect, not followed") as raised:
        push_metrics(settings, "gpuaas_test", _families())
    assert not isinstance(raised.value, SourceUnavailable)
    assert len(gateway.received) == 1


@pytest.mark.parametrize(("env", "says"), [
    ({"GPUAAS_PUSHGATEWAY_URL": "http://gpuaas:pw@pgw:9091", "GPUAAS_PUSHGATEWAY_TOKEN": "t0ken"},
     "GPUAAS_PUSHGATEWAY_URL names a user (basic auth), and GPUAAS_PUSHGATEWAY_TOKEN or its file is set"),
    ({"GPUAAS_PUSHGATEWAY_URL": "http://pgw:9091", "GPUAAS_PUSHGATEWAY_PASSWORD": "pw"},
     "GPUAAS_PUSHGATEWAY_PASSWORD is set, but GPUAAS_PUSHGATEWAY_URL names no user for it"),
    ({"GPUAAS_PUSHGATEWAY_URL": "http://gpuaas:pw@pgw:9091", "GPUAAS_PUSHGATEWAY_PASSWORD": "other"},
     "GPUAAS_PUSHGATEWAY_PASSWORD differs from the password in GPUAAS_PUSHGATEWAY_URL"),
    ({"GPUAAS_PUSHGATEWAY_URL": "http://pgw:9091", "GPUAAS_PUSHGATEWAY_TOKEN": "t0ken",
      "GPUAAS_PUSHGATEWAY_TOKEN_FILE": "TOKEN_FILE"},
     "GPUAAS_PUSHGATEWAY_TOKEN and GPUAAS_PUSHGATEWAY_TOKEN_FILE are both set"),
], ids=["basic-and-token", "password-without-user", "two-passwords", "two-tokens"])
def test_credentials_that_cannot_go_together_are_refused_naming_the_variables(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], says: str) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken")
    for name, value in env.items():
        monkeypatch.setenv(name, str(token) if value == "TOKEN_FILE" else value)
    with pytest.raises(ConfigError) as raised:
        load_settings()
    message = str(raised.value)
    assert message.startswith(f"environment: {says}"), message
    assert "pw" not in message.replace("GPUAAS_PUSHGATEWAY", "") and "t0ken" not in message


def test_a_probe_of_the_gateway_gets_the_url_without_user_info_and_the_header(gateway: StubGateway) -> None:
    settings = GpuaasSettings(pushgateway_url=_with_user(gateway.url, "gpuaas"),
                              pushgateway_password=SecretStr(PASSWORD))
    assert base_url(settings) == gateway.url
    assert auth_headers(settings) == {"Authorization": _basic("gpuaas", PASSWORD)}
    assert auth_headers(GpuaasSettings(pushgateway_url=gateway.url)) == {}


def test_the_preflight_probes_the_gateway_with_the_pushes_credentials(gateway: StubGateway) -> None:
    """Behind basic auth, a probe without the credentials read "refused" while every push landed."""
    from gpuaas.operations.preflight import pushgateway_check
    from gpuaas.preflight_checks import Verdict

    check = pushgateway_check(GpuaasSettings(pushgateway_url=_with_user(gateway.url, f"gpuaas:{ENCODED}")))
    assert (check.verdict, gateway.received) == (Verdict.ok, [("GET", "/-/ready", _basic("gpuaas", PASSWORD))])
    gateway.status = 401
    refused = pushgateway_check(GpuaasSettings(pushgateway_url=_with_user(gateway.url, f"gpuaas:{ENCODED}")))
    assert refused.verdict is Verdict.failed and "PLANTED" not in refused.detail and "p%40ss" not in refused.detail
