"""What the HTTPS sources are verified with, and the credentials Prometheus and OpenCost are sent, from the settings.

Three clients reach the sources (``requests`` for Prometheus,
``httpx`` for OpenCost, ``urllib`` under ``prometheus_client`` for the Pushgateway), and each
takes its trust in its own form; the one ``ca_file`` setting reaches all three from here. A
token file is read at each use, not when the settings load: a projected service-account token
is rotated by the kubelet while a long-lived worker keeps its settings.
"""

from __future__ import annotations

import ssl
from functools import cache
from typing import Literal

from gpuaas.errors import ConfigError
from gpuaas.settings import GpuaasSettings, read_token_file

__all__ = ["Source", "auth_headers", "bearer_token", "httpx_verify", "ssl_context", "verify_setting"]

Source = Literal["prometheus", "opencost"]
"""The sources that take a bearer token and extra headers."""


@cache
def _context(ca_file: str, modified_ns: int) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_file)


def ssl_context(settings: GpuaasSettings) -> ssl.SSLContext | None:
    """The TLS context trusting ``ca_file`` alone, or None for the system's trust store.

    Built once per version of the file: a CA bundle rotated under a long-lived worker is read again.
    """
    if settings.ca_file is None:
        return None
    try:
        return _context(str(settings.ca_file), settings.ca_file.stat().st_mtime_ns)
    except OSError as exc:  # gone or changed since the settings loaded (ssl.SSLError is an OSError too)
        reason = "holds no PEM CA certificate" if isinstance(exc, ssl.SSLError) else (exc.strerror or str(exc)).lower()
        raise ConfigError(f"{settings.ca_file}: {reason}", field="GPUAAS_CA_FILE") from None


def httpx_verify(settings: GpuaasSettings) -> ssl.SSLContext | bool:
    """``httpx``'s form of the same trust: the context, or True for the system's store."""
    return ssl_context(settings) or True


def verify_setting(settings: GpuaasSettings) -> str | bool:
    """``requests``' form of the same trust: the bundle's path, or True for the system's store."""
    return True if settings.ca_file is None else str(settings.ca_file)


def bearer_token(settings: GpuaasSettings, source: Source | Literal["pushgateway"] = "prometheus") -> str | None:
    """The source's bearer token: the setting's, or the token file's as it reads now."""
    token = getattr(settings, f"{source}_token")
    if token is not None:
        return str(token.get_secret_value())
    path = getattr(settings, f"{source}_token_file")
    if path is None:
        return None
    try:
        return read_token_file(path)
    except ValueError as exc:  # rotated into something unreadable, empty, or that no header can carry
        raise ConfigError(str(exc), field=f"GPUAAS_{source.upper()}_TOKEN_FILE") from None


def auth_headers(settings: GpuaasSettings, source: Source) -> dict[str, str]:
    """The headers every request to ``source`` carries: its extra headers, and its bearer token."""
    headers = {name: value.get_secret_value() for name, value in getattr(settings, f"{source}_headers").items()}
    token = bearer_token(settings, source)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers
