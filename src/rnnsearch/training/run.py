"""Train one grid cell (model variant x max length): everything the ``train`` stage does.

Every input is checked before the Trainer starts (a bad setting fails in seconds). An unfinished
run with the same fingerprint continues from its ``last.ckpt`` in the same MLflow run
(:mod:`rnnsearch.training.session`); ``model.pt`` is written, whole, only when the run finishes."""
from __future__ import annotations

import dataclasses
import math
import shutil
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any, Sequence

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EarlyStopping, Timer, TQDMProgressBar
from pytorch_lightning.loggers import MLFlowLogger
from pytorch_lightning.utilities import rank_zero_info

from rnnsearch import tracking
from rnnsearch.config.base import require
from rnnsearch.config.train import InitConfig, TrainConfig, cell_name
from rnnsearch.config.trees import flatten
from rnnsearch.data.savefile import save_atomically
from rnnsearch.errors import DataError, TrainingDiverged
from rnnsearch.environment import is_main_process
from rnnsearch.models.seq2seq import Seq2Seq, build_model, count_parameters
from rnnsearch.models.lm_transfer import load_lm_into_decoder
from rnnsearch.training.callbacks import BestModelSaver, make_dev_bleu
from rnnsearch.training.checkpoints import SameDiskCheckpointIO
from rnnsearch.training.data import TranslationDataModule
from rnnsearch.training.graphs import GraphedLoops, enable_cuda_graphs, has_attention_loop
from rnnsearch.training.module import TranslationTask
from rnnsearch.training.precision import set_matmul_precision, with_weight_cache
from rnnsearch.training.session import Session, fingerprint
from rnnsearch.training.supervision import META_FILE, links_file

MODEL = "model.pt"
PARTIAL = "model.pt.partial"   # the running run's best model; becomes model.pt when it finishes


def initialise(model: Seq2Seq, init: InitConfig, embed_dir: str | Path | None,
               lm_path: str | Path | None) -> dict[str, float]:
    """Optional init from the embed and pretrain_lm stages; returns coverage / LM fraction."""
    report: dict[str, float] = {}
    if init.embeddings:
        require(embed_dir is not None, "train.init.embeddings", "true, but no --embed-dir given")
        from rnnsearch.embeddings.loading import init_embedding

        d = Path(embed_dir)
        for side, embedding in (("src", model.encoder.embedding), ("tgt", model.decoder.embedding)):
            report[f"embed_coverage_{side}"] = init_embedding(
                embedding, d / f"{side}.vocab.npy", d / f"{side}.mask.npy")
    if init.lm:
        require(lm_path is not None, "train.init.lm", "true, but no --lm given")
        report["lm_fraction"] = float(load_lm_into_decoder(model.decoder, lm_path))
    return report


def init_files(init: InitConfig, embed_dir: str | Path | None,
               lm_path: str | Path | None) -> list[Path]:
    """The files the model's initialisation reads (none when ``train.init`` is off)."""
    files = []
    if init.embeddings and embed_dir is not None:
        files += [Path(embed_dir) / f"{side}.{kind}.npy" for side in ("src", "tgt")
                  for kind in ("vocab", "mask")]
    if init.lm and lm_path is not None:
        files.append(Path(lm_path))
    return files


def run_fingerprint(config: TrainConfig, model_name: str, max_len: int, data_dir: Path,
                    init: Sequence[Path] = ()) -> str:
    """Hash of the cell's params (budget included), data and ``init`` files: equal -> resumable."""
    params = dataclasses.asdict(config)
    params.pop("grid")
    if not config.supervised(model_name):   # as before the setting existed: a run resumes
        params.pop("supervised_attention")
    # to_dict: without other architectures' settings, so their new settings never block a resume
    params["base_model"] = config.base_model.to_dict()
    params["models"] = {model_name: config.model_config(model_name).to_dict()}
    names = ("train.src", "train.tgt", "dev.src", "dev.tgt", "vocab.src.txt", "vocab.tgt.txt")
    return fingerprint([params, model_name, max_len],
                       [data_dir / name for name in names] + list(init))


DIVERGED_FACTOR = 10.0  # a dev loss above this many times the uniform distribution's: diverged


def diverged_scores(best: dict[str, float], vocab_size: int) -> dict[str, float]:
    """The scores of ``best`` that say the run diverged: NaN or infinity, or a dev loss above
    ``DIVERGED_FACTOR`` x ln(V), the uniform model's loss (a blown-up run reaches inf on one CPU
    and 6e30 on another; an overfit tiny corpus reaches 1.1 x ln(V))."""
    bad = {k: v for k, v in best.items() if not math.isfinite(v)}
    loss = best.get("val_loss")
    if loss is not None and math.isfinite(loss) and loss > DIVERGED_FACTOR * math.log(vocab_size):
        bad["val_loss"] = loss
    return bad


def check_converged(best: dict[str, float], vocab_size: int, session: Session, out_dir: Path,
                    step: int) -> None:
    """Refuse (:class:`TrainingDiverged`) a diverged or unscored run, deleting its resume state
    so a rerun starts afresh."""
    bad = diverged_scores(best, vocab_size)
    if not best or bad:
        session.discard()                # a rerun starts afresh, not from broken weights
        shown = ", ".join(f"{k} = {v:.6g}" for k, v in bad.items()) or "no dev score"
        uniform = DIVERGED_FACTOR * math.log(vocab_size)
        raise TrainingDiverged(f"{out_dir}: training diverged ({shown} at step {step}; a dev "
                               f"loss must be finite and at most {uniform:.3f}, "
                               f"{DIVERGED_FACTOR:g} x ln of the {vocab_size:,}-word target "
                               f"vocabulary). Check the "
                               f"inputs (word vectors, language model) and train.optim "
                               f"(lr, clip_norm)")


def promote_model(session: Session, out_dir: Path) -> None:
    """Put the finished run's best model in place as ``<out_dir>/model.pt`` (written whole)."""
    if not is_main_process():
        return
    partial = session.folder / PARTIAL
    if not partial.is_file():
        raise DataError(f"{partial}: the run's best model is missing (deleted while the run was "
                        f"interrupted?); delete {session.folder} to train this cell afresh")
    out_dir.mkdir(parents=True, exist_ok=True)
    save_atomically(out_dir / MODEL, lambda file: shutil.copyfile(partial, file))


def make_callbacks(config: TrainConfig, session: Session) -> tuple[BestModelSaver, Timer, list]:
    """Best-dev model, the time budget, ``last.ckpt``, early stopping, a progress bar."""
    b = config.budget
    monitor, mode = ("val/bleu", "max") if b.monitor == "bleu" else ("val/loss", "min")
    saver = BestModelSaver(session.folder / PARTIAL, monitor, mode)
    timer = Timer(duration=timedelta(minutes=b.max_minutes) if b.max_minutes > 0 else None,
                  interval="step", verbose=False)
    # last.ckpt after each validation (BestModelSaver and EarlyStopping have seen it)
    callbacks = [saver, timer, *session.callbacks(b.val_every_steps)]
    if b.early_stopping_patience:
        callbacks.append(EarlyStopping(monitor, patience=b.early_stopping_patience, mode=mode,
                                       check_on_train_epoch_end=False))
    if not sys.stderr.isatty():  # a log file (dvc repro): plain lines, not a live display
        callbacks.append(TQDMProgressBar(refresh_rate=max(config.trainer.log_every_steps, 50)))
    return saver, timer, callbacks


def make_trainer(config: TrainConfig, root_dir: Path, logger: Any, callbacks: list) -> pl.Trainer:
    """Lightning's Trainer for ``train.trainer`` and ``train.budget``, with the precision
    settings of :mod:`rnnsearch.training.precision`."""
    t, b = config.trainer, config.budget
    trainer = pl.Trainer(
        accelerator=t.accelerator, devices=t.devices, num_nodes=t.num_nodes, strategy=t.strategy,
        precision=t.precision, deterministic=t.deterministic, max_steps=b.max_steps,
        max_epochs=b.max_epochs, val_check_interval=b.val_every_steps, check_val_every_n_epoch=None,
        gradient_clip_val=config.optim.clip_norm or None, gradient_clip_algorithm="norm",
        logger=logger, callbacks=callbacks, log_every_n_steps=t.log_every_steps,
        num_sanity_val_steps=0, use_distributed_sampler=False, default_root_dir=str(root_dir),
        enable_progress_bar=True, enable_model_summary=is_main_process(),
        plugins=[SameDiskCheckpointIO()])
    if t.autocast_cache:
        trainer.strategy.precision_plugin = with_weight_cache(trainer.strategy.precision_plugin)
    set_matmul_precision(t.matmul_precision, trainer.strategy.root_device.type)
    return trainer


def use_cuda_graphs(config: TrainConfig, model: Seq2Seq) -> GraphedLoops | None:
    """With ``train.trainer.cuda_graphs`` (refused without a GPU): the decoder loop's graphs;
    None for a model without a step-by-step loop, so one setting serves a mixed grid."""
    if not config.trainer.cuda_graphs:
        return None
    require(torch.cuda.is_available(), "train.trainer.cuda_graphs",
            "true, but torch sees no CUDA GPU on this machine")
    if not has_attention_loop(model):
        rank_zero_info(f"train.trainer.cuda_graphs: model {model.config.model!r} runs the fused "
                       f"cuDNN RNN already; nothing to graph")
        return None
    return enable_cuda_graphs(model)


def graph_padding(config: TrainConfig, graphs: GraphedLoops | None) -> tuple[int, int] | None:
    """(rows, length multiple) training batches are padded to when ``graphs`` run, else None."""
    return (config.data.batch_size, config.trainer.graph_length_multiple) if graphs else None


def supervision_links(config: TrainConfig, model_name: str, links_dir: str | Path | None
                      ) -> Path | None:
    """The links folder when the cell trains with supervised attention, else None."""
    if not config.supervised(model_name):
        return None
    require(links_dir is not None, "train.supervised_attention.weight",
            f"is {config.supervised_attention.weight}, but no --links folder was given")
    return Path(links_dir)


def links_files(links_dir: Path | None) -> list[Path]:
    """The files of ``links_dir`` the cell's result depends on (none without supervision)."""
    if links_dir is None:
        return []
    return [links_dir / META_FILE] + [links_file(links_dir, split) for split in ("train", "dev")]


def build(config: TrainConfig, model_name: str, max_len: int, data_dir: Path,
          embed_dir: str | Path | None, lm_path: str | Path | None,
          links_dir: Path | None = None
          ) -> tuple[TranslationDataModule, Seq2Seq, dict[str, float]]:
    """Data and model (with its optional init): every input check happens here, before training.
    ``links_dir``: training batches carry its links (:func:`supervision_links`)."""
    model_config = config.model_config(model_name)            # fails naming the key
    pl.seed_everything(config.seed, workers=True, verbose=False)
    if config.trainer.threads:
        torch.set_num_threads(config.trainer.threads)
    data = TranslationDataModule(data_dir, max_len, config.data.batch_size, config.data.max_padding,
                                 config.data.dev_max_len, config.seed, links_dir)
    data.setup("fit")
    model = build_model(model_config, len(data.src_vocab), len(data.tgt_vocab))
    return data, model, initialise(model, config.init, embed_dir, lm_path)


def hyperparameters(config: TrainConfig, model: Seq2Seq, cell: str, model_name: str,
                    max_len: int, init_report: dict[str, float]) -> dict[str, Any]:
    """What MLflow records as the run's params (flat)."""
    shared = {k: v for k, v in dataclasses.asdict(config).items()
              if k not in ("models", "grid", "base_model")}
    return {"cell": cell, "model_name": model_name, "max_len": max_len,
            "parameters": count_parameters(model), **flatten(shared),
            **flatten({"model": model.config.to_dict()}), **init_report}


def make_logger(cell: str, run_id: str | None) -> MLFlowLogger:
    """Lightning's MLflow logger on the project's store; ``run_id`` continues a resumed run."""
    tracking.configure()      # opens the store under its lock (safe with concurrent stages)
    return MLFlowLogger(experiment_name=tracking.experiment_name(),
                        tracking_uri=tracking.tracking_uri(),
                        run_name=tracking.experiment_run_name(cell),
                        tags=tracking.run_tags("train", {"cell": cell}), run_id=run_id)


def train_cell(config: TrainConfig, model_name: str, max_len: int, data_dir: str | Path,
               out_dir: str | Path, embed_dir: str | Path | None = None,
               lm_path: str | Path | None = None, links_dir: str | Path | None = None,
               resume_root: str | Path | None = None) -> dict[str, Any]:
    """Train ``model_name`` on pairs of at most ``max_len`` tokens into ``out_dir/model.pt``;
    returns the cell's metrics. ``links_dir``: the align stage's links (supervised attention);
    ``resume_root``: where runs keep their resume state (default ``out_dir/.resume``)."""
    data_dir, out_dir = Path(data_dir), Path(out_dir)
    cell = cell_name(model_name, max_len)
    links = supervision_links(config, model_name, links_dir)
    data, model, init_report = build(config, model_name, max_len, data_dir, embed_dir, lm_path,
                                     links)
    dev_bleu = make_dev_bleu(data.dev_pairs, data.dev_references, data.tgt_vocab,
                             config.data.dev_bleu_sentences)
    require(dev_bleu is not None or config.budget.monitor != "bleu", "train.budget.monitor",
            "'bleu' needs train.data.dev_bleu_sentences > 0 and the decoding package")
    session = Session(Path(resume_root) if resume_root else out_dir / ".resume",
                      run_fingerprint(config, model_name, max_len, data_dir,
                                      init_files(config.init, embed_dir, lm_path)
                                      + links_files(links)))
    previous = session.resumable()
    graphs = use_cuda_graphs(config, model)
    task = TranslationTask(model, config.optim, hyperparameters(
        config, model, cell, model_name, max_len, init_report), dev_bleu,
        config.trainer.log_every_steps, pad_to=graph_padding(config, graphs),
        bf16_cross_entropy=config.trainer.bf16_cross_entropy, fused_loss=config.trainer.fused_loss,
        supervision=config.supervised_attention if links is not None else None)
    saver, timer, callbacks = make_callbacks(config, session)
    logger = make_logger(cell, previous.get("mlflow_run_id"))
    trainer = make_trainer(config, session.folder, logger, callbacks)
    # every check has passed: only now is the resume folder opened
    session.start(bool(previous), mlflow_run_id=logger.run_id if is_main_process() else None,
                  cell=cell)
    metrics = {"cell": cell, "model": model_name, "max_len": max_len,
               **fit_and_select(task, data, trainer, saver, timer, session, out_dir,
                                bool(previous)),
               **init_report}
    if graphs is not None:
        metrics.update(graphs.stats())
    if links is not None:
        metrics["supervised_attention"] = supervision_report(config, data, trainer)
    promote_model(session, out_dir)
    session.discard()                 # finished: its result is model.pt
    return metrics


def supervision_report(config: TrainConfig, data: TranslationDataModule, trainer: pl.Trainer
                       ) -> dict[str, Any]:
    """A supervised cell's settings, its links and its last logged supervision loss."""
    last = trainer.callback_metrics.get("train/attn_sup_loss")
    return {**dataclasses.asdict(config.supervised_attention),
            "links": data.links_meta.get("train_links"),
            "last_attn_sup_loss": None if last is None else float(last)}


STOP_REASONS = {"max_steps": "train.budget.max_steps reached",
                "max_minutes": "train.budget.max_minutes reached",
                "early_stopping": "no dev improvement for train.budget.early_stopping_patience "
                                  "validations",
                "max_epochs": "train.budget.max_epochs reached"}


def stop_reason(trainer: pl.Trainer, timer: Timer) -> str:
    """Why ``trainer.fit`` returned: a key of :data:`STOP_REASONS`, checked in the order
    Lightning checks its own limits (steps, then the Timer's budget, then early stopping)."""
    if 0 < trainer.max_steps <= trainer.global_step:
        return "max_steps"
    remaining = timer.time_remaining("train")
    if remaining is not None and remaining <= 0:
        return "max_minutes"
    early = trainer.early_stopping_callback
    if early is not None and early.wait_count >= early.patience:
        return "early_stopping"
    return "max_epochs"


def fit_and_select(task: TranslationTask, data: TranslationDataModule, trainer: pl.Trainer,
                   saver: BestModelSaver, timer: Timer, session: Session, out_dir: Path,
                   resume: bool) -> dict[str, Any]:
    """Train (from the session's ``last.ckpt`` when ``resume``), score the final weights on dev
    when the last step had no validation, refuse a diverged run; returns the run's metrics."""
    session.fit(trainer, task, resume, datamodule=data)
    if task.validated_at_step != trainer.global_step or saver.best is None:
        trainer.validate(task, datamodule=data, verbose=False)   # the final weights get a dev score
    best = {k.replace("/", "_"): v for k, v in saver.best_metrics.items()}
    if trainer.is_global_zero:
        trainer.logger.log_metrics({f"best/{k.split('_', 1)[-1]}": v for k, v in best.items()} |
                                   {"train/tokens_per_s_mean": task.tokens_per_second},
                                   step=trainer.global_step)
    check_converged(best, len(data.tgt_vocab), session, out_dir, trainer.global_step)
    reason = stop_reason(trainer, timer)
    minutes = timer.time_elapsed("train") / 60
    rank_zero_info(f"training stopped at step {trainer.global_step} after {minutes:.1f} minutes: "
                   f"{STOP_REASONS[reason]}")
    return {**best, "best_step": saver.best_step, "steps": trainer.global_step,
            "stop_reason": reason,
            "epochs": trainer.global_step / max(trainer.num_training_batches, 1),
            "train_minutes": minutes,
            "tokens_per_s": task.tokens_per_second, "parameters": count_parameters(task.model),
            "train_pairs": len(data.train_pairs), "resumed": resume}
