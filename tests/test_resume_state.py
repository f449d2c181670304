"""Nothing a user made is lost, and no run is continued into a result a fresh run would not give.

Through the real stages (``rnnsearch.stages.train`` / ``pretrain_lm`` run by the stage runner,
in this process so that a test can interrupt a run at a chosen step):

* a larger language-model budget trains afresh, to the weights a fresh run with that budget
  gets (continuing the finished run ended elsewhere);
* a cell whose initialisation files changed is not resumed;
* a run that fails after a params change leaves ``model.pt`` and every other run's resume folder
  (``.cache/resume/<stage>/<output>/<fingerprint>/``) byte for byte, and going back to the old
  params resumes the old run to an unbroken run's weights, also after the new run was
  interrupted itself;
* a disk that fills up during training (a real, small tmpfs) stops the stage with one line
  naming the file, keeps the last checkpoint whole, and the rerun resumes to an unbroken run's
  weights.
"""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
import torch

from test_bad_inputs import train_corpus, train_params, write_params
from test_lm_stage import PARAMS as LM_PARAMS
from test_lm_training import lm_data_dir  # noqa: F401,F811  (fixture)
from rnnsearch.stages import pretrain_lm, train
from rnnsearch.stages.runner import run
from rnnsearch.training.module import TranslationTask
from rnnsearch.training import run as training_run

DIVERGING = {"lr": 1e30, "clip_norm": 0.0}


def train_stage(root: Path, params: dict[str, Any], out: str = "out", *extra: str) -> int:
    """The train stage on ``root/tokenized`` (cell search-12) into ``root/<out>``."""
    write_params(root, params)
    return run(train.STAGE, ["--params", str(root / "params.yaml"), "--model", "search",
                             "--max-len", "12", "--data", str(root / "tokenized"),
                             "--out", str(root / out), "--metrics", str(root / f"{out}.json"),
                             *extra])


def budget(steps: int = 6) -> dict[str, Any]:
    return train_params(budget={"max_steps": steps, "val_every_steps": 2, "max_minutes": 5})


def resume_files(root: Path) -> dict[str, bytes]:
    """Every file of the resume folders under ``root/.cache/resume``."""
    folder = root / ".cache" / "resume"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def metrics(root: Path, out: str = "out") -> dict[str, Any]:
    return json.loads((root / f"{out}.json").read_text())


class Killed(RuntimeError):
    """Stands for a kill: the files on disk are what a kill -9 at that step leaves."""


@contextlib.contextmanager
def interrupted_at(step: int) -> Iterator[None]:
    """Training step ``step`` raises :class:`Killed`."""
    original = TranslationTask.training_step

    def dies(self: TranslationTask, batch: Any, batch_idx: int) -> Any:
        if self.global_step == step:
            raise Killed(f"killed at step {step}")
        return original(self, batch, batch_idx)

    TranslationTask.training_step = dies
    try:
        yield
    finally:
        TranslationTask.training_step = original


def unbroken_model(tmp_path: Path, params: dict[str, Any]) -> bytes:
    """model.pt of a run of ``params`` that nothing interrupted (in ``tmp_path/unbroken``)."""
    root = tmp_path / "unbroken"
    shutil.copytree(tmp_path / "tokenized", root / "tokenized")
    assert train_stage(root, params) == 0
    return (root / "out" / "model.pt").read_bytes()


# ---- the language model's budget ---------------------------------------------------------------

def lm_stage(root: Path, data: Path, max_steps: int) -> dict[str, Any]:
    text = LM_PARAMS.replace("max_steps: 6", f"max_steps: {max_steps}")
    (root / "params.yaml").write_text(text + "  init_embeddings: false\n")
    assert run(pretrain_lm.STAGE, ["--params", str(root / "params.yaml"), "--data", str(data),
                                   "--out", str(root / "lm"), "--metrics", str(root / "lm.json"),
                                   "--plot", str(root / "gf.csv"), "--no-mlflow"]) == 0
    return json.loads((root / "lm.json").read_text())


def test_a_larger_lm_budget_trains_afresh_to_a_fresh_runs_weights(lm_data_dir, tmp_path):  # noqa: F811
    (tmp_path / "grown").mkdir()
    (tmp_path / "fresh").mkdir()
    lm_stage(tmp_path / "grown", lm_data_dir, max_steps=6)
    grown = lm_stage(tmp_path / "grown", lm_data_dir, max_steps=9)
    fresh = lm_stage(tmp_path / "fresh", lm_data_dir, max_steps=9)
    assert grown["steps"] == fresh["steps"] == 9
    assert grown["dev"] == fresh["dev"] and grown["test"] == fresh["test"]
    ours = torch.load(tmp_path / "grown/lm/decoder_init.pt", weights_only=True)
    theirs = torch.load(tmp_path / "fresh/lm/decoder_init.pt", weights_only=True)
    for name, value in theirs["state_dict"].items():
        assert torch.equal(ours["state_dict"][name], value), name
    assert resume_files(tmp_path / "grown") == {}   # a finished run's folder is gone


# ---- the train cell's fingerprint: the initialisation's files ----------------------------------

def test_changed_word_vectors_are_not_resumed(tmp_path):
    data = train_corpus(tmp_path)
    embed = tmp_path / "embed"
    embed.mkdir()
    for side in ("src", "tgt"):
        rows = sum(1 for _ in open(data / f"vocab.{side}.txt", encoding="utf-8"))
        np.save(embed / f"{side}.vocab.npy", np.full((rows, 8), 0.1, dtype=np.float32))
        np.save(embed / f"{side}.mask.npy", np.ones(rows, dtype=bool))
    params = train_params(init={"embeddings": True},
                          budget={"max_steps": 6, "val_every_steps": 2, "max_minutes": 5})
    with interrupted_at(3), pytest.raises(Killed):
        train_stage(tmp_path, params, "out", "--embed-dir", str(embed))
    np.save(embed / "tgt.vocab.npy", np.load(embed / "tgt.vocab.npy") * 2)
    assert train_stage(tmp_path, params, "out", "--embed-dir", str(embed)) == 0
    assert metrics(tmp_path)["resumed"] is False


# ---- a failed run after a params change --------------------------------------------------------

def test_a_failed_run_keeps_the_finished_runs_state_byte_for_byte(tmp_path, capsys):
    train_corpus(tmp_path)
    assert train_stage(tmp_path, budget()) == 0
    before = (tmp_path / "out/model.pt").read_bytes()
    assert train_stage(tmp_path, train_params(optim=DIVERGING, budget={"max_steps": 2})) == 2
    assert "diverged" in capsys.readouterr().err
    assert (tmp_path / "out/model.pt").read_bytes() == before
    assert resume_files(tmp_path) == {}       # the diverged run's folder is gone: a rerun starts afresh


def test_going_back_after_a_failed_run_resumes_the_interrupted_one(tmp_path):
    train_corpus(tmp_path)
    with interrupted_at(3), pytest.raises(Killed):
        train_stage(tmp_path, budget())
    kept = resume_files(tmp_path)
    assert {Path(name).name for name in kept} == {"last.ckpt", "run.json", "model.pt.partial"}
    assert not (tmp_path / "out/model.pt").exists()          # it never finished
    assert train_stage(tmp_path, train_params(optim=DIVERGING, budget={"max_steps": 2})) == 2
    assert resume_files(tmp_path) == kept
    assert train_stage(tmp_path, budget()) == 0
    assert metrics(tmp_path)["resumed"] is True
    assert (tmp_path / "out/model.pt").read_bytes() == unbroken_model(tmp_path, budget())


def test_going_back_after_another_interrupted_run_resumes_the_first(tmp_path):
    """Run A is interrupted; run B (other params) is interrupted after its own checkpoint;
    A again resumes from where it was (B's folder is another), and ends where an unbroken A
    ends."""
    train_corpus(tmp_path)
    other = train_params(optim={"lr": 0.003},
                         budget={"max_steps": 6, "val_every_steps": 2, "max_minutes": 5})
    with interrupted_at(3), pytest.raises(Killed):
        train_stage(tmp_path, budget())
    with interrupted_at(5), pytest.raises(Killed):
        train_stage(tmp_path, other)
    assert train_stage(tmp_path, budget()) == 0
    assert metrics(tmp_path)["resumed"] is True
    assert (tmp_path / "out/model.pt").read_bytes() == unbroken_model(tmp_path, budget())


# ---- a full disk -------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A real 8 MB file system (tmpfs) at ``tmp_path/disk``; skipped where mounting is not
    allowed (it needs root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write zeros to ``disk/filler`` until the file system is full."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_keeps_the_last_checkpoint_and_the_rerun_resumes(tmp_path, small_disk,
                                                                    monkeypatch, capsys):
    from rnnsearch.training import resume

    train_corpus(tmp_path)
    out = small_disk / "out"
    kept: dict[str, bytes] = {}
    save = resume.LastCheckpoint.on_validation_end

    def fills_the_disk_after_step_2(self, trainer, pl_module):
        save(self, trainer, pl_module)
        if trainer.global_step == 2:
            kept.update(resume_files(small_disk))
            fill(small_disk)

    monkeypatch.setattr(resume.LastCheckpoint, "on_validation_end", fills_the_disk_after_step_2)
    write_params(tmp_path, budget())
    args = ["--params", str(tmp_path / "params.yaml"), "--model", "search", "--max-len", "12",
            "--data", str(tmp_path / "tokenized"), "--out", str(out),
            "--metrics", str(tmp_path / "out.json")]
    assert run(train.STAGE, args) == 2
    err = capsys.readouterr().err
    last_line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and "disk full writing" in last_line, err[-2000:]
    assert str(small_disk / ".cache/resume/train/out") in last_line      # the file it wrote
    assert f"(file system {small_disk}, " in last_line
    last = {name: data for name, data in resume_files(small_disk).items()
            if name.endswith("last.ckpt")}
    assert last and all(kept[name] == data for name, data in last.items())
    assert not list(small_disk.rglob(".*.tmp-*"))
    monkeypatch.setattr(resume.LastCheckpoint, "on_validation_end", save)
    (small_disk / "filler").unlink()
    assert run(train.STAGE, args) == 0
    assert metrics(tmp_path)["resumed"] is True
    assert (out / "model.pt").read_bytes() == unbroken_model(tmp_path, budget())


def test_save_atomically_names_the_file_and_keeps_the_previous_one(tmp_path):
    from rnnsearch.data.savefile import save_atomically

    target = tmp_path / "model.pt"
    target.write_bytes(b"previous")

    def fails(file: Path) -> None:
        file.write_bytes(b"half")
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 12")

    with pytest.raises(OSError) as caught:
        save_atomically(target, fails)
    assert caught.value.filename == str(target) and caught.value.errno in (errno.ENOSPC,
                                                                            errno.EIO)
    assert target.read_bytes() == b"previous" and list(tmp_path.iterdir()) == [target]


def test_a_write_killed_mid_way_leaves_nothing_after_the_next_write(tmp_path):
    """``kill -9`` during a checkpoint write leaves its temporary folder; the next write of the
    same file removes it, and leaves a running process' folder and other files' alone."""
    from rnnsearch.data.savefile import save_atomically

    target = tmp_path / "best.ckpt"
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    killed.kill()
    killed.wait()
    abandoned = tmp_path / f".best.ckpt.tmp-{killed.pid}"
    (abandoned / "best.ckpt").parent.mkdir()
    (abandoned / "best.ckpt").write_bytes(b"half")
    running = tmp_path / f".best.ckpt.tmp-{os.getppid()}"
    other = tmp_path / f".last.ckpt.tmp-{killed.pid}"
    running.mkdir()
    other.mkdir()
    save_atomically(target, lambda file: file.write_bytes(b"whole"))
    assert target.read_bytes() == b"whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, running.name,
                                                                 other.name])


# ---- the divergence rule -----------------------------------------------------------------------

@pytest.mark.parametrize("loss, diverged", [
    (math.nan, True), (math.inf, True), (5.98e30, True),   # one CPU's NaN is another's 6e30
    (1000 * math.log(50), True),
    (1.1 * math.log(50), False), (0.5, False)])               # overfit / trained: accepted
def test_a_dev_loss_far_above_guessing_is_divergence_like_nan(loss, diverged):
    assert bool(training_run.diverged_scores({"val_loss": loss, "val_ppl": 1.0}, 50)) is diverged


def test_the_divergence_threshold_is_the_documented_multiple_of_ln_v():
    threshold = training_run.DIVERGED_FACTOR * math.log(50)
    assert training_run.diverged_scores({"val_loss": threshold * 1.001}, 50)
    assert not training_run.diverged_scores({"val_loss": threshold * 0.999}, 50)


def test_a_nan_perplexity_beside_a_finite_loss_is_divergence():
    bad = training_run.diverged_scores({"val_loss": 3.0, "val_ppl": math.nan}, 50)
    assert list(bad) == ["val_ppl"] and math.isnan(bad["val_ppl"])
