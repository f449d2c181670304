"""A run killed with kill -9 and rerun from ``last.ckpt`` ends bit for bit where an unbroken run
ends: the same weights (every tensor, the optimiser's too), metrics and validations, for a
translation cell and for the language model. A crafted or truncated ``last.ckpt`` is refused
without running anything it holds.

This file is also the subprocess that trains: ``python test_resume_exact.py search|transformer|lm WORKDIR``
writes ``WORKDIR/result.pt``; ``RESUME_SLOW`` (seconds slept after each step) gives the kill
time to land mid-run and ``RESUME_TAG`` names the file its validation steps go to.
"""
from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from test_lm_training import write_lm_corpus

REPO = Path(__file__).resolve().parents[1]
CELL_STEPS, CELL_VAL, CELL_EPOCH = 30, 5, 11   # validations mid-epoch and across 3 epochs
LM_STEPS, LM_VAL, LM_CKPT, LM_EPOCH = 90, 4, 3, 69   # last.ckpt at batch ends and at val ends


# ---- the training subprocess -------------------------------------------------------------------

def write_corpus(root: Path) -> Path:
    """The reversal task of tests/test_training.py: 80 train, 12 dev pairs, 2-14 words."""
    from rnnsearch.data.vocab import Vocabulary

    rng, words, data = random.Random(0), [f"w{i}" for i in range(20)], root / "tokenized"
    data.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 80), ("dev", 12)):
        src = [[rng.choice(words) for _ in range(rng.randint(2, 14))] for _ in range(n)]
        (data / f"{split}.src").write_text("".join(" ".join(s) + "\n" for s in src))
        (data / f"{split}.tgt").write_text("".join(" ".join(reversed(s)).upper() + "\n"
                                                   for s in src))
    for side in ("src", "tgt"):
        counts = Counter((data / f"train.{side}").read_text().split())
        Vocabulary.build(counts, 100).save(data / f"vocab.{side}.txt")
    return data


# the cells a killed run resumes: RNNsearch, and the Transformer (whose decoder has no recurrence)
CELL_MODELS = {"search": {"model": "search"},
               "transformer": {"model": "transformer", "heads": 2, "feedforward_size": 16,
                               "encoder_layers": 2, "decoder_layers": 2}}


def cell_config(model: str = "search", **budget: Any):
    from rnnsearch.config.base import from_dict
    from rnnsearch.config.train import TrainConfig

    params = {"grid": {"models": [model], "max_lens": [12]},
              "base_model": {"embedding_size": 8, "hidden_size": 8, "attention_size": 8,
                             "output_size": 8, "dropout": 0.3},   # dropout: the RNG matters
              "models": {model: CELL_MODELS[model]},
              "data": {"batch_size": 8, "dev_bleu_sentences": 5},
              "budget": {"max_steps": CELL_STEPS, "val_every_steps": CELL_VAL, "max_minutes": 10,
                         "early_stopping_patience": 3, **budget},
              "trainer": {"log_every_steps": 2, "threads": 1}}
    return from_dict(TrainConfig, params, "train")


def lm_config(**overrides: Any):
    from rnnsearch.config.pretrain_lm import PretrainLMConfig

    settings = dict(embedding_size=8, hidden_size=8, dropout=0.3, init_embeddings=False, bptt=5,
                    batch_size=4, eval_batch_size=2, max_steps=LM_STEPS, max_minutes=None,
                    val_every=LM_VAL, checkpoint_every=LM_CKPT, threads=1)
    return PretrainLMConfig(**{**settings, **overrides})


def tensors(prefix: str, obj: Any) -> dict[str, torch.Tensor]:
    """Every tensor in nested dicts/lists, keyed by its path."""
    if isinstance(obj, torch.Tensor):
        return {prefix: obj}
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, (list, tuple)):
        items = list(enumerate(obj))
    else:
        return {}
    return {k: v for key, value in items for k, v in tensors(f"{prefix}.{key}", value).items()}


def instrument(task_class: type, workdir: Path) -> None:
    """After each training step write the step to ``progress`` and sleep ``RESUME_SLOW`` s;
    append each validation's step to ``validations-<RESUME_TAG>.txt``. Nothing here draws
    from an RNG or touches the model."""
    slow, tag = float(os.environ.get("RESUME_SLOW", "0")), os.environ.get("RESUME_TAG", "run")
    progress, validations = workdir / "progress", workdir / f"validations-{tag}.txt"
    after_step, after_validation = task_class.on_train_batch_end, task_class.on_validation_epoch_end

    def on_train_batch_end(self, *args: Any) -> None:
        after_step(self, *args)
        progress.write_text(str(self.global_step))
        time.sleep(slow)

    def on_validation_epoch_end(self) -> None:
        after_validation(self)
        if self.trainer.state.fn == "fit":   # not train_cell's trainer.validate after fitting
            with validations.open("a") as f:
                f.write(f"{self.global_step}\n")

    task_class.on_train_batch_end = on_train_batch_end
    task_class.on_validation_epoch_end = on_validation_epoch_end


def run_cell(workdir: Path, model: str) -> dict[str, Any]:
    from rnnsearch.training.module import TranslationTask
    from rnnsearch.training.run import train_cell

    tasks: list[TranslationTask] = []
    TranslationTask.on_fit_start = lambda self: tasks.append(self)
    instrument(TranslationTask, workdir)
    out = workdir / f"{model}-12"
    metrics = train_cell(cell_config(model), model, 12, write_corpus(workdir / "corpus"), out)
    best = torch.load(out / "model.pt", weights_only=True)
    return {"weights": {**tensors("final", tasks[-1].model.state_dict()),
                        **tensors("best", best["state_dict"]),
                        **tensors("optimiser", optimiser_states(tasks[-1]))},
            "metrics": {k: metrics[k] for k in ("val_loss", "val_ppl", "val_bleu", "best_step",
                                                "steps", "epochs")},
            "resumed": metrics["resumed"]}


def optimiser_states(task: Any) -> list[dict[str, Any]]:
    """The finished run's optimiser states (as a checkpoint holds them)."""
    return [optimiser.state_dict() for optimiser in task.trainer.optimizers]


def run_lm(workdir: Path) -> dict[str, Any]:
    from rnnsearch.lm.task import LMTask
    from rnnsearch.lm.training import lm_metrics, load_lm_data, train_lm

    tasks: list[LMTask] = []
    LMTask.on_fit_start = lambda self: tasks.append(self)
    instrument(LMTask, workdir)
    cfg, data = lm_config(), load_lm_data(write_lm_corpus(workdir / "corpus"))
    run = train_lm(cfg, data, workdir / "lm")
    return {"weights": {**tensors("final", tasks[-1].model.state_dict()),
                        **tensors("optimiser", optimiser_states(tasks[-1])),
                        **tensors("selected", run.model.state_dict())},
            "metrics": lm_metrics(cfg, run, data), "resumed": run.resumed}


def main(mode: str, workdir: str) -> None:
    torch.set_num_threads(1)
    result = run_lm(Path(workdir)) if mode == "lm" else run_cell(Path(workdir), mode)
    torch.save(result, Path(workdir) / "result.pt")


# ---- kill and resume ---------------------------------------------------------------------------

def start(mode: str, workdir: Path, tag: str, slow: float = 0.0) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), RESUME_SLOW=str(slow), RESUME_TAG=tag,
               MLFLOW_TRACKING_URI=f"sqlite:///{workdir / 'mlflow.db'}")
    workdir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([sys.executable, __file__, mode, str(workdir)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, workdir: Path) -> dict[str, Any]:
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return torch.load(workdir / "result.pt", weights_only=True)


def validations(workdir: Path, tag: str) -> list[int]:
    path = workdir / f"validations-{tag}.txt"
    return [int(s) for s in path.read_text().split()] if path.is_file() else []


def last_checkpoint(workdir: Path) -> Path | None:
    """The ``last.ckpt`` of the run's resume folder in ``workdir`` (None before it exists); not
    the one a kill left half-written in its hidden ``.last.ckpt.tmp-<pid>/`` beside it."""
    return next((path for path in workdir.glob("*/**/last.ckpt")
                 if not path.parent.name.startswith(".last.ckpt.tmp-")),
                None)


def modified(path: Path | None) -> int | None:
    try:
        return path.stat().st_mtime_ns if path else None
    except FileNotFoundError:
        return None


def kill_at_random(mode: str, workdir: Path, tag: str, steps: tuple[int, int],
                   rng: random.Random) -> tuple[int, str]:
    """Start (or resume) the run in ``workdir`` and kill -9 it at a random step in ``steps``,
    once it has written its ``last.ckpt`` itself. Returns the step it holds, and what
    happened."""
    target = rng.randint(*steps)
    before = modified(last_checkpoint(workdir))
    progress = workdir / "progress"
    progress.unlink(missing_ok=True)
    proc = start(mode, workdir, tag, slow=0.08)
    while proc.poll() is None:
        step = int(progress.read_text() or 0) if progress.is_file() else 0
        if step >= target and modified(last_checkpoint(workdir)) not in (None, before):
            time.sleep(rng.uniform(0.0, 0.08))   # anywhere in the step, validation or save
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    _, err = proc.communicate(timeout=60)
    story = f"{tag}: killed at step {progress.read_text()} (target {target}), exit {proc.returncode}"
    assert proc.returncode == -signal.SIGKILL, f"{story}: the run was not killed\n{err[-2000:]}"
    checkpoint_step = int(torch.load(last_checkpoint(workdir), weights_only=True)["global_step"])
    return checkpoint_step, f"{story}, last.ckpt at step {checkpoint_step}"


def assert_same_end(unbroken: dict[str, Any], resumed: dict[str, Any], story: str) -> None:
    assert resumed["resumed"] and not unbroken["resumed"], story
    assert unbroken["weights"].keys() == resumed["weights"].keys(), story
    for name, value in unbroken["weights"].items():
        assert torch.equal(value, resumed["weights"][name]), f"{name} differs; {story}"
    assert resumed["metrics"] == unbroken["metrics"], story


def assert_each_validation_once(unbroken: Path, killed: Path, starts: dict[str, int],
                                story: str) -> None:
    """Each run of the killed series validates exactly at the unbroken run's steps after the
    checkpoint it started from (``starts``: tag -> that step): a validation the checkpoint had
    seen is not repeated, none is skipped."""
    everything = validations(unbroken, "unbroken")
    for tag, start_step in starts.items():
        after = [s for s in everything if s > start_step]
        done = validations(killed, tag)
        assert done == after[: len(done)], f"{tag} validated at {done}; {story}"
    assert validations(killed, "resumed") == [s for s in everything if s > starts["resumed"]], story


@pytest.mark.fault
@pytest.mark.parametrize("mode", ["search", "transformer", "lm"])
def test_killed_run_resumes_to_the_unbroken_runs_weights_and_metrics(mode, tmp_path):
    """Killed twice: first early enough that the resumed run crosses an epoch boundary, then
    anywhere after the resumed run has written its own checkpoint; then run to the end."""
    seed = int(os.environ.get("RESUME_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    max_steps, epoch = (LM_STEPS, LM_EPOCH) if mode == "lm" else (CELL_STEPS, CELL_EPOCH)
    unbroken_dir, killed_dir = tmp_path / "unbroken", tmp_path / "killed"
    unbroken = start(mode, unbroken_dir, "unbroken")   # alongside the killed one (1 thread each)
    first, story1 = kill_at_random(mode, killed_dir, "killed", (1, max_steps - epoch), rng)
    second, story2 = kill_at_random(mode, killed_dir, "killed-again", (first + 1, max_steps - 1),
                                    rng)
    story = f"{mode}: {story1}; {story2} (RESUME_SEED={seed})"
    resumed = finish(start(mode, killed_dir, "resumed"), killed_dir)
    assert_same_end(finish(unbroken, unbroken_dir), resumed, story)
    assert_each_validation_once(unbroken_dir, killed_dir,
                                {"killed": 0, "killed-again": first, "resumed": second}, story)


@pytest.mark.fault
def test_a_run_killed_after_early_stopping_stops_there_when_resumed(tmp_path, monkeypatch):
    """Early stopping decides at a validation; last.ckpt is written after it. A run killed just
    then must not train on when resumed (the trainer's should_stop is not in the file)."""
    from rnnsearch.training import resume
    from rnnsearch.training.module import TranslationTask
    from rnnsearch.training.run import train_cell

    tasks: list[TranslationTask] = []
    monkeypatch.setattr(TranslationTask, "on_fit_start", lambda self: tasks.append(self),
                        raising=False)
    cfg = cell_config(early_stopping_patience=1, monitor="bleu")  # dev BLEU of 5 sentences stalls
    data = write_corpus(tmp_path)
    unbroken = train_cell(cfg, "search", 12, data, tmp_path / "unbroken")
    assert unbroken["steps"] < CELL_STEPS                          # it did stop early
    assert unbroken["stop_reason"] == "early_stopping"
    save = resume.LastCheckpoint.on_validation_end

    def killed_once_saved(self, trainer, pl_module):
        save(self, trainer, pl_module)
        if trainer.should_stop:
            raise RuntimeError("killed")

    monkeypatch.setattr(resume.LastCheckpoint, "on_validation_end", killed_once_saved)
    with pytest.raises(RuntimeError, match="killed"):
        train_cell(cfg, "search", 12, data, tmp_path / "killed")
    monkeypatch.setattr(resume.LastCheckpoint, "on_validation_end", save)
    resumed = train_cell(cfg, "search", 12, data, tmp_path / "killed")
    assert resumed["resumed"] and resumed["steps"] == unbroken["steps"]
    assert resumed["best_step"] == unbroken["best_step"]
    assert resumed["stop_reason"] == "early_stopping"
    for name, value in tasks[0].model.state_dict().items():
        assert torch.equal(value, tasks[-1].model.state_dict()[name]), name


def test_the_stop_reason_names_the_limit_that_ended_training(tmp_path, caplog):
    """metrics' ``stop_reason`` and the log line name the budget key that stopped the run: the
    step limit, or the wall-clock limit (which Lightning's Timer enforces without a word)."""
    from rnnsearch.training.run import train_cell

    data = write_corpus(tmp_path)
    by_steps = train_cell(cell_config(max_steps=2, val_every_steps=2, early_stopping_patience=0),
                          "search", 12, data, tmp_path / "steps")
    assert by_steps["stop_reason"] == "max_steps" and by_steps["steps"] == 2
    with caplog.at_level(logging.INFO):
        by_time = train_cell(cell_config(max_steps=10_000, val_every_steps=2, max_minutes=1e-4,
                                         early_stopping_patience=0),
                             "search", 12, data, tmp_path / "minutes")
    assert by_time["stop_reason"] == "max_minutes" and by_time["steps"] < 10_000
    assert "train.budget.max_minutes reached" in caplog.text


# ---- crafted and truncated checkpoints ---------------------------------------------------------

class _Payload:
    """Unpickled without ``weights_only``, this creates the file ``marker``: it stands for any
    code a crafted pickle could run."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple:
        return open, (self.marker, "w")


def write_bad_checkpoint(path: Path, kind: str, marker: Path) -> None:
    """A checkpoint-looking file that runs code when unpickled, or a real one cut in half."""
    if kind == "crafted":
        torch.save({"state_dict": {}, "rnnsearch": {}, "payload": _Payload(marker)}, path)
        return
    torch.save({"state_dict": {"w": torch.zeros(1000)}}, path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def test_the_crafted_checkpoint_would_run_code(tmp_path):
    """The control: unpickled without the weights-only restriction (plain ``pickle`` on the
    archive's data.pkl; it holds no tensors), the payload does create its marker."""
    import pickle
    import zipfile

    marker = tmp_path / "ran"
    write_bad_checkpoint(tmp_path / "x.ckpt", "crafted", marker)
    with zipfile.ZipFile(tmp_path / "x.ckpt") as archive:
        data = archive.read(next(n for n in archive.namelist() if n.endswith("/data.pkl")))
    pickle.loads(data)
    assert marker.exists()


@pytest.mark.fault
@pytest.mark.parametrize("kind", ["crafted", "truncated"])
def test_lm_refuses_a_bad_last_checkpoint(kind, tmp_path, caplog):
    """Its code never runs; a warning names the file and the LM trains afresh (as a cell does)."""
    from rnnsearch.lm.training import lm_session, load_lm_data, train_lm

    resume_root, marker = tmp_path / "lm", tmp_path / "ran"
    data = load_lm_data(write_lm_corpus(tmp_path / "corpus"))
    session = lm_session(lm_config(max_steps=2), data, resume_root)
    session.start(resumed=False)
    write_bad_checkpoint(session.last, kind, marker)
    with caplog.at_level(logging.WARNING, logger="rnnsearch"):
        run = train_lm(lm_config(max_steps=2), data, resume_root)
    assert str(session.last) in caplog.text and "afresh" in caplog.text
    assert not marker.exists()
    assert not run.resumed and run.global_step == 2     # trained afresh, the file replaced


@pytest.mark.fault
@pytest.mark.parametrize("kind", ["crafted", "truncated"])
def test_train_cell_refuses_a_bad_last_checkpoint(kind, tmp_path, caplog):
    """An unfinished run whose last.ckpt was replaced: a warning names the file, the cell trains
    afresh (never resumed from it), and the file's code never runs."""
    from rnnsearch.training.run import run_fingerprint, train_cell
    from rnnsearch.training.session import Session

    data, out, marker = write_corpus(tmp_path), tmp_path / "search-12", tmp_path / "ran"
    cfg = cell_config(max_steps=2, val_every_steps=2, early_stopping_patience=0)
    session = Session(out / ".resume", run_fingerprint(cfg, "search", 12, data))
    session.start(resumed=False)                        # as a killed run leaves it
    write_bad_checkpoint(session.last, kind, marker)
    with caplog.at_level(logging.WARNING, logger="rnnsearch"):
        resumed = train_cell(cfg, "search", 12, data, out)["resumed"]
    assert str(session.last) in caplog.text and "afresh" in caplog.text
    assert not resumed and not marker.exists()


# ---- the pieces --------------------------------------------------------------------------------

def test_rng_state_goes_through_a_weights_only_checkpoint(tmp_path):
    from rnnsearch.training.resume import rng_state, set_rng_state

    torch.manual_seed(1), np.random.seed(2), random.seed(3)
    torch.save({"rng": rng_state()}, tmp_path / "c.ckpt")
    expected = (torch.rand(3), np.random.rand(3), random.random())
    set_rng_state(torch.load(tmp_path / "c.ckpt", weights_only=True)["rng"])
    got = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(got[0], expected[0]) and (got[1] == expected[1]).all()
    assert got[2] == expected[2]


def test_resumable_loader_continues_the_pass_and_draws_like_a_dataloader():
    from rnnsearch.training.resume import ResumableLoader

    batches = [[0, 1], [2, 3], [4], [5, 6]]
    loader = ResumableLoader(list(range(7)), batches, collate_fn=list)
    it = iter(loader)
    seen = [next(it), next(it)]
    state = loader.state_dict()
    assert seen == [[0, 1], [2, 3]] and state == {"batches": 2}
    restored = ResumableLoader(list(range(7)), batches, collate_fn=list)
    restored.load_state_dict(state)
    assert list(restored) == [[4], [5, 6]] and restored.state_dict() == {"batches": 4}
    assert list(restored) == batches                          # the next pass is whole
    # creating an iterator takes the same draw from torch's RNG as a plain DataLoader's
    torch.manual_seed(0)
    iter(DataLoader(list(range(7)), batch_sampler=batches, collate_fn=list))
    after_plain = torch.get_rng_state()
    torch.manual_seed(0)
    iter(restored)
    assert torch.equal(torch.get_rng_state(), after_plain)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
