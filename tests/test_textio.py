"""Bad input files get errors that name the file (and line); atomic writes leave no debris."""
from __future__ import annotations

import gzip

import pytest

from rnnsearch.data.textio import atomic_dir, read_lines, read_parallel
from rnnsearch.errors import DataError


def test_reads_gzip_and_plain(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n", encoding="utf-8")
    with gzip.open(tmp_path / "b.gz", "wt", encoding="utf-8") as handle:
        handle.write("eins\r\nzwei\n")
    assert read_lines(tmp_path / "a.txt") == ["one", "two"]
    assert read_lines(tmp_path / "b.gz") == ["eins", "zwei"]


def test_mismatched_line_counts_name_both_files_and_counts(tmp_path):
    (tmp_path / "x.en").write_text("a\nb\nc\n")
    (tmp_path / "x.fr").write_text("a\nb\n")
    with pytest.raises(DataError) as err:
        read_parallel(tmp_path / "x.en", tmp_path / "x.fr")
    message = str(err.value)
    assert "x.en has 3 lines" in message and "x.fr has 2" in message


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.en"
    path.write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(DataError, match=r"bad\.en:3: invalid UTF-8"):
        read_lines(path)


def test_empty_and_missing_files(tmp_path):
    (tmp_path / "empty.en").write_text("")
    with pytest.raises(DataError, match=r"empty\.en: file is empty"):
        read_lines(tmp_path / "empty.en")
    with pytest.raises(DataError, match=r"gone\.en: file not found"):
        read_lines(tmp_path / "gone.en")


def test_atomic_dir_keeps_previous_output_on_failure(tmp_path):
    target = tmp_path / "out"
    with atomic_dir(target) as tmp:
        (tmp / "result.txt").write_text("first")
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as tmp:
            (tmp / "result.txt").write_text("half-written")
            raise RuntimeError("stage failed")
    assert (target / "result.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
