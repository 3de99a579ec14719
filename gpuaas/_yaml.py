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


class _DuplicateKey(Exception):
    def __init__(self, key: object, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


_LOADER: Any = None


def _unique_keys_loader() -> Any:
    """PyYAML's safe loader, but a key given twice in one mapping is an error: YAML leaves the
    meaning open and PyYAML keeps the last silently, so a policy edited in two places would run
    with one of them and nobody would know which."""
    global _LOADER  # noqa: PLW0603 - built once, on first use, to keep the parser import lazy
    if _LOADER is None:
        import yaml

        class UniqueKeys(yaml.SafeLoader):
            def construct_mapping(self, node: Any, deep: bool = False) -> Any:
                seen: set[object] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                        continue  # a merge (``<<``) may be overridden; a non-scalar key is refused below
                    key = self.construct_object(key_node, deep=deep)
                    if key in seen:
                        raise _DuplicateKey(key, key_node.start_mark.line + 1)
                    seen.add(key)
                return super().construct_mapping(node, deep=deep)

        _LOADER = UniqueKeys
    return _LOADER


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
        return yaml.load(text, Loader=_unique_keys_loader())  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise ConfigError(f"line {exc.line}: {exc.key!r} is given twice in the same mapping; keep one",
                          file=path) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}invalid YAML: {problem}", file=path) from exc
