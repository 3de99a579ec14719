"""``read_yaml`` and ``read_yaml_documents``: whatever layer refuses a file, the error says where in it.

What PyYAML parses but Python cannot build is named by the node's line, column and field path (an
aliased node by the first place it appears), in a file of one document or of several; the RBAC
manifest of ``cluster up --rbac`` is read through the same reader and its rules checked for shape.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from gpuaas._yaml import read_yaml, read_yaml_documents
from gpuaas.cluster.apiserver import RBACRules
from gpuaas.errors import ConfigError


def _refused(path: Path, text: str) -> ConfigError:
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        read_yaml_documents(path, "manifest") if "---" in text else read_yaml(path, "file")
    return caught.value


@pytest.mark.parametrize(("text", "field", "says"), [
    ("a:\n  - b: 1\n  - b: 2026-02-30\n", "a[1].b", "line 3, column 8: a[1].b: 2026-02-30 is not a valid timestamp: "
                                                   "day is out of range for month"),
    ("first: &t 2026-02-30\nagain: [*t]\n", "first", "line 1, column 8: first: 2026-02-30 is not"),
    ("{2026-02-30: x}\n", None, "line 1, column 2: 2026-02-30 is not a valid timestamp"),
    ("kind: A\n---\nkind: B\nwhen: {at: 2026-12-20T00:00:00+25:00}\n", "when.at",
     "line 4, column 12: when.at: 2026-12-20T00:00:00+25:00 is not a valid timestamp: its UTC offset must be"),
    ("n: !!int 0x\n", "n", "line 1, column 4: n: 0x is not a valid integer"),
], ids=["nested", "aliased", "a key", "second document", "an explicit tag"])
def test_a_value_python_cannot_build_names_line_column_and_field(
    text: str, field: str | None, says: str, tmp_path: Path
) -> None:
    error = _refused(tmp_path / "f.yaml", text)
    assert str(error).startswith(f"{tmp_path / 'f.yaml'}: {says}")
    assert (error.file, error.field) == (str(tmp_path / "f.yaml"), field)


def test_every_document_is_read_and_a_key_twice_in_any_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("kind: A\n---\n---\nkind: B\n")
    assert read_yaml_documents(path, "manifest") == [{"kind": "A"}, None, {"kind": "B"}]
    assert str(_refused(path, "kind: A\n---\nkind: B\nkind: C\n")).endswith(
        "m.yaml: line 4: 'kind' is given twice in the same mapping; keep one")


ROLE = "kind: ClusterRole\nmetadata: {name: r}\nrules:\n"


@pytest.mark.parametrize(("rules", "says"), [
    ("  - {apiGroups: [''], resources: [pods], verbs: get}\n",
     "ClusterRole r: rules[0].verbs: must be a list of strings, got 'get'"),
    ("  - [get]\n", "ClusterRole r: rules[0]: must be a mapping, got ['get']"),
    ("  verbs: [get]\n", "ClusterRole r: rules: must be a list of rules, got {'verbs': ['get']}"),
], ids=["verbs a string", "a rule a list", "rules a mapping"])
def test_an_rbac_rule_of_the_wrong_shape_is_refused_by_its_field(rules: str, says: str, tmp_path: Path) -> None:
    """A bare ``verbs: get`` would have granted the verbs g, e and t: nothing anyone meant, and no error."""
    path = tmp_path / "rbac.yaml"
    path.write_text(ROLE + rules)
    with pytest.raises(ConfigError) as caught:
        RBACRules.from_manifest(path, ["r"])
    assert str(caught.value) == f"{path}: {says}"


def test_an_rbac_manifest_reads_null_fields_as_empty_and_skips_roles_without_a_name(tmp_path: Path) -> None:
    path = tmp_path / "rbac.yaml"
    path.write_text("kind: ClusterRole\nmetadata: [x]\n---\n" + ROLE
                    + "  - {apiGroups: null, resources: [pods], verbs: [get]}\n  - {apiGroups: [''], verbs: [list]}\n")
    rules = RBACRules.from_manifest(path, ["r"])
    assert not rules.allows("get", "", "pods") and not rules.allows("list", "", "pods")
    with pytest.raises(ConfigError, match=r"no ClusterRole or Role named x \(found: r\)"):
        RBACRules.from_manifest(path, ["x"])


def test_a_file_that_is_not_a_regular_file_is_refused_unread() -> None:
    """``/dev/zero`` never ends: refused before a byte of it is read."""
    with pytest.raises(ConfigError) as caught:
        read_yaml("/dev/zero", "policy file")
    assert str(caught.value) == "/dev/zero: policy file is a character device, not a regular file: give the file itself"


def test_dev_null_reads_as_an_empty_document(tmp_path: Path) -> None:
    """``/dev/null``, or a link to it, is the empty file a script gives for "none", as it always read."""
    (tmp_path / "none.yaml").symlink_to("/dev/null")
    for path in ("/dev/null", tmp_path / "none.yaml"):
        assert read_yaml(path, "policy file") is None
        assert read_yaml_documents(path, "manifest") == []


def test_the_memory_taken_is_the_inputs_not_the_limits(tmp_path: Path) -> None:
    """``read(limit + 1)`` took the limit in memory before reading a byte: the 64 MiB a YAML file may hold for a
    3-line policy, 1 GiB for a CSV. With the limit raised to 1 GiB and 600 MiB of address space, a small file
    and a small pipe (``/dev/stdin``) are read; they were a ``MemoryError``."""
    path = tmp_path / "policy.yaml"
    path.write_text("tenants:\n  - name: a\n")
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (600 * 2**20, 600 * 2**20)); "
            "import gpuaas._yaml as y; y.MAX_YAML_BYTES = 2**30; "
            "print(y.read_yaml(sys.argv[1], 'policy file'), y.read_yaml('/dev/stdin', 'policy file'))")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], input="tenants: []\n", capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "{'tenants': [{'name': 'a'}]} {'tenants': []}"


def test_a_file_larger_than_the_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """64 MiB: more is a wrong path, not a policy or a planner problem (a sparse file: nothing is written)."""
    path = tmp_path / "huge.yaml"
    with path.open("wb") as out:
        out.truncate(64 * 2**20 + 1)
    with pytest.raises(ConfigError) as caught:
        read_yaml_documents(path, "manifest")
    assert str(caught.value) == (f"{path}: manifest is 67,108,865 bytes, larger than the 64 MiB an input file of this kind may "
                                 "hold: is it the right file?")


@pytest.mark.parametrize(("text", "says"), [
    ("tenants:\n  - guaranteed_gpus: 010\n", "line 2, column 22: tenants[0].guaranteed_gpus: 010 is not a valid "
     "integer: with a leading zero YAML 1.1 reads it as octal 8 and YAML 1.2 as 10, write the number you mean"),
    ("n: -0_10\n", "line 1, column 4: n: -0_10 is not a valid integer: with a leading zero YAML 1.1 reads it as "
     "octal -8 and YAML 1.2 as -10"),
    ("grace_minutes: 1:30\n", "line 1, column 16: grace_minutes: 1:30 is not a valid integer: YAML 1.1 reads it "
     "in base 60 as 90, write the number you mean or quote it as text"),
    ("x: 1:30.5\n", "line 1, column 4: x: 1:30.5 is not a valid number: YAML 1.1 reads it in base 60 as 90.5"),
], ids=["octal", "signed octal", "base 60", "base 60 float"])
def test_a_number_yaml_versions_read_apart_is_refused_not_guessed(text: str, says: str, tmp_path: Path) -> None:
    """YAML 1.1 (PyYAML) and 1.2 read these as different numbers; whichever the file meant, one reading is wrong."""
    assert str(_refused(tmp_path / "f.yaml", text)).startswith(f"{tmp_path / 'f.yaml'}: {says}")


def test_numbers_yaml_versions_read_alike_are_read_and_an_exponent_without_a_dot_stays_text(tmp_path: Path) -> None:
    """What only YAML 1.1 reads as a number is refused above; what both read alike, or 1.1 as text, is kept."""
    path = tmp_path / "f.yaml"
    path.write_text("a: [.nan, 1.5e+2, 07.5, 0, 00, 07, -07, 0x10, 0b11, 1_000, '010', '1:30', 6214e9]\n6214e9: 1\n")
    data = read_yaml(path, "file")
    nan, *read = data.pop("a")
    assert math.isnan(nan) and data == {"6214e9": 1}
    assert read == [150.0, 7.5, 0, 0, 7, -7, 16, 3, 1000, "010", "1:30", "6214e9"]


def test_a_kubernetes_manifest_keeps_yaml_1_1_numbers_as_kubectl_reads_them(tmp_path: Path) -> None:
    """``defaultMode: 0644`` is 420 to kubectl (go-yaml reads YAML 1.1 octal): another document of an RBAC manifest
    is not refused for it."""
    path = tmp_path / "m.yaml"
    path.write_text("kind: ClusterRole\n---\nkind: Deployment\nvolumes: [{configMap: {defaultMode: 0644}}]\n")
    assert read_yaml_documents(path, "manifest")[1]["volumes"][0]["configMap"]["defaultMode"] == 0o644


MERGE_REFUSED = ("a merge of several mappings (<<: [a, b]) is refused: YAML's merge rules keep the first one's value "
                 "of a key they share and PyYAML the last; merge one mapping (<<: *defaults) and write the other keys out")


@pytest.mark.parametrize(("text", "field", "says"), [
    ("reclaim:\n  <<: [{mode: dry-run}, {mode: apply, max_actions_per_run: 5}]\n", "reclaim.<<",
     f"line 2, column 3: reclaim.<<: {MERGE_REFUSED}"),
    ("d: &d {mode: dry-run}\na: &a {mode: apply}\nreclaim:\n  <<: [*d, *a]\n", "reclaim.<<",
     f"line 4, column 3: reclaim.<<: {MERGE_REFUSED}"),
    ("<<: [{mode: apply}]\n", "<<", f"line 1, column 1: <<: {MERGE_REFUSED}"),
    ("kind: A\n---\nrules:\n  - <<: [{verbs: [get]}, {verbs: [get, delete]}]\n", "rules[0].<<",
     f"line 4, column 5: rules[0].<<: {MERGE_REFUSED}"),
], ids=["flow mappings", "aliases", "one in a list", "a manifest"])
def test_a_merge_of_several_mappings_is_refused_not_guessed(
        text: str, field: str, says: str, tmp_path: Path) -> None:
    """YAML's merge rules keep the first mapping's value of a key two share, PyYAML the last: the first file would
    run in apply mode where YAML and a person reading it see dry-run. Refused in every file the reader reads, with a
    manifest's documents."""
    error = _refused(tmp_path / "f.yaml", text)
    assert str(error) == f"{tmp_path / 'f.yaml'}: {says}"
    assert error.field == field


def test_a_merge_key_given_twice_is_a_key_given_twice(tmp_path: Path) -> None:
    """Two ``<<`` in one mapping leave the winner to the reader, as any other key given twice does."""
    error = _refused(tmp_path / "f.yaml", "reclaim:\n  <<: {mode: dry-run}\n  <<: {mode: apply}\n")
    assert str(error) == f"{tmp_path / 'f.yaml'}: line 3: '<<' is given twice in the same mapping; keep one"


def test_a_merge_of_one_mapping_is_read_with_the_keys_beside_it_winning(tmp_path: Path) -> None:
    """``<<: *defaults`` means the same to every reader: the mapping's keys, each overridden by one written beside
    it; nested merges too."""
    path = tmp_path / "f.yaml"
    path.write_text("base: &b {mode: apply, max_actions_per_run: 5}\n"
                    "more: &m {<<: *b, idle_minutes: 30}\n"
                    "reclaim:\n  <<: *m\n  mode: dry-run\n")
    assert read_yaml(path, "file")["reclaim"] == {"mode": "dry-run", "max_actions_per_run": 5, "idle_minutes": 30}
