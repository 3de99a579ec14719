"""How an HTTP source is reached, checked where it is given: its URL, the CA bundle that verifies it,
and the bearer token and extra headers it takes.

A wrong value here would otherwise show one flow run later as a source failing its handshake or
answering 401, without the variable's name; a token or header value with a line break would go out
as a second header, and its value into the error line. Every check names the value's problem in words
that never quote a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, SecretStr

from gpuaas._input_file import MAX_TOKEN_BYTES, read_input_bytes
from gpuaas.errors import SOURCE_NAMES, ConfigError, redact_endpoint

__all__ = ["CaBundle", "Headers", "HttpUrl", "Token", "TokenFile", "auth_problem", "header_value_problem", "http_url_problem",
           "read_token_file", "token_problem"]


def http_url_problem(value: str) -> str | None:
    """Why ``value`` is not an http(s) URL with a host and a usable port, in words; None when it is one.

    Checked where the URL is given (a setting, a flag): ``prometheus:9090`` parses as scheme ``prometheus``,
    and a port of ``99999`` or ``abc`` parses until the first request, which then fails as ``No host
    specified`` or ``not a valid URL``, seconds later and without the variable's name. The URL is shown
    without its credentials (``redact_endpoint``); one that does not parse at all is not shown.

    It is a base URL: every client appends its API's path to it (``/api/v1/query``, ``/allocation``,
    ``/metrics/job/…``), so a path stays (a Prometheus behind a path prefix), but a query string or fragment
    (``?``, ``#``, even empty) would take the API's path into it, and every request would go to the base
    (``HTTP 405``). Neither is shown: a query may carry a token.
    """
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(value)
    except ValueError as exc:  # ``http://[::1``: an unclosed IPv6 bracket
        return f"not a URL: {exc}"
    shown = redact_endpoint(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = f"; write it as http://{shown}" if "://" not in value else ""
        return f"{shown!r} is not an http(s) URL with a host{hint}"
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        text = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
        return f"{shown!r}: the port {text!r} is not a number from 1 to 65535"
    if "?" in value or "#" in value:
        base = redact_endpoint(urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")))
        part = "a query string (?…)" if "?" in value.partition("#")[0] else "a fragment (#…)"
        return (f"{base!r} has {part}: a base URL takes none, as the API's paths are appended to it; give the "
                "scheme, host, port and any path prefix only")
    return None


def _http_url(value: str | None) -> str | None:
    """An endpoint must be an http(s) URL with a host and a usable port (``http_url_problem``)."""
    if value is None:
        return None
    problem = http_url_problem(value.strip())
    if problem is not None:
        raise ValueError(problem)
    return value.strip()


HttpUrl = Annotated[str | None, AfterValidator(_http_url)]
"""A source's base URL: checked when the settings load, not at the first request."""


def _open_or_say_why(value: Path, open_it: Callable[[], object], what: str) -> None:
    """``open_it()``, or the ValueError naming the path and why it cannot be opened."""
    try:
        open_it()
    except FileNotFoundError:
        raise ValueError(f"{str(value)!r}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{str(value)!r} is a directory, not {what}") from None
    except PermissionError:
        raise ValueError(f"{str(value)!r}: permission denied") from None
    except ConfigError as exc:  # a device, or a file larger than it may be (read_input_bytes)
        raise ValueError(str(exc)) from None


def _ca_bundle(value: Path | None) -> Path | None:
    """A CA bundle is read when the settings load: a wrong path or a file of no certificate would
    otherwise show only as every HTTPS source failing its handshake, one flow run later."""
    if value is None:
        return None
    import ssl

    try:
        _open_or_say_why(value, lambda: ssl.create_default_context(cafile=str(value)), "a PEM file of CA certificates")
    except (ssl.SSLError, UnicodeDecodeError):
        raise ValueError(f"{str(value)!r} holds no PEM CA certificate") from None
    return value


def header_value_problem(value: str) -> str | None:
    """Why ``value`` cannot go out in an HTTP header (a bearer token, an extra header's value), in words that
    never quote it; None when it can.

    A line break would end the header and start another (``http.client`` refuses it with the whole value
    in its message: the token would be printed in the error line), and a character beyond Latin-1 cannot be
    encoded at all. Tokens and header values are ASCII text.
    """
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        kind = "a line break" if any(c in value for c in "\r\n") else "a control character"
        return f"holds {kind}; a token or header value is one line of printable text (the value is not shown)"
    if not value.isascii():
        return "holds a character outside ASCII; a token or header value is ASCII text (the value is not shown)"
    return None


def token_problem(token: str) -> str | None:
    """``header_value_problem`` of a bearer token, or why it is empty."""
    if not token:
        return "is empty"
    return header_value_problem(token)


def _token(value: SecretStr | None) -> SecretStr | None:
    """A bearer token goes into a header: one line of ASCII, without the blanks around it."""
    if value is None:
        return None
    token = value.get_secret_value().strip()
    problem = token_problem(token)
    if problem is not None:
        raise ValueError(problem)
    return SecretStr(token)


def read_token_file(path: Path) -> str:
    """The token a token file holds (the blanks around it dropped), checked as ``_token`` checks a token;
    ``ValueError`` naming the file, never the token, when it cannot be read or cannot be sent."""
    try:
        token = read_input_bytes(path, MAX_TOKEN_BYTES, "token file", regular=True).decode("utf-8").strip()
    except ConfigError as exc:  # a device, or more than a token: said without reading it (nor showing it)
        raise ValueError(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ValueError(f"{path}: cannot read it: {reason.lower()}") from None
    problem = token_problem(token)
    if problem is not None:
        raise ValueError(f"{path}: its token {problem}" if problem != "is empty" else f"{path} is empty")
    return token


def _readable_file(value: Path | None) -> Path | None:
    """A token file must be there when the settings load; it is read again at each use (it rotates), so it is a
    regular file: a pipe would be drained by this check and read empty at the use."""
    if value is not None:
        _open_or_say_why(value, lambda: read_input_bytes(value, MAX_TOKEN_BYTES, "token file", regular=True), "a file")
    return value


def _token_file(value: Path | None) -> Path | None:
    """A token file must be there, and hold a token that can be sent, when the settings load; it is read
    again at each use (it rotates), and checked again there (``gpuaas._https.bearer_token``)."""
    if value is not None:
        _readable_file(value)
        read_token_file(value)
    return value


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP header name (RFC 9110's token): a name with a space or a colon would be sent as another header."""

CaBundle = Annotated[Path | None, AfterValidator(_ca_bundle)]
TokenFile = Annotated[Path | None, AfterValidator(_token_file)]
Token = Annotated[SecretStr | None, AfterValidator(_token)]


def _headers(value: dict[str, SecretStr]) -> dict[str, SecretStr]:
    """Header values without the blanks around them, as HTTP reads them (RFC 9110's optional whitespace): a
    client library refuses a value that ends in a blank, at the first request and in its own words."""
    return {name: SecretStr(v.get_secret_value().strip(" \t")) for name, v in value.items()}


Headers = Annotated[dict[str, SecretStr], AfterValidator(_headers)]
"""Extra headers of a source (a tenant, an API key), checked with its token by :func:`auth_problem`."""


def auth_problem(source: str, secret_block: str, token: SecretStr | None, token_file: Path | None,
                 headers: Mapping[str, SecretStr]) -> str | None:
    """Why a source's token, token file and headers cannot be sent together, naming the variables
    (``GPUAAS_<SOURCE>_TOKEN`` and so on); None when they can.

    Two tokens would leave which one is sent to the order of the code, and so would an ``Authorization``
    header beside a token.
    """
    variable = source.upper()
    if token is not None and token_file is not None:
        return (f"GPUAAS_{variable}_TOKEN and GPUAAS_{variable}_TOKEN_FILE are both set (or the token is in the "
                f"Prefect Secret block {secret_block!r}): set one of them")
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name):
            return f"GPUAAS_{variable}_HEADERS: {name!r} is not an HTTP header name"
        problem = header_value_problem(value.get_secret_value())
        if problem is not None:
            return f"GPUAAS_{variable}_HEADERS: the value of {name!r} {problem}"
        if name.lower() == "authorization" and (token or token_file):
            return (f"GPUAAS_{variable}_HEADERS sets Authorization, and so does the {SOURCE_NAMES[source]} token "
                    f"(GPUAAS_{variable}_TOKEN or its file): set one of them")
    return None
