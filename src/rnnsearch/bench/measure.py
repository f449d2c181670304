"""Every measurement of ``python -m rnnsearch.bench`` on one device, by plan (:data:`PLANS`): per
model, training the train stage's way, its FLOPs, then decoding at each batch size, and in the
full plans torch.profiler's account of a step and of a decoding batch. The roofline is the FLOPs
torch counts at the device's GEMM rate measured in the same run. Synthetic data; untrained models
rarely end a sentence, so outputs stop at source length + 1. Needs no mlflow, dvc, gensim or
sacremoses (a minimal install runs it)."""
from __future__ import annotations

import dataclasses
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import TQDMProgressBar
from torch.profiler import ProfilerActivity, profile

from rnnsearch.bench.data import MAX_LEN, stratified_sources, training_batches, \
    write_synthetic_corpus
from rnnsearch.bench.ops import failure, flops, gemm_gflops, peak_memory_mib, release, synchronize
from rnnsearch.config.base import from_dict, read_params
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.repository import load_preset
from rnnsearch.config.train import TrainConfig
from rnnsearch.config.trees import merge
from rnnsearch.decoding.corpus import CorpusResult, translate_corpus
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.models.seq2seq import build_model
from rnnsearch.training.data import Batch, TranslationDataModule
from rnnsearch.training.harness import bare_task, bare_trainer, device_config, shrink, train_step
from rnnsearch.training.module import TranslationTask

# name -> (beam size, translate.search.stop); beam5_bound (exact stopping) is timed batched only
METHODS = {"greedy": (1, "first_k"), "beam5": (5, "first_k"), "beam5_bound": (5, "bound")}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class Plan:
    models: tuple[tuple[str, str], ...]   # (width: default or paper, grid model of params.yaml)
    batches: tuple[int, ...]          # training batch sizes besides each model's own
    precisions: tuple[str, ...]       # Lightning's
    warmup_steps: int                 # untimed training steps before the timed ones
    steps: int
    train_pairs: int                  # synthetic training pairs per vocabulary
    per_bucket: int                   # decode sentences per source-length bucket
    decode_batches: tuple[int, ...]   # decode batch sizes (1: one sentence at a time)
    gemm_size: int                    # n of the n x n x n product that measures the device
    gemm_window_s: float              # timing window of each GEMM measurement
    methods: tuple[str, ...] = tuple(METHODS)   # the decoding methods timed
    profile: bool = True              # torch.profiler's account of a step and a decoding batch
    tiny_width: int = 0               # > 0: every model this wide, every vocabulary 4x (smoke)


CPU = (("default", "search"), ("default", "encdec"), ("default", "luong_general"),
       ("default", "transformer"))
PLANS = {   # make bench, make bench-full, a GPU's (~5 min), a smoke run (meaningless numbers)
    "quick": Plan(CPU, (), ("32-true",), 3, 15, 5_000, 10, (64,), 1024, 0.03,
                  ("greedy", "beam5"), profile=False),
    "full": Plan(CPU, (), ("32-true",), 5, 30, 20_000, 30, (1, 64), 1024, 0.05),
    "gpu": Plan((("default", "search"), ("paper", "search")), (80, 256, 1024),
                ("32-true", "bf16-mixed"), 5, 20, 40_000, 300, (64, 256, 512, 1024), 8192, 0.05),
    "tiny": Plan((("default", "search"), ("paper", "search")), (16,), ("32-true",), 1, 2, 200,
                 2, (4, 16), 64, 0.002, tiny_width=16),
}


def plan_for(size: str, device: str) -> Plan:
    """The plan of ``size`` (quick, full or tiny) on ``device``: a GPU runs its own unless tiny."""
    return PLANS["gpu" if device == "cuda" and size != "tiny" else size]


@dataclasses.dataclass(frozen=True)
class BenchModel:
    name: str
    train: TrainConfig
    vocab: int
    kind: str = "search"

    @property
    def config(self) -> ModelConfig:
        return self.train.model_config(self.kind)

    def build(self) -> torch.nn.Module:
        torch.manual_seed(0)
        return build_model(self.config, self.vocab, self.vocab)


def bench_models(plan: Plan, params_path: Path) -> list[BenchModel]:
    """The plan's models (the paper's width: ``presets/paper.yaml``), tiny for the smoke run."""
    params, models = read_params(params_path), []
    for width, kind in plan.models:
        merged = params if width == "default" else merge(params, load_preset(width))
        train = from_dict(TrainConfig, merged["train"], f"{width}.train")
        vocab = merged["tokenize"]["vocab_size_tgt"]
        if plan.tiny_width:
            train = dataclasses.replace(train, base_model=shrink(train.base_model,
                                                                 plan.tiny_width))
            vocab = 4 * plan.tiny_width
        models.append(BenchModel(width if kind == "search" else kind, train, vocab, kind))
    return models


def measured(row: dict[str, Any], measure: Callable[..., dict[str, Any]], *args: Any
             ) -> dict[str, Any]:
    """``row`` with ``measure(*args)``, or with the error that stopped it (that row only)."""
    try:
        row.update(measure(*args))
    except RuntimeError as err:
        row["error"] = failure(err)
    return row


class StepTimer(pl.Callback):
    """Seconds and target tokens from the start of step ``warmup`` to the end of training."""

    def __init__(self, warmup: int, device: str) -> None:
        self.warmup, self.device, self.start, self.tokens = warmup, device, 0.0, 0

    def on_train_batch_start(self, trainer: pl.Trainer, *_: Any) -> None:
        if trainer.global_step == self.warmup and not self.start:
            synchronize(self.device)
            self.start = time.perf_counter()

    def on_train_batch_end(self, trainer: pl.Trainer, task: Any, outputs: Any, batch: Batch,
                           *_: Any) -> None:
        self.tokens += batch.target_tokens if self.start else 0

    def on_train_end(self, *_: Any) -> None:
        synchronize(self.device)
        self.seconds = time.perf_counter() - self.start


def train_speed(model: BenchModel, data_dir: Path, device: str, batch: int, precision: str,
                plan: Plan, work_dir: Path) -> dict[str, Any]:
    """One run of the train stage's Trainer (no checkpoint, no MLflow): tokens/s and peak memory,
    or the error. Its model is freed before the next run."""
    config = device_config(model.train, device, precision, batch,
                           plan.warmup_steps + plan.steps)
    row: dict[str, Any] = {"model": model.name, "batch": batch, "precision": precision}
    pl.seed_everything(config.seed, verbose=False)
    data = TranslationDataModule(data_dir, MAX_LEN, batch, config.data.max_padding, 0,
                                 config.seed)
    task, timer = bare_task(config, model.build())[0], StepTimer(plan.warmup_steps, device)
    deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        # the progress bar the stage gets under dvc repro (Rich's would keep the model alive)
        bare_trainer(config, work_dir, [timer, TQDMProgressBar(refresh_rate=50)]).fit(
            task, datamodule=data)
        row.update(tokens_per_s=timer.tokens / timer.seconds, ms_per_step=1e3 * timer.seconds
                   / plan.steps)
    except RuntimeError as err:     # out of memory, or a CUDA failure: the next runs still run
        row["error"] = failure(err)
    finally:                        # a process-wide flag the next row must not inherit
        torch.use_deterministic_algorithms(deterministic)
    row["peak_memory_mib"] = peak_memory_mib(device)
    del task, data, timer          # Lightning leaves the trainer reachable from a callback
    release(device)
    return row


def new_training(model: BenchModel, device: str) -> tuple[TranslationTask, torch.optim.Optimizer]:
    """A seeded model in train mode in the stage's task on ``device``, and its optimiser."""
    task = TranslationTask(model.build().train(), model.train.optim).to(device)
    return task, task.configure_optimizers()


def profiled(run: Callable[[], Any], device: str) -> dict[str, Any]:
    """torch.profiler's table of one ``run()`` after an untimed one, by self time."""
    run()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * (
            device == "cuda")) as prof:
        run()
        synchronize(device)
    key = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    return {"table": prof.key_averages().table(sort_by=key, row_limit=12,
                                               max_name_column_width=40)}


def decode(model: torch.nn.Module, sources: Sequence[Sequence[int]], beam: int, batch: int,
           device: str, warmup: bool = True, stop: str = "first_k") -> CorpusResult:
    """Decode ``sources`` (greedy for ``beam`` 1, else beam search with the ``stop`` rule) after
    a warm-up batch; outputs at most one token longer than the source."""
    options = SearchOptions(beam_size=beam, nbest=1, max_len_a=1.0, max_len_b=1, stop=stop)
    method = "greedy" if beam == 1 else "beam"
    with torch.inference_mode():
        if warmup:
            translate_corpus(model, sources[:batch], method, options, batch, device,
                             progress=False)
        return translate_corpus(model, sources, method, options, batch, device, progress=False)


def decode_row(net: torch.nn.Module, sources: list[list[int]], method: str, batch: int,
               device: str, gflops: float | None) -> dict[str, Any]:
    """Speed of one method at one batch size; with the GEMM rate ``gflops``, its FLOPs and
    roofline too."""
    beam, stop = METHODS[method]
    result = decode(net, sources, beam, batch, device, stop=stop)
    tokens = sum(len(t.best.tokens) for t in result.translations)
    row = {"sentences_per_s": result.sentences_per_second,
           "tokens_per_s": tokens / result.seconds, "mean_output_tokens": tokens / len(sources)}
    counted = measured({}, lambda: {"flops": flops(partial(
        decode, net, sources, beam, batch, device, False, stop)) / len(sources)}) if gflops else {}
    if "flops" in counted:
        row.update(mflop_per_sentence=counted["flops"] / 1e6,
                   roofline_share=row["sentences_per_s"] * counted["flops"] / gflops / 1e9)
    elif counted:     # the speed stands; only the count failed
        row["arithmetic_error"] = counted["error"]
    return row


def training_part(model: BenchModel, plan: Plan, device: str, tmp: Path, results: dict[str, Any],
                  checkpoint: Callable[[], None]) -> float:
    """Training runs, then the arithmetic: FLOPs per target token of the stage's step on a batch
    of median length, the fp32 GEMM rate before and after the runs (the noisy-row check's), each
    run's share of its roofline; returns the fp32 rate after."""
    data_dir, own, first = tmp / f"data-{model.vocab}", model.train.data.batch_size, \
        len(results["training"])
    write_synthetic_corpus(data_dir, model.vocab, plan.train_pairs)
    rate = partial(gemm_gflops, plan.gemm_size, window_s=plan.gemm_window_s, device=device)
    before = rate(DTYPES["fp32"])
    for batch in sorted({own, *plan.batches}):
        for precision in plan.precisions:
            results["training"].append(train_speed(model, data_dir, device, batch, precision,
                                                   plan, tmp))
            print(f"bench: {model.name} batch {batch} {precision}: "
                  f"{results['training'][-1].get('tokens_per_s', 0):,.0f} tokens/s", flush=True)
            checkpoint()
    data, padding = training_batches(data_dir, model.vocab, own)
    step = partial(train_step, *new_training(model, device), data.to(device))
    row = measured({"model": model.name, "batch": own, "src_len": data.src.size(1),
                    "tgt_len": data.tgt_in.size(1), "padding": padding},
                   lambda: {"mflop_per_token": flops(step) / data.target_tokens / 1e6})
    after = {kind: rate(dtype) for kind, dtype in DTYPES.items()}
    row.update(gemm_gflops_fp32_before=before, gemm_gflops_fp32=after["fp32"],
               gemm_gflops_bf16=after["bf16"])
    for kind in after if "error" not in row else ():
        row[f"roofline_tokens_per_s_{kind}"] = after[kind] * 1e3 / row["mflop_per_token"]
    for r in results["training"][first:] if "error" not in row else ():
        r["gflops"] = r.get("tokens_per_s", 0) * row["mflop_per_token"] / 1e3
        bound = row["roofline_tokens_per_s_bf16" if "bf16" in r["precision"] else
                    "roofline_tokens_per_s_fp32"]
        r["roofline_share"] = r.get("tokens_per_s", 0) / bound
    results["arithmetic"].append(row)
    if plan.profile:
        results["profile"].append(measured({"model": model.name, "part": "training step"},
                                           profiled, step, device))
    release(device)
    return after["fp32"]


def decoding_part(model: BenchModel, plan: Plan, device: str, results: dict[str, Any],
                  gflops: float) -> None:
    """Rows per method and decode batch size (peak memory; FLOPs and roofline at the largest)
    and, in the full plans, profiles of one batch of sentences of every length."""
    net, largest = model.build().to(device).eval(), max(plan.decode_batches)
    sources = stratified_sources(model.vocab, plan.per_bucket)
    for method in plan.methods:
        for batch in [b for b in plan.decode_batches if b > 1 or method != "beam5_bound"]:
            row = measured({"model": model.name, "method": method, "batch": batch}, decode_row,
                           net, sources, method, batch, device,
                           gflops if batch == largest else None)
            results["decoding"].append({**row, "peak_memory_mib": peak_memory_mib(device)})
            release(device)
    subset = sources[:: max(1, len(sources) // largest)][:largest]
    results["profile"] += [measured({"model": model.name, "part": f"decoding, {method}"},
                                    profiled, partial(decode, net, subset, METHODS[method][0],
                                                      largest, device, False), device)
                           for method in plan.methods[:2] if plan.profile]


def run(device: str, size: str, params_path: Path, about: dict[str, Any],
        save: Callable[[dict[str, Any]], Any] = lambda results: None) -> dict[str, Any]:
    """Every measurement of the plan on ``device`` (``about``: the machine); ``save`` gets the
    results so far after each part, so a run cut by a time limit leaves what it had."""
    plan = plan_for(size, device)
    results: dict[str, Any] = {"machine": about, "plan": dataclasses.asdict(plan), "training": [],
                               "arithmetic": [], "decoding": [], "profile": [], "seconds": {}}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for model in bench_models(plan, params_path):
            start = time.perf_counter()
            release(device)
            gflops = training_part(model, plan, device, Path(tmp), results,
                                   lambda: save(results))
            save(results)
            decoding_part(model, plan, device, results, gflops)
            results["seconds"][model.name] = round(time.perf_counter() - start, 1)
            save(results)
    return results
