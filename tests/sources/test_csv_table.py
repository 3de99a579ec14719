"""The one CSV reader (:mod:`gpuaas.sources.csv_table`): rows as long as the header, lines as an editor shows them.

A row with one field more than the header must be refused, not read as pandas reads it (the first column taken
as the rows' index, every cell shifted one column left), and the readers built on it must say so for the sweep
and the duty-cycle traces alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuaas.errors import ConfigError
from gpuaas.sources.csv_table import read_csv_table
from gpuaas.sources.sweep import read_sweep
from gpuaas.sources.traces import load_utilization

SWEEP = "rate_rps,replicas,gpus,latency_p50_s,latency_p95_s,latency_p99_s,quality\n"


def _file(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "t.csv"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_rows_carry_the_line_an_editor_shows(tmp_path: Path) -> None:
    path = _file(tmp_path, "\ufeffa, b\r\n1, 2\r\n\r\n   \r\n\"3\n3\",4\r\n5,6")
    table = read_csv_table(path)
    assert table.header == ("a", "b")  # the byte-order mark and the spaces are gone
    assert table.rows == [["1", "2"], ["3\n3", "4"], ["5", "6"]] and table.lines == [2, 6, 7]
    assert table.records()[0] == (2, {"a": "1", "b": "2"})


@pytest.mark.parametrize(("content", "message"), [
    ("a,b\n1,2\n3,4,5\n", "t.csv: line 3: 3 fields, header has 2"),
    ("a,b\n1,2\n\n3\n", "t.csv: line 4: 1 field, header has 2"),
    ("a,b,a\n1,2,3\n", "t.csv: line 1: a: a second column of this name"),
    ("a,b\n\"1,2\n", "t.csv: line 2: not a readable CSV"),
    ("", "t.csv: empty file: no header row"),
    ("\n\n", "t.csv: empty file: no header row"),
    (b"a,b\n1,2\n3,\xe9\n", "t.csv: line 3: not UTF-8 text (byte 0xe9: invalid continuation byte)"),
], ids=["field-more", "field-less-after-blank", "column-twice", "quote-open", "empty", "blank-lines", "latin-1"])
def test_a_malformed_file_is_one_error_with_its_line(tmp_path: Path, content: str | bytes, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_csv_table(_file(tmp_path, content))
    assert str(caught.value).startswith(str(tmp_path / message))


def test_missing_columns_are_named_with_those_found(tmp_path: Path) -> None:
    table = read_csv_table(_file(tmp_path, "vc,nodes\nx,1\n"))
    with pytest.raises(ConfigError, match=r"missing columns \['node num'\] \(columns found: vc, nodes\)"):
        table.require({"vc", "node num"})


@pytest.mark.parametrize("missing", ["nowhere.csv", ""], ids=["no-file", "directory"])
def test_a_path_that_is_no_file_is_named(tmp_path: Path, missing: str) -> None:
    with pytest.raises(ConfigError, match="no such file" if missing else "is a directory"):
        read_csv_table(tmp_path / missing)


def test_a_device_is_refused_unread() -> None:
    """``/dev/zero`` never ends: refused before a byte of it is read."""
    with pytest.raises(ConfigError) as caught:
        read_csv_table("/dev/zero")
    assert str(caught.value) == "/dev/zero: is a character device, not a regular file: give the file itself"


def test_dev_null_is_an_empty_csv() -> None:
    """``/dev/null`` reads as an empty file, as it always did: refused for having no header, not for being a device."""
    with pytest.raises(ConfigError) as caught:
        read_csv_table("/dev/null")
    assert str(caught.value) == "/dev/null: empty file: no header row (expected a CSV with a header)"


def test_a_file_larger_than_the_limit_is_refused_before_it_is_read(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit (``gpuaas._input_file.MAX_CSV_BYTES``), lowered here to the file's size: read; one byte less:
    refused."""
    path = _file(tmp_path, SWEEP + "1,1,1,0.1,0.2,0.3,1.0\n")
    size = path.stat().st_size
    monkeypatch.setattr("gpuaas.sources.csv_table.MAX_CSV_BYTES", size)  # the limit the reader passes
    assert len(read_csv_table(path).rows) == 1
    monkeypatch.setattr("gpuaas.sources.csv_table.MAX_CSV_BYTES", size - 1)
    with pytest.raises(ConfigError) as caught:
        read_csv_table(path)
    assert str(caught.value) == (f"{path}: is {size} bytes, larger than the {size - 1} bytes an input file of this "
                                 "kind may hold: is it the right file?")


@pytest.mark.parametrize("limit", [None, 40], ids=["within-the-limit", "past-the-limit"])
def test_a_file_that_grew_since_its_size_was_read_is_read_to_its_end_or_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int | None) -> None:
    """The file is read to the size its ``stat`` gave and one byte more: when that byte comes (it grew), the rest is
    read to its end, or refused once past the limit. Here the ``stat`` says 10 bytes of a file of 3 MiB."""
    import os

    path = _file(tmp_path, SWEEP + "1,1,1,0.1,0.2,0.3,1.0\n" * (3 * 2**20 // 22))
    real_stat = Path.stat

    def stale(self: Path, **kwargs: object) -> os.stat_result:
        info = real_stat(self)
        return os.stat_result((*info[:6], 10, *info[7:])) if self == path else info  # st_size is field 6

    monkeypatch.setattr(Path, "stat", stale)
    if limit is not None:
        monkeypatch.setattr("gpuaas.sources.csv_table.MAX_CSV_BYTES", limit)
        with pytest.raises(ConfigError) as caught:
            read_csv_table(path)
        assert str(caught.value) == (f"{path}: is larger than the 40 bytes an input file of this kind may hold: "
                                     "is it the right file?")
    else:
        assert len(read_csv_table(path).rows) == 3 * 2**20 // 22


def test_a_sweep_with_one_field_more_on_every_row_is_refused_not_shifted(tmp_path: Path) -> None:
    path = _file(tmp_path, SWEEP + "1,1,1,0.1,0.2,0.3,1.0,1\n2,2,1,1,0.4,0.5,1.0,1\n")
    with pytest.raises(ConfigError, match=r"t\.csv: line 2: 8 fields, header has 7$"):
        read_sweep(path)
    good = read_sweep(_file(tmp_path, SWEEP + "1, 1,1,0.1,0.2,0.3,1.0\n"))
    assert good.to_dict("records") == [{"rate_rps": "1", "replicas": "1", "gpus": "1", "latency_p50_s": "0.1",
                                         "latency_p95_s": "0.2", "latency_p99_s": "0.3", "quality": "1.0"}]


def test_a_duty_cycle_file_with_one_field_more_is_refused_not_shifted(tmp_path: Path) -> None:
    path = _file(tmp_path, "value,timestamp_anon,container_ip\n0.0,1662858720.0,abc,extra\n")
    with pytest.raises(ConfigError, match=r"t\.csv: line 2: 4 fields, header has 3$"):
        load_utilization([path])


def test_a_duty_cycle_above_100_names_its_file_and_line(tmp_path: Path) -> None:
    ok, bad = tmp_path / "ok.csv", tmp_path / "bad.csv"
    ok.write_text("value,timestamp,pod\n0.5,0,p\n")
    bad.write_text("value,timestamp,pod\n0.5,60,p\n\n2,120,p\n")
    with pytest.raises(ConfigError) as caught:
        load_utilization([ok, bad], unit="fraction")
    assert str(caught.value) == (f"{bad}: line 4: value: duty cycle above 100 % ('2' read as a fraction); "
                                 "is --unit right?")
