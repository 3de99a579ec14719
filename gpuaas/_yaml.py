"""Reading a YAML file a person wrote, with errors that say which file and where."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuaas.errors import ConfigError

__all__ = ["read_yaml"]


def _where(exc: UnicodeDecodeError) -> str:
    """Line and column of the first undecodable byte, as an editor shows them."""
    before = exc.object[: exc.start]
    line = before.count(b"\n") + 1
    column = exc.start - (before.rfind(b"\n") + 1) + 1
    return f"line {line}, column {column}: byte 0x{exc.object[exc.start]:02x}"


def read_yaml(path: Path | str, what: str) -> Any:
    """The parsed document; a ``ConfigError`` naming the file (and line, column) when it can't be read."""
    import yaml  # here: a command run without a policy file never pays for the parser

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror or exc}", file=path) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8: {_where(exc)}", file=path) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}invalid YAML: {problem}", file=path) from exc
