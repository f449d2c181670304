"""Train the language model with Lightning: budget, checkpoints, resuming, MLflow, metrics.

``best.pt`` (best dev perplexity) and ``last.ckpt`` (every ``checkpoint_every`` steps) live in the
resume folder of the run's fingerprint (:mod:`rnnsearch.training.session`): every setting that
changes the result, budget and threads included (a run continued to a larger ``max_steps`` ends
elsewhere than a fresh one), so a run resumes only its own ``last.ckpt`` and MLflow run."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Sequence

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.loggers import Logger, MLFlowLogger

from rnnsearch.config.pretrain_lm import PretrainLMConfig
from rnnsearch.config.trees import flatten
from rnnsearch.data.savefile import save_atomically
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.embeddings.loading import init_embedding
from rnnsearch.lm.data import SegmentLoader, batchify, read_stream, unigram_perplexity
from rnnsearch.lm.model import LanguageModel
from rnnsearch.lm.task import LMTask, perplexity
from rnnsearch.models.files import read_torch_dict
from rnnsearch.training.callbacks import BestModelSaver
from rnnsearch.training.checkpoints import SameDiskCheckpointIO
from rnnsearch.training.session import Session, fingerprint

NOT_IN_RESULT = ("gradient_flow",)   # a diagnostic measured after training


@dataclass
class LMData:
    """The target side as token streams: ``train``/``dev``/``test`` are ``[N]`` ids."""

    vocab: Vocabulary
    train: torch.Tensor
    dev: torch.Tensor
    test: torch.Tensor
    files: tuple[Path, ...] = ()  # what training reads (the resume fingerprint covers them)


def load_lm_data(data_dir: Path, side: str = "tgt") -> LMData:
    """Read ``vocab.<side>.txt`` and ``{train,dev,test}.<side>`` from the tokenize stage."""
    vocab_path = data_dir / f"vocab.{side}.txt"
    vocab = Vocabulary.load(vocab_path)
    paths = {split: data_dir / f"{split}.{side}" for split in ("train", "dev", "test")}
    streams = {split: read_stream(path, vocab) for split, path in paths.items()}
    return LMData(vocab, **streams, files=(vocab_path, paths["train"], paths["dev"]))


@dataclass
class LMRun:
    """A finished training run: the selected weights and how they were reached."""

    model: LanguageModel
    global_step: int
    embedding_coverage: float | None
    resumed: bool
    run_id: str | None


def build_model(cfg: PretrainLMConfig, vocab_size: int,
                embed_dir: Path | None) -> tuple[LanguageModel, float | None]:
    """A seeded model; with ``embed_dir``, its embedding rows start from the word vectors."""
    pl.seed_everything(cfg.seed, verbose=False)
    model = LanguageModel(cfg.cell, vocab_size, cfg.embedding_size, cfg.hidden_size,
                          cfg.num_layers, cfg.dropout)
    if embed_dir is None:
        return model, None
    return model, init_embedding(model.embedding, embed_dir / "tgt.vocab.npy",
                                 embed_dir / "tgt.mask.npy")


def build_trainer(cfg: PretrainLMConfig, session: Session, logger: Logger | bool,
                  callbacks: Sequence[Callback]) -> tuple[pl.Trainer, BestModelSaver]:
    """The Trainer: step/time budget, clipping, dev checks, ``best.pt`` and the session's resume
    state (``last.ckpt`` after its step's validation, so best.pt has seen it)."""
    best = BestModelSaver(session.folder / "best.pt", "val/ppl", "min", save=save_weights)
    max_time = timedelta(minutes=cfg.max_minutes) if cfg.max_minutes is not None else None
    trainer = pl.Trainer(max_steps=cfg.max_steps, max_epochs=-1, max_time=max_time,
                         gradient_clip_val=cfg.clip_norm, gradient_clip_algorithm="norm",
                         val_check_interval=cfg.val_every, check_val_every_n_epoch=None,
                         num_sanity_val_steps=0, log_every_n_steps=10, logger=logger,
                         callbacks=[best, *callbacks],
                         enable_model_summary=False, plugins=[SameDiskCheckpointIO()])
    return trainer, best


def lm_session(cfg: PretrainLMConfig, data: LMData, resume_root: Path,
               embed_dir: Path | None = None) -> Session:
    """The resume folder of the run of ``cfg`` on ``data`` (all settings but
    :data:`NOT_IN_RESULT`, the files read) under ``resume_root``."""
    files = [*data.files, *((embed_dir / "tgt.vocab.npy",) if embed_dir else ())]
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in NOT_IN_RESULT}
    return Session(Path(resume_root), fingerprint(settings, files))


def train_lm(cfg: PretrainLMConfig, data: LMData, resume_root: Path,
             embed_dir: Path | None = None,
             make_logger: Callable[[str | None], MLFlowLogger] | None = None,
             callbacks: Sequence[Callback] = ()) -> LMRun:
    """Train (or resume); returns the model with the best dev perplexity seen. ``resume_root``:
    the runs' checkpoints (:mod:`rnnsearch.training.session`); ``make_logger(run_id)``: the MLflow
    logger (``run_id``: the run to continue, or None). The resume folder opens once all is built."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    session = lm_session(cfg, data, resume_root, embed_dir)
    previous = session.resumable()
    model, coverage = build_model(cfg, len(data.vocab), embed_dir)  # shape errors before MLflow
    train = SegmentLoader(batchify(data.train, cfg.batch_size), cfg.bptt)
    dev = SegmentLoader(batchify(data.dev, cfg.eval_batch_size), cfg.bptt)
    logger: Logger | bool = (make_logger(previous.get("mlflow_run_id")) if make_logger
                             else False)
    run_id = logger.run_id if isinstance(logger, MLFlowLogger) else None
    trainer, best = build_trainer(cfg, session, logger,
                                  [*callbacks,
                                   *session.callbacks(cfg.checkpoint_every)])
    session.start(bool(previous), mlflow_run_id=run_id)
    if isinstance(logger, MLFlowLogger) and not previous:
        logger.log_hyperparams(flatten(cfg))
    session.fit(trainer, LMTask(model, cfg.lr), bool(previous), train_dataloaders=train,
                val_dataloaders=dev)
    select_best(model, dev, best)
    session.discard()                # finished: the caller writes the result
    return LMRun(model, trainer.global_step, coverage, bool(previous), run_id)


def save_weights(model: LanguageModel, path: Path) -> None:
    """``{"state_dict"}`` of ``model`` (CPU tensors), written whole or not at all."""
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    save_atomically(path, lambda file: torch.save({"state_dict": state}, file))


def select_best(model: LanguageModel, dev: SegmentLoader, best: BestModelSaver) -> None:
    """Keep the final weights or load the best saved ones, whichever has lower dev perplexity."""
    if best.best is None:
        return
    if perplexity(model, dev) > best.best:
        model.load_state_dict(read_torch_dict(best.path, ("state_dict",), "the language "
                                              "model's best weights", "delete the run's resume "
                                              "folder to train afresh")["state_dict"])


def lm_metrics(cfg: PretrainLMConfig, run: LMRun, data: LMData) -> dict[str, Any]:
    """``{split: {"perplexity", "unigram_perplexity"}}`` for dev and test (the unigram model is
    add-one smoothed on the training tokens and scored on exactly the tokens the LM predicts)."""
    metrics: dict[str, Any] = {"steps": run.global_step}
    for split in ("dev", "test"):
        loader = SegmentLoader(batchify(getattr(data, split), cfg.eval_batch_size), cfg.bptt)
        metrics[split] = {"perplexity": perplexity(run.model, loader),
                          "unigram_perplexity": unigram_perplexity(data.train, loader.targets(),
                                                                   len(data.vocab))}
    if run.embedding_coverage is not None:
        metrics["embedding_init_coverage"] = run.embedding_coverage
    return metrics
