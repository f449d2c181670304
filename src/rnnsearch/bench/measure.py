"""Every measurement of ``python -m rnnsearch.bench`` on one device, by plan (:data:`PLANS`): per
model, training the train stage's way, the arithmetic (:mod:`rnnsearch.bench.ops`), decoding at
each batch size with its roofline and, in the full plans, profiles. Synthetic data; untrained
models rarely end a sentence, so outputs stop at source length + 1. Needs no mlflow, dvc, gensim
or sacremoses (a minimal install runs it)."""
from __future__ import annotations

import dataclasses
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from rnnsearch.bench.data import load_batches, stratified_sources, write_synthetic_corpus
from rnnsearch.bench.ops import arithmetic, measure_gemm
from rnnsearch.bench.profile import profile_steps
from rnnsearch.bench.training import new_training, train_speed
from rnnsearch.config.base import from_dict, read_params
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.repository import load_preset
from rnnsearch.config.train import TrainConfig
from rnnsearch.config.trees import merge
from rnnsearch.decoding.corpus import CorpusResult, translate_corpus
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.bench.device import failure, machine, peak_memory_mib, release, reset_peak_memory
from rnnsearch.models.seq2seq import build_model
from rnnsearch.training.graphs import enable_cuda_graphs
from rnnsearch.training.harness import shrink, train_step
from rnnsearch.training.data import pad_to_shape

# name -> (beam size, translate.search.stop); beam5_bound (exact stopping) is timed batched only
METHODS = {"greedy": (1, "first_k"), "beam5": (5, "first_k"), "beam5_bound": (5, "bound")}


@dataclasses.dataclass(frozen=True)
class Plan:
    models: tuple[tuple[str, str], ...]   # (width: default or paper, grid model of params.yaml)
    batches: tuple[int, ...]          # training batch sizes besides each model's own
    precisions: tuple[str, ...]       # Lightning's; "32-true@highest": fp32 matmuls, not TF32
    graph_precisions: tuple[str, ...] # precisions also run with train.trainer.cuda_graphs
    profile_steps: int                # steps under the profiler
    warmup_steps: int                 # untimed steps before the timed ones
    steps: int                        # timed training steps
    train_pairs: int                  # synthetic training pairs per vocabulary
    per_bucket: int                   # decode sentences per source-length bucket
    decode_batches: tuple[int, ...]   # decode batch sizes (1: one sentence at a time)
    gemm_size: int                    # n of the n x n x n product that measures the device
    gemm_window_s: float              # timing window of each GEMM measurement
    tiny_width: int = 0               # > 0: every model this wide (the smoke run)
    tiny_vocab: int = 0               # > 0: every vocabulary this large
    methods: tuple[str, ...] = tuple(METHODS)   # the decoding methods timed


GPU_MODELS = (("default", "search"), ("paper", "search"))
CPU_MODELS = (("default", "search"), ("default", "encdec"), ("default", "luong_general"),
              ("default", "transformer"))
PLANS = {
    # a GPU, ~5 min: every batch in fp32, TF32 (GPU default) and bf16 eager, the last two graphed
    "full": Plan(models=GPU_MODELS, batches=(80, 256, 1024),
                 precisions=("32-true@highest", "32-true", "bf16-mixed"),
                 graph_precisions=("32-true", "bf16-mixed"), profile_steps=5, warmup_steps=5,
                 steps=20, train_pairs=40_000, per_bucket=300, decode_batches=(64, 256, 512, 1024),
                 gemm_size=8192, gemm_window_s=0.05),
    # a GPU, what the targets need: each model's own batch and 1024, bf16 graphed
    "quick": Plan(models=GPU_MODELS, batches=(1024,), precisions=("32-true", "bf16-mixed"),
                  graph_precisions=("bf16-mixed",), profile_steps=3, warmup_steps=3, steps=12,
                  train_pairs=20_000, per_bucket=300, decode_batches=(512, 1024),
                  gemm_size=8192, gemm_window_s=0.03),
    # a CPU, `make bench` (minutes on 2 cores): three recurrent kinds and the Transformer, each
    # trained at its own batch, decoded greedy and beam 5 at batch 64; no profiles, no side by side
    "cpu_quick": Plan(models=CPU_MODELS, batches=(), precisions=("32-true",),
                      graph_precisions=(), profile_steps=0, warmup_steps=3, steps=15,
                      train_pairs=5_000, per_bucket=10, decode_batches=(64,), gemm_size=1024,
                      gemm_window_s=0.03, methods=("greedy", "beam5")),
    # a CPU, `make bench-full`: the same models, decoding one at a time and batched, profiled
    "cpu": Plan(models=CPU_MODELS, batches=(), precisions=("32-true",), graph_precisions=(),
                profile_steps=10, warmup_steps=5, steps=30, train_pairs=20_000, per_bucket=30,
                decode_batches=(1, 64), gemm_size=1024, gemm_window_s=0.05),
    # seconds, on either device (numbers mean nothing): the same code
    "tiny": Plan(models=GPU_MODELS, batches=(16,), precisions=("32-true",), graph_precisions=(),
                 profile_steps=1, warmup_steps=1, steps=2, train_pairs=200, per_bucket=2,
                 decode_batches=(4, 16), gemm_size=64, gemm_window_s=0.002, tiny_width=16,
                 tiny_vocab=64),
}


def plan_for(size: str, device: str = "cuda") -> Plan:
    """``size`` tiny, quick or full on ``device`` (a CPU's: cpu_quick and cpu)."""
    if size == "tiny" or device != "cpu":
        return PLANS[size]
    return PLANS["cpu" if size == "full" else "cpu_quick"]


@dataclasses.dataclass(frozen=True)
class BenchModel:
    name: str
    train: TrainConfig
    vocab: int
    kind: str = "search"

    @property
    def config(self) -> ModelConfig:
        return self.train.model_config(self.kind)


def bench_models(plan: Plan, params_path: Path) -> list[BenchModel]:
    """The plan's models (the paper's width: ``presets/paper.yaml``), tiny for the smoke run."""
    params = read_params(params_path)
    models = []
    for width, kind in plan.models:
        merged = params if width == "default" else merge(params, load_preset(width))
        train = from_dict(TrainConfig, merged["train"], f"{width}.train")
        if plan.tiny_width:
            train = dataclasses.replace(train, base_model=shrink(train.base_model,
                                                                 plan.tiny_width))
        vocab = plan.tiny_vocab or merged["tokenize"]["vocab_size_tgt"]
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


def training_runs(model: BenchModel, plan: Plan, device: str) -> list[tuple[int, str, bool]]:
    """(batch, precision, CUDA graphs): each batch and precision, eager and (GPU) graphed."""
    graphed = plan.graph_precisions if device == "cuda" and model.config.model == "search" else ()
    return [(batch, precision, graphs) for batch in sorted({model.train.data.batch_size,
                                                            *plan.batches})
            for precision, graphs in [(p, False) for p in plan.precisions]
            + [(p, True) for p in graphed]]


def profile_training(model: BenchModel, data_dir: Path, device: str, plan: Plan
                     ) -> list[dict[str, Any]]:
    """Profile of steps on a median-length batch after an untimed one; eager and (GPU) graphed."""
    batch = load_batches(data_dir, model.vocab, model.train.data.batch_size).median()
    rows = []
    for graphs in (False, True) if device == "cuda" else (False,):
        task, optimizer = new_training(model.config, model.vocab, model.train.optim)
        task.to(device)
        if graphs:
            enable_cuda_graphs(task.model)
        on_device = (pad_to_shape(batch, model.train.data.batch_size,
                               model.train.trainer.graph_length_multiple)
                     if graphs else batch).to(device)
        row = {"model": model.name, "batch": batch.src.size(0), "cuda_graphs": graphs,
               "src_len": batch.src.size(1), "tgt_len": batch.tgt_in.size(1)}

        def step() -> None:
            train_step(task, optimizer, on_device)

        rows.append(measured(row, lambda: (step(), profile_steps(step, plan.profile_steps,
                                                                  device))[1]))
        task = optimizer = None   # the profiled model's memory goes before the next
        release(device)
    return rows


def training_arithmetic(model: BenchModel, data_dir: Path, device: str, plan: Plan, batch: int,
                        kinds: tuple[str, ...] = ("fp32", "bf16")) -> dict[str, Any]:
    """:func:`~rnnsearch.bench.ops.arithmetic` of the train stage's step on a median-length
    batch: FLOPs per target token, the products' rates, the roofline."""
    data = load_batches(data_dir, model.vocab, batch).median().to(device)
    task, optimizer = new_training(model.config, model.vocab, model.train.optim)
    task.to(device)
    step = partial(train_step, task, optimizer, data)
    return {"batch": batch, "src_len": data.src.size(1), "tgt_len": data.tgt_in.size(1),
            **arithmetic(step, data.target_tokens, device, plan.gemm_window_s, kinds)}


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


def decode_speed(model: BenchModel, sources: list[list[int]], device: str, plan: Plan
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows per method and decode batch size (with peak memory), and profiles of one batch."""
    torch.manual_seed(0)
    net = build_model(model.config, model.vocab, model.vocab).to(device).eval()
    rows = []
    for method, (beam, stop) in ((m, METHODS[m]) for m in plan.methods):
        for batch in [b for b in plan.decode_batches if b > 1 or stop == "first_k"]:
            reset_peak_memory(device)
            row = measured({"model": model.name, "method": method, "batch": batch},
                           lambda: {"result": decode(net, sources, beam, batch, device,
                                                     stop=stop)})
            row["peak_memory_mib"] = peak_memory_mib(device)
            rows.append(row)
            if "error" not in row:
                result = row.pop("result")
                tokens = sum(len(t.best.tokens) for t in result.translations)
                row.update(sentences_per_s=result.sentences_per_second,
                           tokens_per_s=tokens / result.seconds if result.seconds else 0.0,
                           mean_output_tokens=tokens / max(len(result.translations), 1))
            if batch == max(plan.decode_batches) and "error" not in row:
                counted = measured({}, arithmetic, partial(decode, net, sources, beam, batch,
                                                           device, False, stop),
                                   len(sources), device, plan.gemm_window_s, ("fp32",),
                                   "sentences")
                row.update({"arithmetic_error": counted["error"]} if "error" in counted
                           else counted)
    batch = max(plan.decode_batches)          # profiled: one batch of sentences of every length
    subset = sources[:: max(1, len(sources) // batch)][:batch]
    profiles = [measured({"model": model.name, "method": method, "sentences": len(subset)},
                         profile_decode_batch, net, subset, METHODS[method][0], device)
                for method in plan.methods if METHODS[method][1] == "first_k"
                ] if plan.profile_steps else []
    net = None
    release(device)
    return rows, profiles


def profile_decode_batch(net: torch.nn.Module, sources: Sequence[Sequence[int]], beam: int,
                         device: str) -> dict[str, Any]:
    """``sources`` decoded as one batch to warm up, then the profiler's account of it again."""
    one_batch = partial(decode, net, sources, beam, len(sources), device, False)
    one_batch()
    return profile_steps(one_batch, 1, device)


def run(device: str, size: str, params_path: Path, about: dict[str, Any] | None = None,
        save: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    """Every measurement of the plan on ``device`` (``about``: the machine); ``save`` gets the
    results so far after each part, so a run cut by a time limit leaves what it had."""
    plan = plan_for(size, device)
    n = plan.gemm_size
    results: dict[str, Any] = {
        "machine": about or machine(device), "plan": dataclasses.asdict(plan),
        "card": {f"tflops_{name}": measure_gemm(n, n, n, dtype, plan.gemm_window_s, 3, device)
                 / 1e3 for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))},
        "training": [], "arithmetic": [], "decoding": [], "profile": [],
        "profile_decoding": [], "padding": {}, "seconds": {}}

    def checkpoint() -> None:
        if save:
            save(results)

    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        models = bench_models(plan, params_path)
        for model in models:
            bench_model(model, plan, device, Path(tmp), results, checkpoint)
    return results


def bench_model(model: BenchModel, plan: Plan, device: str, tmp: Path, results: dict[str, Any],
                checkpoint: Callable[[], None]) -> None:
    """Every measurement of one model, ``checkpoint()`` after each training run and later part;
    on a CPU also the fp32 GEMM rate before training (the noisy-row drift check's)."""
    start = time.perf_counter()
    print(f"bench: {model.name} model on {device} ...", flush=True)
    data_dir, own = tmp / f"data-{model.vocab}", model.train.data.batch_size
    write_synthetic_corpus(data_dir, model.vocab, plan.train_pairs)
    before = (training_arithmetic(model, data_dir, device, plan, own, ("fp32",))
              if device == "cpu" and not plan.tiny_width else {})
    results["padding"][model.name] = load_batches(data_dir, model.vocab, own).padding_fraction()
    for batch, precision, graphs in training_runs(model, plan, device):
        row = train_speed(model, data_dir, device, batch, precision, plan.warmup_steps,
                          plan.steps, tmp, graphs)
        print(f"bench:   batch {batch} {precision}{' graphs' if graphs else ''}: "
              f"{row.get('tokens_per_s', 0):,.0f} tokens/s", flush=True)
        results["training"].append(row)
        checkpoint()
    if plan.profile_steps:
        results["profile"] += profile_training(model, data_dir, device, plan)
    batches = sorted({own, *plan.batches})
    for batch in sorted({batches[0], batches[-1]}):
        row = measured({"model": model.name, "batch": batch}, training_arithmetic, model,
                       data_dir, device, plan, batch)
        if before and batch == own:
            row["gemm_gflops_fp32_before"] = before["gemm_gflops_fp32"]
        results["arithmetic"].append(row)
    checkpoint()
    sources = stratified_sources(model.vocab, plan.per_bucket)
    rows, profiles = decode_speed(model, sources, device, plan)
    results["decoding"] += rows
    results["profile_decoding"] += profiles
    results["seconds"][model.name] = round(time.perf_counter() - start, 1)
    checkpoint()
