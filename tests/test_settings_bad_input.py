"""Settings values no fleet has are refused when the settings load, in one line naming the variable.

A number that is not finite (``inf``, ``nan``, ``1e400``) or past its range would pass a bare ``gt=0`` and fail
later, in the arithmetic of every request (``timestamp out of range for platform time_t``) or as retries
that never end; a source URL with a port no socket has would fail at the first request as ``not a valid
URL``, without the variable's name. A variable set to nothing is read as unset: ``Path("")`` is the
current directory, so ``GPUAAS_DATA_DIR=`` would put the database wherever the command ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from gpuaas.errors import ConfigError
from gpuaas.settings import GpuaasSettings, default_data_dir, load_settings


def _float_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every float setting, as its field path (``metrics.sample_interval_seconds``), nested models included."""
    found = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found += _float_fields(annotation, f"{prefix}{name}.")
        elif annotation is float or float in typing.get_args(annotation):
            found.append(prefix + name)
    return found


FLOAT_FIELDS = _float_fields(GpuaasSettings)


def test_the_float_settings_are_found() -> None:
    assert "request_timeout_seconds" in FLOAT_FIELDS and "metrics.sample_interval_seconds" in FLOAT_FIELDS


@pytest.mark.parametrize("path", FLOAT_FIELDS)
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "nan"])
def test_no_float_setting_takes_a_value_that_is_not_finite(path: str, value: float) -> None:
    name, _, nested = path.partition(".")
    given: dict[str, Any] = {name: {nested: value}} if nested else {name: value}
    with pytest.raises(ValidationError, match="finite number"):
        GpuaasSettings(**given)


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("GPUAAS_REQUEST_TIMEOUT_SECONDS", "inf", "Input should be a finite number"),
    ("GPUAAS_REQUEST_TIMEOUT_SECONDS", "1e400", "Input should be a finite number"),
    ("GPUAAS_RETRY_BACKOFF_SECONDS", "nan", "Input should be a finite number"),
    ("GPUAAS_METRICS__SAMPLE_INTERVAL_SECONDS", "inf", "Input should be a finite number"),
    ("GPUAAS_REQUEST_TIMEOUT_SECONDS", "1e9", "Input should be less than or equal to 3600"),
    ("GPUAAS_RETRIES", "1000", "Input should be less than or equal to 10"),
    ("GPUAAS_RETRY_BACKOFF_SECONDS", "1e6", "Input should be less than or equal to 60"),
    ("GPUAAS_WRITES_WAIT_SECONDS", "1e12", "Input should be less than or equal to 86400"),
    ("GPUAAS_WRITES_LEASE_SECONDS", "1e12", "Input should be less than or equal to 86400"),
], ids=["timeout-inf", "timeout-1e400", "backoff-nan", "sample-interval-inf", "timeout-1e9", "retries-1000",
        "backoff-1e6", "writes-wait-1e12", "writes-lease-1e12"])
def test_a_number_no_fleet_has_is_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value) == f"environment: {variable}: {says}"


@pytest.mark.parametrize(("url", "says"), [
    ("http://127.0.0.1:99999", "'http://127.0.0.1:99999': the port '99999' is not a number from 1 to 65535"),
    ("http://127.0.0.1:abc/", "'http://127.0.0.1:abc/': the port 'abc' is not a number from 1 to 65535"),
    ("http://[::1]:0", "'http://[::1]:0': the port '0' is not a number from 1 to 65535"),
    ("http://reader:s3cr3t@127.0.0.1:70000", "'http://reader:***@127.0.0.1:70000': the port '70000' is not a number "
                                             "from 1 to 65535"),
    ("http://[::1", "not a URL: Invalid IPv6 URL"),
], ids=["above-range", "not-a-number", "zero", "with-credentials", "unclosed-ipv6"])
@pytest.mark.parametrize("variable", ["GPUAAS_PROMETHEUS_URL", "GPUAAS_OPENCOST_URL", "GPUAAS_PUSHGATEWAY_URL"])
def test_a_source_url_with_a_bad_port_is_refused_at_load(
        monkeypatch: pytest.MonkeyPatch, variable: str, url: str, says: str) -> None:
    monkeypatch.setenv(variable, url)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value) == f"environment: {variable}: {says}"
    assert "s3cr3t" not in str(info.value)


@pytest.mark.parametrize(("url", "says"), [
    ("http://127.0.0.1:9090?x=1", "'http://127.0.0.1:9090' has a query string (?…)"),
    ("http://127.0.0.1:9090/#anchor", "'http://127.0.0.1:9090/' has a fragment (#…)"),
    ("http://127.0.0.1:9090?", "'http://127.0.0.1:9090' has a query string (?…)"),
    ("https://reader:s3cr3t@prom/prefix/?access_token=s3cr3t-t0ken#x",
     "'https://reader:***@prom/prefix/' has a query string (?…)"),
], ids=["query", "fragment", "empty-query", "with-credentials"])
@pytest.mark.parametrize("variable", ["GPUAAS_PROMETHEUS_URL", "GPUAAS_OPENCOST_URL", "GPUAAS_PUSHGATEWAY_URL"])
def test_a_source_url_with_a_query_or_fragment_is_refused_at_load(
        monkeypatch: pytest.MonkeyPatch, variable: str, url: str, says: str) -> None:
    """Each client appends its API's path to the base URL (``/api/v1/query``): after a ``?`` or a ``#`` the path is
    part of the query, every request goes to the base, and each fails as ``HTTP 405``, a run later and without the
    variable's name. Neither part is shown: a query may carry a token."""
    monkeypatch.setenv(variable, url)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value) == (f"environment: {variable}: {says}: a base URL takes none, as the API's paths are "
                               "appended to it; give the scheme, host, port and any path prefix only")
    assert "s3cr3t" not in str(info.value) and "x=1" not in str(info.value) and "anchor" not in str(info.value)


def test_a_url_with_a_port_in_range_or_none_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_PROMETHEUS_URL", "http://[::1]:65535/prometheus")
    monkeypatch.setenv("GPUAAS_OPENCOST_URL", "https://opencost.opencost.svc")
    settings = load_settings()
    assert settings.prometheus_url == "http://[::1]:65535/prometheus"
    assert settings.opencost_url == "https://opencost.opencost.svc"


@pytest.mark.parametrize("variable", ["GPUAAS_DATA_DIR", "GPUAAS_POLICY_FILE", "GPUAAS_CA_FILE",
                                      "GPUAAS_DATABASE_URL", "GPUAAS_KUBECONFIG", "GPUAAS_PROMETHEUS_URL",
                                      "GPUAAS_PROMETHEUS_TOKEN_FILE", "GPUAAS_METRICS__FB_USED", "GPUAAS_RETRIES"])
def test_a_variable_set_to_nothing_is_unset(monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.delenv("GPUAAS_DATA_DIR", raising=False)  # the test's own isolation sets it
    expected = load_settings()
    monkeypatch.setenv(variable, "")
    settings = load_settings()
    assert settings == expected
    assert settings.data_dir == default_data_dir()  # not Path(""), the current directory
    assert settings.database_url_value == f"sqlite:///{default_data_dir() / 'gpuaas.db'}"


def test_no_wait_between_two_tries_is_longer_than_the_cap() -> None:
    """The longest factor and the most retries the settings allow still wait at most five minutes a try."""
    from tasks._options import MAX_BACKOFF_S, exponential_backoff

    delays = exponential_backoff(backoff_factor=60)(10)
    assert len(delays) == 10 and delays[:3] == [60, 120, 240] and max(delays) == MAX_BACKOFF_S == 300


SECRET = "PLANTED-secret-6f2a"


@pytest.mark.parametrize(("token", "says"), [
    (f"top\n{SECRET}", "holds a line break"),
    (f"top\r\n{SECRET}", "holds a line break"),
    (f"top\t{SECRET}", "holds a control character"),
    (f"top\x1b[2J{SECRET}", "holds a control character"),
    (f"top\x7f{SECRET}", "holds a control character"),
    (f"top\u4e2d{SECRET}", "holds a character outside ASCII"),
], ids=["newline", "crlf", "tab", "escape", "del", "non-ascii"])
def test_a_token_no_header_can_carry_is_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any, token: str, says: str) -> None:
    monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN", token)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith(f"environment: GPUAAS_PROMETHEUS_TOKEN: {says}")
    assert SECRET not in str(info.value) and "\n" not in str(info.value)
    monkeypatch.delenv("GPUAAS_PROMETHEUS_TOKEN")
    file = tmp_path / "token"
    file.write_text(token + "\n", encoding="utf-8")
    monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN_FILE", str(file))
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith(f"environment: GPUAAS_PROMETHEUS_TOKEN_FILE: {file}: its token {says}")
    assert SECRET not in str(info.value) and "\n" not in str(info.value)
    monkeypatch.delenv("GPUAAS_PROMETHEUS_TOKEN_FILE")
    monkeypatch.setenv("GPUAAS_PROMETHEUS_HEADERS", json.dumps({"X-Scope-OrgID": token}))
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith(f"environment: GPUAAS_PROMETHEUS_HEADERS: the value of 'X-Scope-OrgID' {says}")
    assert SECRET not in str(info.value) and "\n" not in str(info.value)


def test_a_token_file_rotated_into_two_lines_fails_its_run_naming_the_file(tmp_path: Any) -> None:
    from gpuaas._https import bearer_token

    file = tmp_path / "token"
    file.write_text("t0ken\n")
    settings = GpuaasSettings(prometheus_token_file=file)
    file.write_text(f"t0ken\n{SECRET}\n")
    with pytest.raises(ConfigError) as info:
        bearer_token(settings)
    assert str(info.value) == (f"GPUAAS_PROMETHEUS_TOKEN_FILE: {file}: its token holds a line break; a token or "
                               "header value is one line of printable text (the value is not shown)")


def test_the_blanks_around_a_token_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN", " t0ken\n")
    token = load_settings().prometheus_token
    assert token is not None and token.get_secret_value() == "t0ken"


@pytest.mark.parametrize(("url", "shown"), [
    (f"postgresql://u@127.0.0.1:9/db?password={SECRET}", "postgresql://u@127.0.0.1:9/db?password=***"),
    (f"postgresql://u:{SECRET}@h/db?sslmode=require&sslpassword={SECRET}&token={SECRET}&access_token={SECRET}",
     "postgresql://u:***@h/db?sslmode=require&sslpassword=***&token=***&access_token=***"),
    ("sqlite:////var/lib/gpuaas.db", "sqlite:////var/lib/gpuaas.db"),
], ids=["password", "every-secret", "sqlite"])
def test_a_database_url_is_shown_without_its_secrets(url: str, shown: str) -> None:
    from gpuaas.store import redact_url

    assert redact_url(url) == shown


def _gpuaas(tmp_path: Any, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GPUAAS_", "PREFECT_API_URL"))}
    base |= {"GPUAAS_DATA_DIR": str(tmp_path / "data"), "GPUAAS_NVML": "off", "GPUAAS_RETRIES": "0",
             "GPUAAS_REQUEST_TIMEOUT_SECONDS": "5", "COLUMNS": "200", "HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "gpuaas.cli.app", *args], env=base | env, capture_output=True,
                          text=True, timeout=240, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("args", [("cost-report", "--window", "6h"), ("collect",)], ids=["cost-report", "collect"])
def test_a_token_with_a_line_break_is_never_printed(tmp_path: Any, args: tuple[str, ...]) -> None:
    file = tmp_path / "token"
    file.write_text(f"top\n{SECRET}\n")
    for env in ({"GPUAAS_PROMETHEUS_TOKEN": f"top\n{SECRET}"}, {"GPUAAS_PROMETHEUS_TOKEN_FILE": str(file)}):
        proc = _gpuaas(tmp_path, *args, GPUAAS_PROMETHEUS_URL="http://127.0.0.1:9", **env)
        assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
        assert SECRET not in proc.stdout + proc.stderr
        variable = next(iter(env))
        assert proc.stderr.strip().startswith(f"error: environment: {variable}: "), proc.stderr


@pytest.mark.slow
def test_a_database_url_password_parameter_is_never_printed(tmp_path: Any) -> None:
    url = f"postgresql://u@127.0.0.1:9/db?password={SECRET}"
    for args in (("db", "status"), ("db", "upgrade"), ("audit", "list")):
        proc = _gpuaas(tmp_path, *args, GPUAAS_DATABASE_URL=url)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert SECRET not in proc.stdout + proc.stderr
        assert "postgresql://u@127.0.0.1:9/db?password=***" in proc.stderr


def test_a_token_file_that_is_a_device_or_too_large_is_refused_unread(tmp_path: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``/dev/zero`` as a token file never ends: read whole, when the settings load and at each request, it would
    take all memory; a file of more than a token is a wrong path. Both are one line naming the variable and the
    file."""
    big = tmp_path / "token"
    big.write_text("t" * (2**16 + 1))
    for file, says in (("/dev/zero", "/dev/zero: token file is a character device, not a regular file"),
                       (str(big), f"{big}: token file is 65,537 bytes, larger than the 65,536 bytes")):
        monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN_FILE", file)
        with pytest.raises(ConfigError) as info:
            load_settings()
        assert str(info.value).startswith(f"environment: GPUAAS_PROMETHEUS_TOKEN_FILE: {says}"), str(info.value)
        assert "\n" not in str(info.value) and "ttttt" not in str(info.value)


def test_a_token_file_that_is_a_pipe_is_refused_naming_it(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A token file is read when the settings load and again at each request (it rotates): a pipe would be drained
    by the first read, and one nobody writes is empty. Only a regular file, or a link to one (a projected
    service-account token is), is read."""
    os.mkfifo(tmp_path / "token.fifo")
    (tmp_path / "token").write_text("t0ken\n")
    (tmp_path / "linked").symlink_to(tmp_path / "token")
    monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN_FILE", str(tmp_path / "token.fifo"))
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value) == (f"environment: GPUAAS_PROMETHEUS_TOKEN_FILE: {tmp_path / 'token.fifo'}: token file is a "
                               "pipe, not a regular file: give the file itself")
    monkeypatch.setenv("GPUAAS_PROMETHEUS_TOKEN_FILE", str(tmp_path / "linked"))
    assert load_settings().prometheus_token_file == tmp_path / "linked"


def test_a_long_value_is_cut_in_the_error_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A metric name of 10,000 characters is refused by a check that quotes it: the line quotes its first 200."""
    monkeypatch.setenv("GPUAAS_METRICS__FB_USED", "a-" * 5000)
    with pytest.raises(ConfigError) as info:
        load_settings()
    said = str(info.value)
    assert said.startswith(f"environment: GPUAAS_METRICS__FB_USED: {repr('a-' * 5000)[:200]}... (10,002 characters) "
                           "is not a Prometheus metric name"), said
    assert len(said) < 400


@pytest.mark.parametrize("url", ["notaurl", "localhost:5432/gpuaas", "postgres//u:hunter2@db/gpuaas"])
def test_a_database_url_with_no_dialect_is_refused_naming_the_variable_not_the_password(
        monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """Else the store fails to open, later, as "cannot open database <unparsable database URL>"."""
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    with pytest.raises(ConfigError) as refused:
        load_settings()
    said = str(refused.value)
    assert "GPUAAS_DATABASE_URL: not a database URL" in said and "hunter2" not in said and url not in said


@pytest.mark.parametrize("url", ["sqlite:////tmp/g.db", "postgresql+psycopg://u:p@db:5432/g", "sqlite:///relative/g.db"])
def test_a_database_url_with_a_dialect_loads(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("GPUAAS_DATABASE_URL", url)
    assert load_settings().database_url is not None


def test_two_different_database_passwords_are_refused_without_showing_either(monkeypatch: pytest.MonkeyPatch) -> None:
    """A password in the URL and another in GPUAAS_DATABASE_PASSWORD (a Secret rotated, the ConfigMap's URL not): the
    URL's alone would be sent, so the settings refuse the pair, naming both variables and neither password."""
    monkeypatch.setenv("GPUAAS_DATABASE_URL", "postgresql+psycopg://gpuaas:old-s3cret@127.0.0.1:5432/gpuaas")
    monkeypatch.setenv("GPUAAS_DATABASE_PASSWORD", "new-s3cret")
    with pytest.raises(ConfigError) as refused:
        load_settings()
    said = str(refused.value)
    assert "GPUAAS_DATABASE_PASSWORD" in said and "GPUAAS_DATABASE_URL" in said and "\n" not in said
    assert "s3cret" not in said
    monkeypatch.setenv("GPUAAS_DATABASE_PASSWORD", "old-s3cret")  # the same password twice is one password
    assert load_settings().database_url_value.endswith("gpuaas:old-s3cret@127.0.0.1:5432/gpuaas")
    monkeypatch.setenv("GPUAAS_DATABASE_URL", "postgresql+psycopg://gpuaas@127.0.0.1:5432/gpuaas")
    monkeypatch.setenv("GPUAAS_DATABASE_PASSWORD", "new-s3cret")  # the URL has none: the variable's is put in it
    assert "gpuaas:new-s3cret@127.0.0.1" in load_settings().database_url_value
