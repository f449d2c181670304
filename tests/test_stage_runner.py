"""The stage runner: leftovers of a killed run, a full disk, one-line errors, output locks."""
from __future__ import annotations

import errno
import os

import pytest

from test_stages_data import write_params

from rnnsearch.stages import prepare
from rnnsearch.stages.runner import lock_path, output_lock, recover_leftovers, run, StageError


def test_an_interrupted_swap_is_completed_or_undone(tmp_path):
    out = tmp_path / "prepared"
    backup = tmp_path / ".prepared.old"
    backup.mkdir()
    (backup / "train.src").write_text("previous\n")
    (tmp_path / ".prepared.tmp-abc").mkdir()            # the new output, half written
    (tmp_path / ".prepared.json.tmp-x").write_text("")  # another output's: not ours to touch
    recover_leftovers(out)                              # killed between the two renames
    assert (out / "train.src").read_text() == "previous\n"
    assert not backup.exists() and not (tmp_path / ".prepared.tmp-abc").exists()
    assert (tmp_path / ".prepared.json.tmp-x").exists()
    backup.mkdir()
    recover_leftovers(out)                              # killed after both renames
    assert not backup.exists() and (out / "train.src").exists()


def test_a_second_writer_is_refused_naming_the_output_and_the_pid(tmp_path):
    out = tmp_path / "models" / "search-30"
    with output_lock(out, "train"):
        assert lock_path(out).read_text().strip() == str(os.getpid())
        with pytest.raises(StageError, match=f"{out}: another process \\(pid {os.getpid()}\\)"):
            with output_lock(out, "train"):
                pass
    assert not lock_path(out).exists() and not (tmp_path / "models").exists()


def test_full_disk_is_one_line_and_keeps_the_previous_output(tmp_path, mirror, monkeypatch,
                                                             capsys):
    write_params(tmp_path / "params.yaml", mirror)
    monkeypatch.chdir(tmp_path)
    assert run(prepare.STAGE, []) == 0
    before = (tmp_path / "data/prepared/train.src").read_text()

    def no_space(path, lines):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(prepare, "write_lines", no_space)
    assert run(prepare.STAGE, []) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("prepare: error: disk full writing ") and "rerun" in err[-1]
    assert (tmp_path / "data/prepared/train.src").read_text() == before
    assert not list((tmp_path / "data").glob(".prepared.tmp-*"))
