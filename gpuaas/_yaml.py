"""Reading a YAML file a person wrote, with errors that say which file and where.

Every YAML file gpuaas takes from a person (policy, scenario, RBAC manifest, planner problems) is
read here, so that each says what went wrong the same way: one line, ``FILE: line L, column C:
FIELD: what``, whatever layer refused it (the decoder, PyYAML's reader, parser or constructors,
or Python's recursion limit). What YAML readers read differently is refused rather than read one way: a key given
twice, a number YAML 1.1 and 1.2 read apart, a merge of several mappings (``<<: [a, b]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuaas._input_file import MAX_YAML_BYTES, read_input_bytes
from gpuaas.errors import ConfigError

__all__ = ["read_yaml", "read_yaml_documents"]


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


class _ListMerge(Exception):
    """A merge key given a list of mappings (``<<: [*a, *b]``): YAML's merge rules keep the first mapping's value of
    a key they share, PyYAML the last, so ``<<: [{mode: dry-run}, {mode: apply}]`` would run in apply mode where
    other readers (and the person who read the spec) see dry-run. ``key`` and ``value``: the ``<<`` and its list."""

    def __init__(self, key: Any, value: Any) -> None:
        super().__init__(key, value)
        self.key, self.value = key, value


class _BadScalar(Exception):
    """A scalar PyYAML recognised (a timestamp, an integer) that Python cannot build: 2026-02-30, 5,000 digits."""

    def __init__(self, node: Any, reason: str) -> None:
        super().__init__(node, reason)
        self.node, self.reason = node, reason


_KINDS = {"timestamp": "timestamp", "int": "integer", "float": "number", "bool": "boolean"}
_REASONS = {"offset must be a timedelta": "its UTC offset must be less than 24 hours"}
"""Python's words for what it refused, where they name its own types rather than the value."""
_SCALAR_FAILURES = (ValueError, ArithmeticError, LookupError, AttributeError, TypeError)
"""What PyYAML's scalar constructors let escape: ``datetime``'s range checks, ``int``'s digit limit, and
the lookups of an explicit tag on text it does not fit (``!!timestamp soon``, ``!!bool maybe``)."""

_LOADER: Any = None


def _unambiguous(construct: Any) -> Any:
    """PyYAML's number constructor, refusing the two forms YAML 1.1 reads otherwise than YAML 1.2 and than anyone
    editing a policy means: a leading zero (``010`` is octal 8) and colons (``1:30`` is 90, in base 60). (YAML 1.1's
    other difference stays: ``1e3``, without a dot, is text, which keeps names such as Philly's VC ``6214e9`` text.)"""

    def checked(loader: Any, node: Any) -> Any:
        text = str(node.value).replace("_", "").lstrip("+-")
        if ":" in text:
            raise ValueError(f"YAML 1.1 reads it in base 60 as {construct(loader, node)}, write the number you mean "
                             "or quote it as text")
        value = construct(loader, node)
        if node.tag.endswith(":int") and text[:1] == "0" and text[1:2].isdigit() \
                and value != (decimal := int(str(node.value).replace("_", ""), 10)):
            raise ValueError(f"with a leading zero YAML 1.1 reads it as octal {value} and YAML 1.2 as {decimal}, "
                             "write the number you mean or quote it as text")
        return value

    return checked


def _unique_keys_loader(*, own_format: bool) -> Any:
    """PyYAML's safe loader, but a key given twice in one mapping is an error: YAML leaves the
    meaning open and PyYAML keeps the last silently, so a policy edited in two places would run
    with one of them and nobody would know which. A scalar it cannot build is a ``_BadScalar``
    carrying its node, so that the error can say where it is. ``own_format``: also refuse the numbers YAML 1.1
    and 1.2 read apart (``_unambiguous``); a Kubernetes manifest keeps YAML 1.1's, as kubectl reads it."""
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

            def flatten_mapping(self, node: Any) -> None:
                # One ``<<`` of one mapping, overridden by the keys beside it, is read alike by every reader; two
                # ``<<`` or a list of mappings leave which value wins to the reader (``_ListMerge``).
                merges = [(key, value) for key, value in node.value if key.tag == "tag:yaml.org,2002:merge"]
                if len(merges) > 1:
                    raise _DuplicateKey("<<", merges[1][0].start_mark.line + 1)
                for key_node, value_node in merges:
                    if isinstance(value_node, yaml.SequenceNode):
                        raise _ListMerge(key_node, value_node)
                super().flatten_mapping(node)

            def construct_object(self, node: Any, deep: bool = False) -> Any:
                try:
                    return super().construct_object(node, deep=deep)
                except _SCALAR_FAILURES as exc:
                    if not isinstance(node, yaml.ScalarNode):
                        raise  # a collection's own failure, not a value's
                    said = str(exc).split(";")[0] if isinstance(exc, ValueError | ArithmeticError) else ""
                    reason = next((ours for theirs, ours in _REASONS.items() if said.startswith(theirs)), said)
                    raise _BadScalar(node, reason) from exc

        class OwnFormat(UniqueKeys):
            """A file in one of gpuaas's own formats: a number YAML's versions read apart is refused."""

        OwnFormat.add_constructor("tag:yaml.org,2002:int", _unambiguous(yaml.SafeLoader.construct_yaml_int))
        OwnFormat.add_constructor("tag:yaml.org,2002:float", _unambiguous(yaml.SafeLoader.construct_yaml_float))
        _LOADER = (UniqueKeys, OwnFormat)
    return _LOADER[1 if own_format else 0]


def _field(root: Any, target: Any) -> str:
    """The path from ``root`` to the node ``target`` as every configuration error names a field
    (``freezes[0].start``); empty at the top. Walked without recursion: the tree may be deep, and an
    alias may make it a cycle."""
    import yaml

    stack: list[tuple[Any, str]] = [(root, "")]
    seen: set[int] = set()
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if id(node) in seen:
            continue
        seen.add(id(node))
        children: list[tuple[Any, str]] = []
        if isinstance(node, yaml.SequenceNode):
            children = [(child, f"{path}[{i}]") for i, child in enumerate(node.value)]
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
                children += [(key, path), (value, f"{path}.{name}" if path else name)]
        stack.extend(reversed(children))  # document order: the first place an aliased node appears
    return ""


def _shown(text: str, limit: int = 40) -> str:
    """A scalar as the file has it, cut short: the value that overflowed may be thousands of digits."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def _position(text: str, index: int) -> str:
    """``line L, column C`` of the character at ``index``, as an editor counts them."""
    line, line_start = text.count("\n", 0, index) + 1, text.rfind("\n", 0, index) + 1
    return f"line {line}, column {index - line_start + 1}"


def read_yaml(path: Path | str, what: str, *, regular: bool = False) -> Any:
    """The parsed document; a ``ConfigError`` naming the file (and line, column, field) when it can't be read.
    ``regular``: a pipe is refused, not read (``read_input_bytes``), for a file whose empty reading is valid."""
    return _read(path, what, every=False, regular=regular)


def read_yaml_documents(path: Path | str, what: str) -> list[Any]:
    """Every document of a file that holds several (``---`` between them, as a Kubernetes manifest does),
    read and refused as ``read_yaml`` reads one."""
    documents: list[Any] = _read(path, what, every=True)
    return documents


def _read(path: Path | str, what: str, *, every: bool, regular: bool = False) -> Any:
    """One document, or (``every``) the list of all of them; each failure one ``ConfigError`` line."""
    import yaml  # here: a command run without a policy file never pays for the parser
    from yaml.reader import ReaderError

    path = Path(path)
    try:
        data = read_input_bytes(path, MAX_YAML_BYTES, what, regular=regular)  # /dev/zero, a huge file: refused unread
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror or exc}", file=path) from exc
    try:
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # the newlines read_text makes
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8: {_where(exc)}", file=path) from exc
    loader: Any = None
    root: Any = None
    try:
        # A Kubernetes manifest (several documents) keeps YAML 1.1's numbers, as kubectl reads them (0644 is 420)
        loader = _unique_keys_loader(own_format=not every)(text)  # checks the characters: a NUL is refused here
        if not every:
            root = loader.get_single_node()
            return None if root is None else loader.construct_document(root)
        documents = []
        while loader.check_node():
            root = loader.get_node()
            documents.append(loader.construct_document(root))
        return documents
    except _DuplicateKey as exc:
        raise ConfigError(f"line {exc.line}: {exc.key!r} is given twice in the same mapping; keep one",
                          file=path) from exc
    except _ListMerge as exc:
        mark, field = exc.key.start_mark, _field(root, exc.value)
        error = ConfigError(f"line {mark.line + 1}, column {mark.column + 1}: {field}: a merge of several mappings "
                            "(<<: [a, b]) is refused: YAML's merge rules keep the first one's value of a key they "
                            "share and PyYAML the last; merge one mapping (<<: *defaults) and write the other keys "
                            "out", file=path)
        error.field = field
        raise error from exc
    except _BadScalar as exc:
        mark, field = exc.node.start_mark, _field(root, exc.node)
        kind = _KINDS.get(exc.node.tag.rpartition(":")[2], "value")
        message = f"{_shown(str(exc.node.value))} is not a valid {kind}" + (f": {exc.reason}" if exc.reason else "")
        error = ConfigError(f"line {mark.line + 1}, column {mark.column + 1}: "
                            + (f"{field}: " if field else "") + message, file=path)
        error.field = field or None
        raise error from exc
    except RecursionError as exc:
        mark = loader.get_mark()  # where the parser was: past the depth it could follow
        raise ConfigError(f"line {mark.line + 1}, column {mark.column + 1}: invalid YAML: nested too deeply to read",
                          file=path) from exc
    except ReaderError as exc:
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        character = f"0x{code:02x}" if code < 0x100 else f"U+{code:04X}"
        raise ConfigError(f"{_position(text, exc.position)}: invalid YAML: character {character} is not allowed in "
                          "YAML text", file=path) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = str(getattr(exc, "problem", None) or exc)
        context = getattr(exc, "context", None)
        if context and problem.startswith("but "):  # "expected a single document in the stream but found another"
            problem = f"{context} {problem}"
        problem = " ".join(problem.split())
        raise ConfigError(f"{where}invalid YAML: {problem}", file=path) from exc
    finally:
        if loader is not None:
            loader.dispose()
