"""``python -m rnnsearch.bench --device cuda``: training and decoding speed on one device.

Writes ``reports/bench_gpu.json`` and ``reports/bench_gpu.md`` (``--device cpu``:
``bench_device_cpu.*``). ``--tiny`` shrinks every size so that the same code runs in seconds on
a CPU (its numbers mean nothing); the tests run it that way.

Two models: the default run's (params.yaml's ``train``: RNNsearch, embedding = hidden = 256, 10k
vocabularies, Adam) and the paper's width (``presets/paper.yaml``: E620, H1000, maxout 500, 30k
vocabularies, Adadelta). For each:

* **training the train stage's way**: the stage's Trainer and task without checkpoints or MLflow
  (:mod:`rnnsearch.training.harness`: deterministic as in params.yaml, gradient clipping) over
  its bucketed :class:`~rnnsearch.training.data.TranslationDataModule`, at each batch size of
  the plan (the paper's 80 and larger ones) and each precision (``32-true``, ``bf16-mixed``).
  Target tokens/s over the timed steps after a warm-up, wall clock (data loading and Lightning's
  loop included, the GPU drained at both ends), and the peak memory
  (``torch.cuda.max_memory_allocated``; on a CPU the process' peak resident memory, which only
  grows);
* **arithmetic**: FLOPs per target token (:mod:`rnnsearch.bench.flops`); times tokens/s, the rate
  achieved, against the card's GEMM rate (a large square product, measured) and against the
  roofline of the model's own GEMM shapes measured on the device (:mod:`rnnsearch.bench.gemm`);
* **decoding** on the device: greedy and beam 5 over a test set shaped like the default run's
  (300 sentences per source-length bucket 1-10, ..., 51-60, 61-80: 2,100), at each decode batch
  size of the plan (the fastest is the candidate for ``translate.batch_size_cuda``), with the
  peak memory; for the default model, how many best hypotheses differ from the CPU's on a
  quarter of those sentences.

The data are synthetic: random words of the model's vocabulary; training pairs with lengths drawn
like the default run's Hansard sample (source median 15, mean 17 words; target 1.13 times as long;
at most 50 words, the max-50 cell). Speed depends on shapes, not on which words they are. The
models are not trained to translate, and an untrained model rarely ends a sentence: decoding runs
to its length limit, set to the source length + 1 (``max_len_a: 1``, ``max_len_b: 1``), about as
long as real translations.

Nothing here imports mlflow, dvc, gensim or sacremoses: a GPU box with only torch, Lightning,
numpy, PyYAML and tqdm installed runs the bench.
"""
from __future__ import annotations

import dataclasses
import random
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import TQDMProgressBar

from rnnsearch.bench.flops import Shape, model_gemms, training_flops_per_token
from rnnsearch.bench.gemm import (effective_gflops, measure_gemm, measure_model_gemms,
                                  roofline_tokens_per_second)
from rnnsearch.bench.profile import profile_device_steps
from rnnsearch.config.base import from_dict, read_params
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.repository import load_preset, repo_root
from rnnsearch.config.train import TrainConfig
from rnnsearch.config.trees import merge
from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.decoding.compare import differences
from rnnsearch.decoding.corpus import CorpusResult, translate_corpus
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.models.seq2seq import build_model
from rnnsearch.device import (failure, machine, peak_memory_mib, release, reset_peak_memory,
                              synchronize)
from rnnsearch.training.data import (Batch, TranslationDataModule, bucket_batches, collate,
                                     pad_batch, read_pairs)
from rnnsearch.training.graphs import enable_cuda_graphs
from rnnsearch.training.harness import bare_task, bare_trainer, device_config, shrink, train_step
from rnnsearch.training.module import TranslationTask

MAX_LEN = 50                                   # the max-50 cell's training pairs
TEST_BUCKETS = ((1, 10), (11, 20), (21, 30), (31, 40), (41, 50), (51, 60), (61, 80))
METHODS = {"greedy": 1, "beam5": 5}            # name -> beam size


@dataclasses.dataclass(frozen=True)
class Plan:
    """The sizes one bench run uses (:func:`plan_for`)."""

    batches: tuple[int, ...]          # training batch sizes besides each model's own (pairs)
    precisions: tuple[str, ...]       # Lightning precisions
    graph_precisions: tuple[str, ...] # precisions also run with train.trainer.cuda_graphs
    profile_steps: int                # steps under the profiler, eager and graphed
    warmup_steps: int                 # untimed steps before the timed ones
    steps: int                        # timed training steps
    train_pairs: int                  # synthetic training pairs per vocabulary
    per_bucket: int                   # decode sentences per source-length bucket
    decode_batches: tuple[int, ...]   # decode batch sizes
    gemm_size: int                    # n of the n x n x n product that measures the card
    gemm_window_s: float              # timing window of each GEMM measurement (3 windows)
    tiny_width: int = 0               # > 0: every model this wide (the smoke run)
    tiny_vocab: int = 0               # > 0: every vocabulary this large


PLANS = {
    # Sized for a GPU, about four minutes: every batch size in both precisions, eager and graphed.
    "full": Plan(batches=(80, 256, 1024), precisions=("32-true", "bf16-mixed"),
                 graph_precisions=("32-true", "bf16-mixed"), profile_steps=5, warmup_steps=5,
                 steps=20, train_pairs=40_000, per_bucket=300,
                 decode_batches=(64, 256, 512, 1024), gemm_size=8192, gemm_window_s=0.05),
    # What the targets need, in a short GPU session: each model's own batch and 1024, fp32 and
    # bf16 eager, bf16 graphed; the 2,100-sentence decode.
    "quick": Plan(batches=(1024,), precisions=("32-true", "bf16-mixed"),
                  graph_precisions=("bf16-mixed",), profile_steps=3, warmup_steps=3, steps=12,
                  train_pairs=20_000, per_bucket=300, decode_batches=(512, 1024),
                  gemm_size=8192, gemm_window_s=0.03),
    # The seconds-long smoke run (numbers mean nothing): the same code on a CPU.
    "tiny": Plan(batches=(16,), precisions=("32-true",), graph_precisions=(), profile_steps=1,
                 warmup_steps=1, steps=2, train_pairs=200, per_bucket=2, decode_batches=(4, 16),
                 gemm_size=64, gemm_window_s=0.002, tiny_width=16, tiny_vocab=64),
}


def plan_for(size: str) -> Plan:
    """The plan called ``size``: ``full``, ``quick`` or ``tiny`` (:data:`PLANS`)."""
    return PLANS[size]


@dataclasses.dataclass(frozen=True)
class BenchModel:
    """One model of the bench: its name, the train section it trains under, its vocabulary."""

    name: str
    train: TrainConfig
    vocab: int

    @property
    def config(self) -> ModelConfig:
        """The RNNsearch variant of this train section."""
        return self.train.model_config("search")


def bench_models(plan: Plan, params_path: Path) -> list[BenchModel]:
    """The default run's model (``params_path``) and the paper's (``presets/paper.yaml`` merged
    over it), shrunk to ``plan.tiny_width`` for the smoke run."""
    params = read_params(params_path)
    models = []
    for name, merged in (("default", params), ("paper", merge(params, load_preset("paper")))):
        train = from_dict(TrainConfig, merged["train"], f"{name}.train")
        vocab = merged["tokenize"]["vocab_size_tgt"]
        if plan.tiny_width:
            base = shrink(train.base_model, plan.tiny_width)
            train, vocab = dataclasses.replace(train, base_model=base), plan.tiny_vocab
        models.append(BenchModel(name, train, vocab))
    return models


# ---- synthetic data -----------------------------------------------------------------------------

def synthetic_vocabulary(size: int) -> Vocabulary:
    """The specials and ``size - 4`` made-up words ``w0 w1 ...``."""
    words = SPECIALS + tuple(f"w{i}" for i in range(size - len(SPECIALS)))
    return Vocabulary(words, (0,) * len(words))


def training_lengths(rng: random.Random) -> tuple[int, int]:
    """A (source, target) length pair shaped like the default run's Hansard sample: a gamma
    distribution of median about 15 and mean about 17 words, targets about 1.13 times longer."""
    src = max(1, round(rng.gammavariate(2.2, 7.8)))
    tgt = max(1, round(src * 1.13 * rng.uniform(0.85, 1.15)))
    return src, tgt


def write_synthetic_corpus(out: Path, vocab_size: int, pairs: int, seed: int = 0) -> Shape:
    """``train``/``dev`` ``.src``/``.tgt`` of random words and both vocabularies in ``out`` (the
    tokenize stage's layout); returns the mean lengths of the pairs the max-50 cell keeps."""
    rng = random.Random(seed)
    vocab = synthetic_vocabulary(vocab_size)
    words = vocab.words[len(SPECIALS):]
    out.mkdir(parents=True, exist_ok=True)
    vocab.save(out / "vocab.src.txt")
    vocab.save(out / "vocab.tgt.txt")
    kept = [0, 0, 0]                                       # pairs, source and target words
    for split, count in (("train", pairs), ("dev", max(8, pairs // 100))):
        lines: dict[str, list[str]] = {"src": [], "tgt": []}
        for _ in range(count):
            src, tgt = training_lengths(rng)
            lines["src"].append(" ".join(rng.choices(words, k=src)))
            lines["tgt"].append(" ".join(rng.choices(words, k=tgt)))
            if split == "train" and max(src, tgt) <= MAX_LEN:
                kept = [kept[0] + 1, kept[1] + src, kept[2] + tgt]
        for side, text in lines.items():
            (out / f"{split}.{side}").write_text("\n".join(text) + "\n", encoding="utf-8")
    return Shape(src_len=kept[1] / kept[0], tgt_len=kept[2] / kept[0] + 1, tgt_vocab=vocab_size)


def stratified_sources(vocab_size: int, per_bucket: int, seed: int = 1) -> list[list[int]]:
    """Source id lists stratified like the default run's test set: ``per_bucket`` sentences of
    uniformly drawn length in each bucket of :data:`TEST_BUCKETS`."""
    rng = random.Random(seed)
    first = len(SPECIALS)
    return [[rng.randrange(first, vocab_size) for _ in range(rng.randint(low, high))]
            for low, high in TEST_BUCKETS for _ in range(per_bucket)]


# ---- training -----------------------------------------------------------------------------------

class StepTimer(pl.Callback):
    """Wall-clock target tokens/s of the training steps after ``warmup`` steps: everything
    between the start of the first timed step and the end of the last (data loading, Lightning's
    loop, the optimizer), the device drained at both ends."""

    def __init__(self, warmup: int, device: str,
                 excluded: Callable[[], float] = lambda: 0.0) -> None:
        """``excluded``: a running total of seconds to leave out (graph captures)."""
        self.warmup, self.device, self.excluded = warmup, device, excluded
        self.start, self.seconds, self.steps = 0.0, 0.0, 0
        self.tokens_before = self.tokens = 0
        self.excluded_before = 0.0

    @staticmethod
    def _tokens(module: pl.LightningModule) -> int:
        # the task's own count of target tokens (taken on the host in its training_step): a
        # count here would add a device synchronisation to every step
        return int(getattr(module, "_tokens_seen"))

    def on_train_batch_start(self, trainer: pl.Trainer, module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if trainer.global_step == self.warmup and not self.start:
            synchronize(self.device)
            self.start, self.tokens_before = time.perf_counter(), self._tokens(module)
            self.excluded_before = self.excluded()

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        if self.start and trainer.global_step == trainer.max_steps:
            synchronize(self.device)
            excluded = self.excluded() - self.excluded_before
            self.seconds = time.perf_counter() - self.start - excluded
            self.steps = trainer.global_step - self.warmup
            self.tokens = self._tokens(module) - self.tokens_before

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def measured(row: dict[str, Any], measure: Callable[..., dict[str, Any]], *args: Any
             ) -> dict[str, Any]:
    """``row`` with what ``measure(*args)`` returns, or with the error that stopped it (out of
    memory, a CUDA failure): a failed measurement costs its own row, not the rest of the
    bench (minutes of GPU time already spent are not lost)."""
    try:
        row.update(measure(*args))
    except RuntimeError as err:
        row["error"] = failure(err)
    return row


def train_speed(model: BenchModel, data_dir: Path, device: str, batch: int, precision: str,
                plan: Plan, work_dir: Path, graphs: bool = False) -> dict[str, Any]:
    """One Lightning run of ``plan.warmup_steps + plan.steps`` steps; its timed tokens/s and
    peak memory (or the error that stopped it, e.g. out of memory).

    With ``graphs`` (``train.trainer.cuda_graphs``) the time spent capturing new batch shapes
    is left out of the timed steps and reported on its own: a real run captures each of its
    few dozen shapes once, in its first minutes, while 20 bench steps meet new shapes often.

    The run's model, trainer and CUDA graphs are gone, and their memory given back, before
    this returns: graphs held past their run (the model and its graph runner refer to each
    other) left the next runs of the first GPU check out of memory.
    """
    reset_peak_memory(device)
    row = _timed_training(model, data_dir, device, batch, precision, plan, work_dir, graphs)
    row["peak_memory_mib"] = peak_memory_mib(device)
    release(device)
    return row


def _timed_training(model: BenchModel, data_dir: Path, device: str, batch: int, precision: str,
                    plan: Plan, work_dir: Path, graphs: bool) -> dict[str, Any]:
    """:func:`train_speed`'s run, whose objects all go when it returns."""
    config = device_config(model.train, device, precision, batch, plan.warmup_steps + plan.steps,
                           cuda_graphs=graphs)
    row: dict[str, Any] = {"model": model.name, "batch": batch, "precision": precision,
                           "cuda_graphs": graphs}
    pl.seed_everything(config.seed, verbose=False)
    data = TranslationDataModule(data_dir, MAX_LEN, batch, config.data.max_padding, 0,
                                 config.seed)
    net = build_model(model.config, model.vocab, model.vocab)
    task, runner = bare_task(config, net)
    timer = StepTimer(plan.warmup_steps, device,
                      (lambda: runner.capture_seconds) if runner else (lambda: 0.0))
    deterministic = torch.are_deterministic_algorithms_enabled()
    # the progress bar the stage gets under dvc repro (a log file: refreshed every 50 steps)
    progress = TQDMProgressBar(refresh_rate=max(config.trainer.log_every_steps, 50))
    trainer = bare_trainer(config, work_dir, [timer, progress])
    try:
        trainer.fit(task, datamodule=data)
    except RuntimeError as err:     # out of memory, or a CUDA failure: the next runs still run
        row["error"] = failure(err)
    else:
        row.update(tokens_per_s=timer.tokens_per_second, steps=timer.steps,
                   ms_per_step=1e3 * timer.seconds / max(timer.steps, 1))
        if runner:
            row.update(runner.stats())
    finally:   # Lightning's deterministic flag is process-wide: decoding must not inherit it
        torch.use_deterministic_algorithms(deterministic)
    if runner:
        runner.release()                   # the graphs' pool, whatever else still refers to it
    return row


def training_batches(model: BenchModel, plan: Plan) -> list[int]:
    """The model's own batch size and the plan's, ascending."""
    return sorted({model.train.data.batch_size, *plan.batches})


def training_runs(model: BenchModel, plan: Plan, device: str) -> list[tuple[int, str, bool]]:
    """(batch, precision, CUDA graphs) of every training measurement: each batch size in each
    precision, eagerly and (on a GPU, RNNsearch) with its decoder loop replayed as graphs."""
    graphed = plan.graph_precisions if device == "cuda" and model.config.model == "search" else ()
    return [(batch, precision, graphs) for batch in training_batches(model, plan)
            for precision, graphs in [(p, False) for p in plan.precisions] +
            [(p, True) for p in graphed]]


def profile_training(model: BenchModel, data_dir: Path, device: str, plan: Plan
                     ) -> list[dict[str, Any]]:
    """Profiler evidence of where a training step's time goes (:func:`profile_device_steps`):
    the model's own batch size, fp32, a batch of median length from the bucketed data, model
    and optimiser as the train stage steps them (:func:`~rnnsearch.training.harness.train_step`),
    eagerly and (on a GPU) with CUDA graphs."""
    batch = median_batch(data_dir, model.vocab, model.train.data.batch_size)
    rows = []
    for graphs in (False, True) if device == "cuda" else (False,):
        torch.manual_seed(0)
        net = build_model(model.config, model.vocab, model.vocab).to(device).train()
        task = TranslationTask(net, model.train.optim)
        step_batch = batch.to(device)
        if graphs:
            enable_cuda_graphs(net)
            step_batch = pad_batch(batch, model.train.data.batch_size,
                                   model.train.trainer.graph_length_multiple).to(device)
        row = {"model": model.name, "batch": batch.src.size(0), "cuda_graphs": graphs,
               "src_len": batch.src.size(1), "tgt_len": batch.tgt_in.size(1)}
        rows.append(measured(row, profile_train_step, task, step_batch, plan.profile_steps,
                             device))
        del net, task
        release(device)
    return rows


def profile_train_step(task: TranslationTask, batch: Batch, steps: int, device: str
                       ) -> dict[str, Any]:
    """One training step to warm up (and capture, with CUDA graphs), then the profiler's
    account of ``steps`` more."""
    optimizer = task.configure_optimizers()
    train_step(task, optimizer, batch)
    return profile_device_steps(partial(train_step, task, optimizer, batch), steps, device)


def median_batch(data_dir: Path, vocab_size: int, batch_size: int) -> Batch:
    """The bucketed training batch of median target length (the train stage's bucketing)."""
    vocab = synthetic_vocabulary(vocab_size)
    pairs, _ = read_pairs(data_dir, "train", vocab, vocab, MAX_LEN)
    lengths = [(len(s), len(t)) for s, t in pairs]
    batches = bucket_batches(lengths, batch_size, 0.1, random.Random(0))
    batches = [b for b in batches if len(b) == batch_size] or batches
    batches.sort(key=lambda b: max(lengths[i][1] for i in b))
    return collate([pairs[i] for i in batches[len(batches) // 2]])


# ---- arithmetic ---------------------------------------------------------------------------------

def card_gemm(device: str, plan: Plan) -> dict[str, float]:
    """TFLOP/s of one large square product on the device, fp32 and bf16 (the card's peak as
    this torch reaches it; fp32 without TF32, torch's default)."""
    n = plan.gemm_size
    return {f"tflops_{name}": measure_gemm(n, n, n, dtype, plan.gemm_window_s, 3, device) / 1e3
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}


def arithmetic(model: BenchModel, shape: Shape, batch: int, device: str, plan: Plan
               ) -> dict[str, Any]:
    """FLOPs per target token at ``batch``, and the roofline of the model's own GEMM shapes
    measured on the device, fp32 and bf16."""
    shape = dataclasses.replace(shape, batch=batch)
    gemms = model_gemms(model.config, shape)
    result: dict[str, Any] = {"batch": batch, "src_len": shape.src_len, "tgt_len": shape.tgt_len,
                              "mflop_per_token": training_flops_per_token(model.config, shape) / 1e6}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        rates = measure_model_gemms(gemms, dtype, plan.gemm_window_s, 3, device)
        result[f"gemm_gflops_{name}"] = effective_gflops(rates)
        result[f"roofline_tokens_per_s_{name}"] = roofline_tokens_per_second(rates)
    return result


# ---- decoding -----------------------------------------------------------------------------------

def decode_options(beam: int) -> SearchOptions:
    """Beam ``beam``, outputs at most one token longer than the source (see the module doc)."""
    return SearchOptions(beam_size=beam, nbest=1, max_len_a=1.0, max_len_b=1)


def decode(model: torch.nn.Module, sources: Sequence[Sequence[int]], beam: int, batch: int,
           device: str) -> CorpusResult:
    """Decode ``sources`` on ``device`` (greedy for ``beam`` 1), one batch warm-up first."""
    method = "greedy" if beam == 1 else "beam"
    with torch.inference_mode():
        translate_corpus(model, sources[:batch], method, decode_options(beam), batch, device,
                         progress=False)
        synchronize(device)
        return translate_corpus(model, sources, method, decode_options(beam), batch, device,
                                progress=False)


def timed_decode(net: torch.nn.Module, sources: Sequence[Sequence[int]], beam: int, batch: int,
                 device: str) -> dict[str, Any]:
    """:func:`decode`'s speed (sentences and output tokens a second), mean output length, and
    its result (``result``, for :func:`agreement`)."""
    result = decode(net, sources, beam, batch, device)
    tokens = sum(len(t.best.tokens) for t in result.translations)
    sentences = max(len(result.translations), 1)
    return {"sentences_per_s": result.sentences_per_second,
            "tokens_per_s": tokens / result.seconds if result.seconds else 0.0,
            "mean_output_tokens": tokens / sentences, "result": result}


def decode_speed(model: BenchModel, sources: list[list[int]], device: str, plan: Plan
                 ) -> tuple[list[dict[str, Any]], dict[str, CorpusResult]]:
    """Sentences/s and output tokens/s of each method at each decode batch size, with the
    peak memory (or the error that stopped it); also the results at the largest batch size
    that decoded (for :func:`agreement`)."""
    torch.manual_seed(0)
    net = build_model(model.config, model.vocab, model.vocab).to(device).eval()
    rows, last = [], {}
    for method, beam in METHODS.items():
        for batch in plan.decode_batches:
            reset_peak_memory(device)
            row = measured({"model": model.name, "method": method, "batch": batch},
                           timed_decode, net, sources, beam, batch, device)
            row["peak_memory_mib"] = peak_memory_mib(device)
            rows.append(row)
            if "error" not in row:
                last[method] = row.pop("result")
    del net
    release(device)
    return rows, last


def profile_decoding(model: BenchModel, sources: list[list[int]], device: str, plan: Plan
                     ) -> list[dict[str, Any]]:
    """Profiler evidence for decoding (:func:`profile_device_steps`): one batch of the largest
    decode batch size, sentences of every length, per method, after a warm-up batch."""
    torch.manual_seed(0)
    net = build_model(model.config, model.vocab, model.vocab).to(device).eval()
    batch = max(plan.decode_batches)
    subset = sources[:: max(1, len(sources) // batch)][:batch]
    rows = []
    for method, beam in METHODS.items():
        rows.append(measured({"model": model.name, "method": method, "sentences": len(subset)},
                             profile_decode_batch, net, subset, beam, device))
    del net
    release(device)
    return rows


def profile_decode_batch(net: torch.nn.Module, sources: Sequence[Sequence[int]], beam: int,
                         device: str) -> dict[str, Any]:
    """``sources`` decoded as one batch (greedy for ``beam`` 1) to warm up, then the profiler's
    account of decoding them again."""
    one_batch = partial(decode_batch, net, sources, beam, device)
    one_batch()
    return profile_device_steps(one_batch, 1, device)


def decode_batch(net: torch.nn.Module, sources: Sequence[Sequence[int]], beam: int, device: str
                 ) -> CorpusResult:
    """``sources`` decoded as one batch (greedy for ``beam`` 1), no warm-up."""
    with torch.inference_mode():
        return translate_corpus(net, sources, "greedy" if beam == 1 else "beam",
                                decode_options(beam), len(sources), device, progress=False)


def agreement(model: BenchModel, sources: list[list[int]], on_device: dict[str, CorpusResult],
              every: int = 4) -> dict[str, Any]:
    """How many best hypotheses of every ``every``-th sentence differ between the device's
    decoding (``on_device``) and the CPU's, per method (the same seeded weights)."""
    torch.manual_seed(0)
    net = build_model(model.config, model.vocab, model.vocab).eval()
    subset = sources[::every]
    report = {}
    for method in on_device:
        cpu = decode(net, subset, METHODS[method], 64, "cpu")
        picked = CorpusResult(on_device[method].translations[::every], 0.0)
        report[method] = differences(cpu, picked)
    return report


# ---- the run ------------------------------------------------------------------------------------

def best_rows(rows: list[dict[str, Any]], key: str, *group: str) -> list[dict[str, Any]]:
    """The row with the highest ``key`` in each group of equal ``group`` fields."""
    best: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        name = tuple(row[g] for g in group)
        if key in row and (name not in best or row[key] > best[name][key]):
            best[name] = row
    return list(best.values())


def run(device: str, size: str, params_path: Path | None = None,
        save: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    """Every measurement of the plan on ``device``; JSON-ready. ``save`` is called with the
    results so far after each measurement, so that a run stopped by a time limit leaves
    everything it had measured."""
    plan = plan_for(size)
    models = bench_models(plan, params_path or repo_root() / "params.yaml")
    results: dict[str, Any] = {"machine": machine(device), "plan": dataclasses.asdict(plan),
                               "card": card_gemm(device, plan), "training": [], "arithmetic": [],
                               "decoding": [], "agreement": {}, "profile": [], "profile_decoding": [],
                               "seconds": {}}

    def checkpoint() -> None:
        results["best_training"] = best_rows(results["training"], "tokens_per_s", "model")
        results["best_decoding"] = best_rows(results["decoding"], "sentences_per_s", "model",
                                             "method")
        if save:
            save(results)

    with tempfile.TemporaryDirectory(prefix="bench-device-") as tmp:
        for model in models:
            bench_model(model, plan, device, Path(tmp), results, checkpoint)
    return results


def bench_model(model: BenchModel, plan: Plan, device: str, tmp: Path, results: dict[str, Any],
                checkpoint: Callable[[], None]) -> None:
    """Every measurement of one model, added to ``results``, with ``checkpoint()`` after each
    training configuration and each later part."""
    start = time.perf_counter()
    print(f"bench: {model.name} model on {device} ...", flush=True)
    data_dir = tmp / f"data-{model.vocab}"
    shape = write_synthetic_corpus(data_dir, model.vocab, plan.train_pairs)
    for batch, precision, graphs in training_runs(model, plan, device):
        row = train_speed(model, data_dir, device, batch, precision, plan, tmp, graphs)
        print(f"bench:   batch {batch} {precision}{' graphs' if graphs else ''}: "
              f"{row.get('tokens_per_s', 0):,.0f} tokens/s", flush=True)
        results["training"].append(row)
        checkpoint()
    results["profile"] += profile_training(model, data_dir, device, plan)
    batches = training_batches(model, plan)
    for batch in sorted({batches[0], batches[-1]}):
        results["arithmetic"].append(measured(
            {"model": model.name, "batch": batch},
            lambda: arithmetic(model, shape, batch, device, plan)))
    checkpoint()
    sources = stratified_sources(model.vocab, plan.per_bucket)
    rows, last = decode_speed(model, sources, device, plan)
    results["decoding"] += rows
    checkpoint()
    results["profile_decoding"] += profile_decoding(model, sources, device, plan)
    if model.name == "default":
        results["agreement"] = agreement(model, sources, last)
    results["seconds"][model.name] = round(time.perf_counter() - start, 1)
    checkpoint()


def report_name(device: str) -> str:
    """The report files' stem: ``bench_gpu`` on a GPU, ``bench_device_cpu`` on the CPU."""
    return "bench_gpu" if device == "cuda" else f"bench_device_{device}"
