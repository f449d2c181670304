"""The paper-width BLEU-by-length curve (Bahdanau et al.'s Figure 2) on one GPU.

    python -m rnnsearch.experiments.paper_curve pack      # the data, data/paper_curve/pack.tar.xz
    python -m rnnsearch.experiments.paper_curve run       # on the GPU
    python -m rnnsearch.experiments.paper_curve report --results DIR   # tables and Figure 2

``make paper-curve`` (``scripts/gpu_paper_curve.sh``) runs all three on a GPU machine.

``pack`` merges ``presets/gpu_curve.yaml`` over ``params.yaml`` (320k Hansard pairs en->fr,
30k vocabularies, the paper's width, beam 12), runs the project's real ``prepare`` and
``tokenize`` stages with it into ``data/paper_curve/`` (its own MLflow store there), and packs
the tokenised splits, both vocabularies, the merged params and a manifest (pair and token
counts) into one ``pack.tar.xz``, so that the data can be copied to a GPU box as one file and
``run`` there needs neither the corpus nor the data stages.

``run`` unpacks the pack and, for RNNsearch-50 then RNNencdec-50, trains with the train stage's
own pieces (its data module and model builder, :class:`TranslationTask`, :func:`make_trainer`;
no MLflow, no checkpoints) until the cell's wall-clock budget is spent, scores the dev loss, then
decodes the test set on the device greedily and with beam search (``translate.search``,
``translate.batch_size_cuda``). It writes ``<cell>.<method>.tok.txt`` (the translate stage's
``<system>.tok.txt``: Moses tokens, ``<unk>`` kept) and ``run.json`` into ``--out`` (``$OUT``),
``run.json`` again after every step, so a run cut short leaves what it had. It imports nothing
beyond torch, Lightning, numpy, PyYAML and tqdm (not mlflow, dvc, gensim, sacremoses or
matplotlib), so a GPU box with only those installed runs it.

Budgets: ``--total-seconds`` (540) bounds the whole command from its start; each cell trains for
its own budget (``--search-seconds`` 270, ``--encdec-seconds`` 150: RNNencdec's fused GRU is
several times faster per token), cut short where less is left than ``--reserve-seconds`` per cell
still to decode. Training stops at a step boundary (Lightning's Timer), never by a kill.

``report`` (:mod:`rnnsearch.experiments.paper_curve_report`) scores the hypotheses with the
evaluate stage's code and writes ``reports/paper_curve/``.
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import lzma
import math
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import pytorch_lightning as pl
import torch
import yaml
from pytorch_lightning.callbacks import TQDMProgressBar

from rnnsearch.command import run_command
from rnnsearch.config.base import at_least, from_dict, read_params
from rnnsearch.config.repository import load_preset, repo_root
from rnnsearch.config.sections import validate_params
from rnnsearch.config.train import TrainConfig, cell_name
from rnnsearch.config.translate import TranslateConfig, resolve_device
from rnnsearch.config.trees import merge
from rnnsearch.data.textio import read_lines, write_json, write_lines
from rnnsearch.errors import DataError
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.decoding.compare import method_options
from rnnsearch.decoding.translator import Translator
from rnnsearch.device import failure, machine, peak_memory_mib, release, reset_peak_memory
from rnnsearch.experiments.paper_curve_files import (MANIFEST, MAX_LEN, PACK, PACKED, PARAMS,
                                                     RESULTS, TOKENIZED, VOCABS, hyp_file,
                                                     sha256_of)
from rnnsearch.models.seq2seq import Seq2Seq, count_parameters
from rnnsearch.stage_command import run_stage_command
from rnnsearch.training.harness import bare_task, bare_trainer, device_config
from rnnsearch.training.run import build

PRESET = "gpu_curve"
WORK = Path("data/paper_curve")
MODELS = ("search", "encdec")                  # training order: the one that matters first
TINY_WIDTH = 16


# ---- pack (here, on the CPU) --------------------------------------------------------------------

def curve_params(override: Path | None, pairs: int, per_bucket: int) -> dict[str, Any]:
    """params.yaml with ``presets/gpu_curve.yaml`` (then ``override``, then the sizes) merged
    over it, validated (errors name the key)."""
    root = repo_root()
    params = merge(read_params(root / "params.yaml"), load_preset(PRESET))
    if override is not None:
        params = merge(params, read_params(override))
    if pairs:
        params["prepare"]["sizes"]["train"] = pairs
    if per_bucket:
        params["prepare"]["test_per_bucket"] = per_bucket
    validate_params(params, f"params.yaml + presets/{PRESET}.yaml")
    return params


def corpus_counts(tokenized: Path) -> dict[str, Any]:
    """Pairs per split, and the training pairs and tokens a -50 cell trains on (both sides 1 to
    ``MAX_LEN`` tokens, as :func:`rnnsearch.training.data.read_pairs` keeps them; target tokens
    count the closing ``</s>``, as the trainer's tokens/s does)."""
    pairs = {split: len(read_lines(tokenized / f"{split}.src")) for split in ("train", "dev", "test")}
    kept = [0, 0, 0]                                        # pairs, source, target tokens
    for src, tgt in zip(read_lines(tokenized / "train.src"), read_lines(tokenized / "train.tgt")):
        n_src, n_tgt = len(src.split()), len(tgt.split())
        if 0 < n_src <= MAX_LEN and 0 < n_tgt <= MAX_LEN:
            kept = [kept[0] + 1, kept[1] + n_src, kept[2] + n_tgt + 1]
    return {"pairs": pairs, f"train_pairs_max{MAX_LEN}": kept[0],
            f"train_source_tokens_max{MAX_LEN}": kept[1],
            f"train_target_tokens_max{MAX_LEN}": kept[2]}


def _tar_entry(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """Entries without owner, time or umask, so that the same files make the same pack."""
    info.uid = info.gid = 0
    info.mode = 0o644
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def write_pack(path: Path, tokenized: Path, params: Path, manifest: dict[str, Any]) -> None:
    """One xz tarball of the tokenised splits, both vocabularies, the params and the manifest,
    flat (no folders); written beside ``path`` and renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tarfile.open(tmp, "w:xz") as tar:
        for name in TOKENIZED + VOCABS:
            tar.add(tokenized / name, arcname=name, filter=_tar_entry)
        tar.add(params, arcname=PARAMS, filter=_tar_entry)
        data = json.dumps(manifest, indent=2).encode("utf-8")
        entry = _tar_entry(tarfile.TarInfo(MANIFEST))
        entry.size = len(data)
        tar.addfile(entry, io.BytesIO(data))
    os.replace(tmp, path)


def pack(work: Path, override: Path | None = None, pairs: int = 0, per_bucket: int = 0
         ) -> dict[str, Any]:
    """Prepare, tokenise and pack the curve's data under ``work``; returns ``pack.json``."""
    start = time.perf_counter()
    work.mkdir(parents=True, exist_ok=True)
    params_path = work / PARAMS
    params_path.write_text(yaml.safe_dump(curve_params(override, pairs, per_bucket),
                                          sort_keys=False, allow_unicode=True), encoding="utf-8")
    run_stage_command("prepare.py", params_path, work / "mlflow.db", "--out", str(work / "prepared"),
              "--metrics", str(work / "metrics" / "prepare.json"), label="pack")
    run_stage_command("tokenize_text.py", params_path, work / "mlflow.db", "--prepared", str(work / "prepared"),
              "--out", str(work / "tokenized"), "--metrics", str(work / "metrics" / "tokenize.json"),
              "--plot", str(work / "plots" / "lengths.csv"), label="pack")
    manifest = {"preset": PRESET, **corpus_counts(work / "tokenized")}
    write_pack(work / PACK, work / "tokenized", params_path, manifest)
    info = {**manifest, "pack": str(work / PACK), "bytes": (work / PACK).stat().st_size,
            "sha256": sha256_of(work / PACK), "seconds": round(time.perf_counter() - start, 1),
            "command": " ".join(["python -m rnnsearch.experiments.paper_curve", *sys.argv[1:]]),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    write_json(work / "pack.json", info)
    return info


# ---- run (on the GPU) ---------------------------------------------------------------------------

def unpack(path: Path, into: Path) -> dict[str, Any]:
    """Extract the pack (only the files a pack holds) into ``into``; returns its manifest with
    the pack's sha256 and size."""
    if not path.is_file():
        raise DataError(f"{path}: no pack here (`make paper-curve-data` builds it; on another "
                        f"machine, copy it to this path)")
    try:
        with tarfile.open(path, "r:xz") as tar:
            names = sorted(m.name for m in tar.getmembers() if m.isfile())
            if names != sorted(PACKED) or len(tar.getmembers()) != len(PACKED):
                raise DataError(f"{path}: expected the files {sorted(PACKED)}, found {names}")
            for member in tar.getmembers():
                data = tar.extractfile(member)
                (into / member.name).write_bytes(data.read() if data else b"")
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as err:
        raise DataError(f"{path}: not a readable pack ({err})") from err
    manifest = json.loads((into / MANIFEST).read_text(encoding="utf-8"))
    return {**manifest, "sha256": sha256_of(path), "bytes": path.stat().st_size}


def cell_config(train: TrainConfig, args: argparse.Namespace, device: str) -> TrainConfig:
    """The pack's train section on ``device`` (``--device`` resolved), this run's precision and
    batch size; no validation while training (one at the end), steps unlimited unless
    ``--max-steps``."""
    return device_config(train, device, args.precision, args.batch_size, args.max_steps,
                         TINY_WIDTH if args.tiny else 0, deterministic=args.deterministic,
                         threads=args.threads)


class TrainingClock(pl.Callback):
    """Stops training at a step boundary once ``seconds`` have passed since training started, or
    at ``deadline`` (a ``time.perf_counter()`` value) if that comes first; prints a progress line
    (step, loss, target tokens/s) every ``every`` seconds, plain text for a log."""

    def __init__(self, cell: str, seconds: float, deadline: float, every: float) -> None:
        self.cell, self.seconds, self.deadline, self.every = cell, seconds, deadline, every
        self.started = self.last = 0.0
        self.stopped = False

    def on_train_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        self.started = self.last = time.perf_counter()
        self.deadline = min(self.deadline, self.started + self.seconds)

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        now = time.perf_counter()
        if now >= self.deadline:
            trainer.should_stop = self.stopped = True
        if now - self.last >= self.every or trainer.should_stop:
            self.last = now
            loss = float(outputs["loss"]) if isinstance(outputs, dict) else float("nan")
            print(f"{self.cell}: step {trainer.global_step}, loss {loss:.3f}, "
                  f"{getattr(module, 'tokens_per_second', 0.0):,.0f} target tokens/s, "
                  f"{now - self.started:.0f} s", flush=True)


def train_cell(config: TrainConfig, model_name: str, data_dir: Path, clock: TrainingClock,
               work: Path, device: str) -> tuple[Seq2Seq, dict[str, Any]]:
    """Train one -50 cell the train stage's way (its data module and model builder, the task,
    its Trainer less MLflow and checkpoints) until ``clock`` stops it; then the dev loss.
    Returns the model and what the run measured."""
    data, model, _ = build(config, model_name, MAX_LEN, data_dir, None, None)
    task, graphs = bare_task(config, model, {"cell": clock.cell})
    reset_peak_memory(device)
    trainer = bare_trainer(config, work, [clock, TQDMProgressBar(refresh_rate=0)])
    trainer.fit(task, datamodule=data)
    fit_seconds = time.perf_counter() - clock.started
    trainer.validate(task, datamodule=data, verbose=False)
    dev_loss = float(trainer.callback_metrics["val/loss"])
    stats = {"model": dataclasses.asdict(model.config), "parameters": count_parameters(model),
             "train_pairs": len(data.train_pairs), "batch_size": config.data.batch_size,
             "steps": trainer.global_step,
             "epochs": round(trainer.global_step / max(trainer.num_training_batches, 1), 3),
             "budget_seconds": round(clock.seconds, 1), "train_seconds": round(fit_seconds, 1),
             "step_seconds": round(task.train_seconds, 1),
             "stopped_by": "time" if clock.stopped else "steps",
             "tokens_per_s": round(task.tokens_per_second, 1), "dev_loss": round(dev_loss, 4),
             "dev_ppl": round(math.exp(min(dev_loss, 50.0)), 3),
             "peak_memory_mib": round(peak_memory_mib(device), 1)}
    if graphs is not None:
        stats.update(graphs.stats())
    return model, stats


def decode_cell(translator: Translator, sources: Sequence[Sequence[str]], cfg: TranslateConfig,
                out: Path, cell: str, save: Callable[[str, dict[str, Any]], None]) -> None:
    """Every method of ``cfg.methods`` over ``sources`` on the translator's device, each
    written to ``<out>/<cell>.<method>.tok.txt`` and reported through ``save(method, row)``
    (a method that fails, e.g. out of memory, is reported with its error and no file)."""
    batch = cfg.batch_size_for(translator.device)
    for method in cfg.methods:
        options = method_options(cfg.search, method)
        try:
            translator.translate(sources[:1], method, options, 1, progress=False)  # warm-up
            result = translator.translate(sources, method, options, batch, progress=False)
        except RuntimeError as err:  # out of memory, a CUDA failure: the next method still runs
            print(f"{cell}: {method}: failed: {failure(err)}", flush=True)
            save(method, {"error": failure(err), "batch_size": batch})
            continue
        write_lines(out / hyp_file(cell, method),
                    [" ".join(translator.target_words(t.best, src))
                     for t, src in zip(result.translations, sources)])
        row = {"file": hyp_file(cell, method), "sentences": len(sources), "batch_size": batch,
               "beam_size": options.beam_size, "seconds": round(result.seconds, 2),
               "sentences_per_s": round(result.sentences_per_second, 1)}
        print(f"{cell}: {method}: {len(sources)} sentences in {row['seconds']} s "
              f"({row['sentences_per_s']} sentences/s, batch {batch})", flush=True)
        save(method, row)


@dataclasses.dataclass
class Run:
    """One ``run``: its settings, its budget and the record written to ``run.json``."""

    args: argparse.Namespace
    device: str
    record: dict[str, Any]
    start: float = dataclasses.field(default_factory=time.perf_counter)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def save(self) -> None:
        """``run.json`` as it stands (atomically: a kill leaves the previous one)."""
        write_json(self.args.out / RESULTS, {**self.record, "seconds": round(self.elapsed(), 1)})

    def clock(self, model_name: str, cells_left: int) -> TrainingClock:
        """The model's training budget; its deadline keeps ``--reserve-seconds`` for every
        cell still to validate and decode (this one included) inside ``--total-seconds``."""
        a = self.args
        seconds = a.search_seconds if model_name == "search" else a.encdec_seconds
        deadline = self.start + a.total_seconds - a.reserve_seconds * cells_left
        return TrainingClock(cell_name(model_name, MAX_LEN), seconds, deadline, a.progress_every)


def settings(args: argparse.Namespace, train: TrainConfig, translate: TranslateConfig,
             device: str) -> dict[str, Any]:
    """What this run trained and decoded with (run.json's ``settings``)."""
    return {"device": device, "tiny": args.tiny, "precision": train.trainer.precision,
            "tf32": device == "cuda" and not args.no_tf32,
            "deterministic": train.trainer.deterministic, "cuda_graphs": args.cuda_graphs,
            "batch_size": train.data.batch_size,
            "optimizer": dataclasses.asdict(train.optim), "max_steps": args.max_steps,
            "budget_seconds": {"search": args.search_seconds, "encdec": args.encdec_seconds,
                               "total": args.total_seconds, "reserve_per_cell": args.reserve_seconds},
            "search": dataclasses.asdict(translate.search), "methods": list(translate.methods),
            "decode_batch_size": translate.batch_size_for(device)}


def run_cell(run: Run, model_name: str, cells_left: int, data_dir: Path, train: TrainConfig,
             translate: TranslateConfig, sources: list[list[str]]) -> None:
    """Train, validate and decode one cell, saving ``run.json`` after each step. A training
    run that fails (out of memory, a CUDA failure) is the cell's ``error``, not the end of the
    run: the GPU time already spent on the other cells is not lost."""
    clock = run.clock(model_name, cells_left)
    cell = clock.cell
    if clock.deadline - time.perf_counter() < 1:
        run.record["cells"][cell] = {"skipped": f"no time left after {run.elapsed():.0f} s"}
        print(f"{cell}: skipped, no time left", flush=True)
        return run.save()
    print(f"{cell}: training for at most {clock.seconds:.0f} s on {run.device} "
          f"({run.elapsed():.0f} s into the run)", flush=True)
    # RNNencdec trains as it is (cuDNN's fused GRU, nothing to graph): use_cuda_graphs says so
    config = dataclasses.replace(train, trainer=dataclasses.replace(
        train.trainer, cuda_graphs=run.args.cuda_graphs))
    try:
        model, stats = train_cell(config, model_name, data_dir, clock, data_dir / "work",
                                  run.device)
    except RuntimeError as err:      # out of memory, a CUDA failure: the next cell still runs
        run.record["cells"][cell] = {"error": failure(err)}
        print(f"{cell}: training failed: {failure(err)}", flush=True)
        release(run.device)
        return run.save()
    stats["decode"] = {}
    run.record["cells"][cell] = stats
    run.save()
    print(f"{cell}: {stats['steps']} steps ({stats['epochs']} epochs) in {stats['train_seconds']} s, "
          f"{stats['tokens_per_s']:,.0f} target tokens/s, dev ppl {stats['dev_ppl']}", flush=True)
    vocabs = [Vocabulary.load(data_dir / f"vocab.{side}.txt") for side in ("src", "tgt")]
    translator = Translator(model.to(run.device).eval(), *vocabs, translate.source_eos, run.device)

    def save(method: str, row: dict[str, Any]) -> None:
        stats["decode"][method] = row
        run.save()

    decode_cell(translator, sources, translate, run.args.out, cell, save)
    del translator, model
    release(run.device)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Unpack, then train, validate and decode every cell within the budget; returns run.json."""
    device = resolve_device(args.device, "--device")
    if device == "cuda" and not args.no_tf32:
        torch.set_float32_matmul_precision("high")        # TF32 GEMMs, fp32 weights
    if args.threads:
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python -m rnnsearch.experiments.paper_curve", *sys.argv[1:]])
    current = Run(args, device, {"command": command, "machine": machine(device), "cells": {},
                                 "finished": False})
    with tempfile.TemporaryDirectory(prefix="paper-curve-") as tmp:
        data_dir = Path(tmp)
        current.record["pack"] = unpack(args.pack, data_dir)
        params = read_params(data_dir / PARAMS)
        train = cell_config(from_dict(TrainConfig, params["train"], "train"), args, device)
        translate = from_dict(TranslateConfig, params["translate"], "translate")
        current.record["settings"] = settings(args, train, translate, device)
        current.save()
        sources = [line.split() for line in read_lines(data_dir / "test.src")]
        print(f"run: pack unpacked in {current.elapsed():.1f} s, {len(sources)} test sentences",
              flush=True)
        for index, model_name in enumerate(MODELS):
            run_cell(current, model_name, len(MODELS) - index, data_dir, train, translate, sources)
    current.record["finished"] = True
    current.save()
    print(f"run: done in {current.elapsed():.0f} s; files in {args.out}: "
          f"{', '.join(sorted(p.name for p in args.out.iterdir()))}", flush=True)
    return current.record


# ---- command line -------------------------------------------------------------------------------

def add_pack_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--work", type=Path, default=WORK, help="where the data and pack go")
    parser.add_argument("--pairs", type=at_least(0), default=0,
                        help="training pairs (default: the preset's 320,000)")
    parser.add_argument("--test-per-bucket", type=at_least(0), default=0,
                        help="test sentences per length bucket (default: the preset's 300)")
    parser.add_argument("--override", type=Path,
                        help="a params file merged over the preset (e.g. another corpus)")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pack", type=Path, default=WORK / PACK)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")),
                        help="results folder (default: $OUT, else out/)")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu", "auto"))
    parser.add_argument("--tiny", action="store_true",
                        help=f"every width {TINY_WIDTH}: a seconds-long dry run on a CPU")
    parser.add_argument("--precision", help="Lightning precision (default: the pack's params)")
    parser.add_argument("--batch-size", type=at_least(0), default=0,
                        help="training pairs per batch (default: the pack's params)")
    parser.add_argument("--search-seconds", type=at_least(0, float), default=270.0)
    parser.add_argument("--encdec-seconds", type=at_least(0, float), default=150.0)
    parser.add_argument("--total-seconds", type=at_least(0, float), default=540.0,
                        help="the whole command, unpacking and decoding included")
    parser.add_argument("--reserve-seconds", type=at_least(0, float), default=45.0,
                        help="kept per cell for set-up, the dev loss and decoding")
    parser.add_argument("--max-steps", type=at_least(-1), default=-1, help="per cell (-1: time only)")
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="RNNsearch's decoder loop as CUDA graphs (train.trainer.cuda_graphs)")
    parser.add_argument("--no-tf32", action="store_true", help="full fp32 GEMMs on a GPU")
    parser.add_argument("--threads", type=at_least(0), default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--progress-every", type=at_least(0, float), default=30.0, help="seconds")


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", type=Path, required=True,
                        help="the run's files (run.json and the hypotheses)")
    parser.add_argument("--work", type=Path, default=WORK, help="where pack put the data")
    parser.add_argument("--reports", type=Path, default=Path("reports"))
    parser.add_argument("--cpu-metrics", type=Path, default=Path("metrics"),
                        help="the default CPU run's metrics, shown beside the curve")


def parser() -> argparse.ArgumentParser:
    main_parser = argparse.ArgumentParser(prog="python -m rnnsearch.experiments.paper_curve",
                                          description=__doc__,
                                          formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = main_parser.add_subparsers(dest="command", required=True)
    for name, add, text in (("pack", add_pack_arguments, "build data/paper_curve/pack.tar.xz"),
                            ("run", add_run_arguments, "train and decode (on the GPU)"),
                            ("report", add_report_arguments, "score the run, write reports/")):
        add(commands.add_parser(name, help=text, description=text))
    return main_parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return run_command(f"paper_curve {args.command}", lambda: dispatch(args))


def dispatch(args: argparse.Namespace) -> None:
    """Run the sub-command ``args.command``: pack, run or report."""
    if args.command == "pack":
        info = pack(args.work, args.override, args.pairs, args.test_per_bucket)
        print(f"pack: {info['pack']}: {info['bytes'] / 2**20:.1f} MiB, sha256 {info['sha256']}; "
              f"{info['pairs']} pairs, {info[f'train_pairs_max{MAX_LEN}']:,} training pairs "
              f"of at most {MAX_LEN} tokens; {info['seconds']} s")
    elif args.command == "run":
        run(args)
    else:
        from rnnsearch.experiments.paper_curve_report import report

        for path in report(args.results, args.work, args.reports, args.cpu_metrics):
            print(f"report: wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
