"""The benchmark's measurements, each a function returning a JSON-ready dict.

Every part runs in a fresh process (see :mod:`rnnsearch.bench.run`) so that its peak resident
memory (``ru_maxrss``) is its own.
"""
from __future__ import annotations

import gzip
import itertools
import random
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from rnnsearch.bench.flops import Shape, model_gemms, training_flops_per_token
from rnnsearch.bench.gemm import (bf16_supported, effective_gflops, measure_model_gemms,
                                  roofline_tokens_per_second)
from rnnsearch.bench.profile import profile_shares
from rnnsearch.bench.workload import (FUSED_OPTIM, VOCAB, Variant, Workload, load_workload,
                                      measure_side_by_side, measure_training, new_training,
                                      reference_config, train_step)
from rnnsearch.config.model import ModelConfig
from rnnsearch.data.corpora import HANSARD36, locate
from rnnsearch.data.textio import write_lines
from rnnsearch.decoding.corpus import CorpusResult, translate_corpus
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.models.attention import Attention
from rnnsearch.training.data import bucket_batches

HANSARD_LANGS = ("en", "fr")   # source, target: the default run's direction


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (MiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# a --tiny run's workload: 500 training pairs in batches of 16, so that its steps take
# milliseconds even where bf16 is emulated (8 s a step at the reference's 64 on an AVX2 CPU)
TINY_PAIRS, TINY_BATCH = 500, 16


def bench_workload(data: str, tiny: bool) -> Workload:
    """The reference workload (:func:`load_workload` of the cached Multi30k ``data``), or
    a ``--tiny`` run's."""
    if tiny:
        return load_workload(Path(data), batch_size=TINY_BATCH, limit=TINY_PAIRS)
    return load_workload(Path(data))


def workload_shape(work: Workload, batches: int = 200) -> Shape:
    """Mean source/target lengths of the real batches the model trains on."""
    src = tgt = 0
    for index in range(batches):
        batch = work.batch(index)
        src += int(batch.src_len.sum())
        tgt += batch.target_tokens
    sentences = sum(len(work.batches[i % len(work.batches)]) for i in range(batches))
    return Shape(batch=work.batch_size, src_len=src / sentences, tgt_len=tgt / sentences,
                 tgt_vocab=VOCAB)


def arithmetic(model: str, shape: Shape, window_s: float = 0.05) -> dict[str, Any]:
    """FLOPs per target token and the GEMM roofline, fp32 and bf16 (``bf16_native`` says
    whether the CPU has bf16 instructions; without them bf16 products are emulated)."""
    config, native = reference_config(model), bf16_supported()
    gemms = model_gemms(config, shape)
    fp32 = measure_model_gemms(gemms, torch.float32, window_s)
    result = {"mflop_per_token": training_flops_per_token(config, shape) / 1e6,
              "gemm_gflops_fp32": effective_gflops(fp32),
              "roofline_tokens_per_s_fp32": roofline_tokens_per_second(fp32),
              "gemms": [{"name": r.gemm.name, "m": r.gemm.m, "k": r.gemm.k, "n": r.gemm.n,
                         "mflop_per_token": r.gemm.flops_per_token / 1e6, "gflops_fp32": r.gflops}
                        for r in fp32],
              "bf16_native": native}
    # emulated bf16 products are tens of times slower (2 s per call for the output layer on a
    # 2-core AMD EPYC with AVX2): one warm-up call and one timed window are plenty to tell
    bf16 = measure_model_gemms(gemms, torch.bfloat16, window_s, windows=5 if native else 1,
                               warmup=3 if native else 1)
    result.update(gemm_gflops_bf16=effective_gflops(bf16),
                  roofline_tokens_per_s_bf16=roofline_tokens_per_second(bf16))
    return result


def decoding(model: torch.nn.Module, work: Workload, single: int, repeats: int = 3
             ) -> dict[str, Any]:
    """Sentences/s for greedy and beam 5, batched (all test sentences) and one at a time.

    Each speed is the median of ``repeats`` runs (one-sentence decoding in particular varies
    from run to run on a shared machine).
    """
    sources = [s for s, _ in work.test]
    out: dict[str, Any] = {"test_sentences": len(sources), "single_sentences": single,
                           "repeats": repeats}
    for method, beam in (("greedy", 1), ("beam5", 5)):
        name, options = ("greedy" if beam == 1 else "beam"), SearchOptions(beam_size=beam)
        batched = [_decode(model, sources, name, options, 64) for _ in range(repeats)]
        alone = [_decode(model, sources[:single], name, options, 1) for _ in range(repeats)]
        batched_speed = statistics.median(r.sentences_per_second for r in batched)
        single_speed = statistics.median(r.sentences_per_second for r in alone)
        out[method] = {"batched_sent_per_s": batched_speed, "single_sent_per_s": single_speed,
                       "batching_speedup": batched_speed / single_speed,
                       "mean_output_tokens": statistics.mean(
                           len(t.best.tokens) for t in batched[0].translations)}
    return out


def decoding_profile(model: torch.nn.Module, work: Workload) -> dict[str, Any]:
    """Profiler breakdown of batched beam 5 over the test set."""
    sources = [s for s, _ in work.test]
    return profile_shares(lambda: _decode(model, sources, "beam", SearchOptions(beam_size=5), 64), 1)


def _decode(model: torch.nn.Module, sources: list, method: str, options: SearchOptions,
            batch_size: int) -> CorpusResult:
    with torch.inference_mode():
        return translate_corpus(model, sources, method, options, batch_size, progress=False)


def training_profile(config: ModelConfig, work: Workload, steps: int,
                     variant: Variant = Variant()) -> dict[str, Any]:
    """Profiler breakdown of ``steps`` training steps of ``config`` trained as ``variant``, on
    batches it has trained on once before, untimed (as :func:`measure_side_by_side` does)."""
    task, optimizer = variant.new_training(config, work)

    def step(index: int) -> None:
        variant.step(task, optimizer, work.batch(index))

    for index in range(steps):
        step(index)
    batches = iter(range(steps))
    return profile_shares(lambda: step(next(batches)), steps)


# the reference's training beside its variants (measure_side_by_side), the reference first
SIDE_BY_SIDE = {"fp32": Variant(), "bf16_autocast": Variant(bf16=True),
                "bf16_cross_entropy": Variant(bf16=True, bf16_cross_entropy=True),
                "fused_adam": Variant(FUSED_OPTIM), "bf16_fused_adam": Variant(FUSED_OPTIM, True),
                "bf16_cross_entropy_fused_adam": Variant(FUSED_OPTIM, True, True),
                "fused_loss": Variant(fused_loss=True),
                "fused_loss_fused_adam": Variant(FUSED_OPTIM, fused_loss=True),
                "bf16_fused_loss_fused_adam": Variant(FUSED_OPTIM, True, fused_loss=True)}
# the fastest variants, also profiled: in fp32 on every CPU, in bf16 where the CPU has it natively
FASTEST_FP32, FASTEST = "fused_loss_fused_adam", "bf16_cross_entropy_fused_adam"
# without native bf16 the bf16 variants are left out of the side by side: emulated, a step takes
# about 16 times fp32's (8 s on a 2-core AMD EPYC with AVX2), so bf16 autocast gets one short
# round of its own beside fp32, enough to tell a user not to use it there
WITHOUT_NATIVE_BF16 = ("fp32", "fused_adam", "fused_loss", "fused_loss_fused_adam")
EMULATED_BF16 = ("fp32", "bf16_autocast")


def side_by_side_part(config: ModelConfig, work: Workload, bf16_native: bool, tiny: bool
                      ) -> dict[str, Any]:
    """The reference beside its variants (``side_by_side``); where the CPU has no native bf16,
    the variants without bf16, and bf16 autocast's short look beside fp32 (``bf16_emulated``)."""
    rounds, window_steps = (2, 1) if tiny else (5, 10)
    if bf16_native:
        return {"side_by_side": measure_side_by_side(config, work, SIDE_BY_SIDE, rounds,
                                                     window_steps)}
    fp32_variants = {name: SIDE_BY_SIDE[name] for name in WITHOUT_NATIVE_BF16}
    emulated = {name: SIDE_BY_SIDE[name] for name in EMULATED_BF16}
    return {"side_by_side": measure_side_by_side(config, work, fp32_variants, rounds,
                                                 window_steps),
            "bf16_emulated": measure_side_by_side(config, work, emulated, rounds=1,
                                                  window_steps=1 if tiny else 2)["bf16_autocast"]}


def training_part(data: str, model: str, windows: int, window_steps: int,
                  decode_single: int, tiny: bool = False) -> dict[str, Any]:
    """Throughput, padding, arithmetic (and for the reference model, decoding) of one model."""
    work = bench_workload(data, tiny)
    shape = workload_shape(work)
    gemm_window = 0.002 if tiny else 0.05
    gemm_before = effective_gflops(measure_model_gemms(
        model_gemms(reference_config(model), shape), torch.float32, gemm_window))
    speed = measure_training(reference_config(model), work, windows, window_steps)
    result = {"model": model, "tokens_per_s": speed.tokens_per_second, "windows": speed.windows,
              "steps": speed.steps, "padding_fraction": work.padding_fraction(200),
              "mean_src_len": shape.src_len, "mean_tgt_len": shape.tgt_len,
              "gemm_gflops_fp32_before": gemm_before,   # the roofline's rate is measured after
              **arithmetic(model, shape, gemm_window)}
    result["roofline_fraction_fp32"] = result["tokens_per_s"] / result["roofline_tokens_per_s_fp32"]
    result["peak_rss_mb_training"] = peak_rss_mb()
    if decode_single:
        result["decoding"] = decoding(speed.model, work, decode_single)
        result["peak_rss_mb_decoding"] = peak_rss_mb()
        result.update(side_by_side_part(reference_config(model), work, result["bf16_native"],
                                        tiny))
        side = result["side_by_side"]
        bf16 = side.get("bf16_autocast") or result["bf16_emulated"]
        result["bf16_autocast_tokens_per_s"] = bf16["tokens_per_s"]
        result["fused_adam_tokens_per_s"] = side["fused_adam"]["tokens_per_s"]
    # profiled last: the profiler's own memory would count in the peaks above
    result["profile"] = training_profile(reference_config(model), work, 2 if tiny else 10)
    if decode_single:
        profiled = {"profile_fused": FASTEST_FP32}
        if result["bf16_native"]:
            profiled["profile_bf16"] = FASTEST
        for key, variant in profiled.items():
            result[key] = training_profile(reference_config(model), work, 2 if tiny else 10,
                                           SIDE_BY_SIDE[variant])
            result[key]["variant"] = variant
        result["decoding"]["beam5"]["profile"] = decoding_profile(speed.model, work)
    return result


def threads_part(data: str, windows: int, window_steps: int, tiny: bool = False
                 ) -> dict[str, Any]:
    """The reference model's training speed with this process' thread count (what
    ``train.trainer.threads`` sets: 0 is torch's default, one thread per core)."""
    work = bench_workload(data, tiny)
    speed = measure_training(reference_config("search"), work, windows, window_steps)
    return {"threads": torch.get_num_threads(), "tokens_per_s": speed.tokens_per_second}


def allocator_part(data: str, windows: int, window_steps: int, tiny: bool = False
                   ) -> dict[str, Any]:
    """The reference model's training speed under this process' allocator settings
    (:mod:`rnnsearch.allocator`), with its page faults per step (minor: memory the kernel
    maps in and zero-fills; warm-up steps included) and its peak memory."""
    work = bench_workload(data, tiny)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    speed = measure_training(reference_config("search"), work, windows, window_steps)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    return {"tokens_per_s": speed.tokens_per_second, "windows": speed.windows,
            "page_faults_per_step": faults / speed.steps, "peak_rss_mb": peak_rss_mb()}


def epoch_scaling(data: str, sizes: list[int]) -> dict[str, Any]:
    """Seconds for one epoch of the reference model as the training set grows."""
    work = load_workload(Path(data), limit=max(sizes))
    rows = []
    for size in sizes:
        subset = load_subset(work, size)
        task, optimizer = new_training(reference_config("search"), work)
        start = time.perf_counter()
        for index in range(len(subset.batches)):
            train_step(task, optimizer, subset.batch(index))
        rows.append({"pairs": size, "batches": len(subset.batches),
                     "seconds": time.perf_counter() - start})
    return {"epochs": rows}


def load_subset(work: Workload, size: int) -> Workload:
    """The first ``size`` training pairs of ``work``, re-bucketed."""
    train = work.train[:size]
    lengths = [(len(s), len(t)) for s, t in train]
    batches = bucket_batches(lengths, work.batch_size, 0.1, random.Random(0))
    return Workload(train, work.test, batches, work.src_vocab, work.tgt_vocab,
                    work.batch_size)


def attention_scaling(lengths: list[int], batch: int = 64, repeats: int = 5) -> dict[str, Any]:
    """Forward + backward time of additive attention over S = T = L, per (S x T) cell."""
    attention = Attention("additive", 256, 512, 256)
    rows = []
    for length in lengths:
        query = torch.randn(batch, length, 256, requires_grad=True)
        values = torch.randn(batch, length, 512, requires_grad=True)
        mask = torch.ones(batch, length, dtype=torch.bool)
        lens = torch.full((batch,), length)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            context, _ = attention(query, attention.project_keys(values), values, mask, lens)
            context.sum().backward()
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        rows.append({"length": length, "seconds": seconds,
                     "us_per_cell": seconds / (length * length) * 1e6})
    return {"attention": rows}


def hansard_tokenization(mirror: str, workers: int = 2, out: str | None = None,
                         lines: int = 0) -> dict[str, Any]:
    """Seconds to Moses-tokenise both sides of the million-pair Hansard train split (its first
    ``lines`` pairs when given); the tokens go to ``out/train.<lang>`` when ``out`` is given
    (the subword part learns on them)."""
    from rnnsearch.data.tokenize import tokenize_lines   # sacremoses: only this part needs it

    result: dict[str, Any] = {"workers": workers}
    total = 0.0
    for lang in HANSARD_LANGS:
        path = locate(HANSARD36, "train", lang, mirror, ".cache/corpora", allow_download=False)
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            text = [line.rstrip("\n") for line in itertools.islice(handle, lines or None)]
        start = time.perf_counter()
        tokens = tokenize_lines(text, lang, workers=workers, desc=f"tokenize hansard train.{lang}")
        result[f"seconds_{lang}"] = time.perf_counter() - start
        total += result[f"seconds_{lang}"]
        result["pairs"] = len(text)
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            write_lines(Path(out) / f"train.{lang}", tokens)
    result["seconds"] = total
    return result
