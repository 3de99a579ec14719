"""Reading a YAML file a person wrote, with errors that say which file and where."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuaas.errors import ConfigError

__all__ = ["read_yaml"]


def read_yaml(path: Path | str, what: str) -> Any:
    """The parsed document; a ``ConfigError`` naming the file (and line, column) when it can't be read."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror or exc}", file=path) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read {what}: not UTF-8 text (byte {exc.start})", file=path) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}invalid YAML: {problem}", file=path) from exc
