"""DVC stage ``translate`` (one grid cell, ``--cell search-50``): decode the tokenised test set
greedily and with beam search. Writes in ``data/translations/<cell>/``:

* ``<system>.tok.txt`` / ``.detok.txt``: one hypothesis per line; systems are the methods and,
  with ``unk_replace`` (attention, word units), ``<method>_unk``;
* ``beam.nbest.txt``: Moses n-best ``index ||| hypothesis ||| score ||| normalised``;
* ``attention.npz``: ``<method>/<index>`` -> float16 ``tgt x src`` matrices;
* ``meta.json``: cell, model config, device, systems, search options, decode speed;

and ``metrics/alignments/<cell>.json`` (:func:`alignment_samples`) for the report's Figure 3.
Hypotheses do not depend on ``translate.device`` or the batch size, up to floating-point ties."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rnnsearch import tracking
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.config.methods import UNK_SUFFIX
from rnnsearch.config.translate import TranslateConfig, method_options, resolve_device
from rnnsearch.data.textio import read_lines, write_json, write_lines
from rnnsearch.data.subword import TextUnits
from rnnsearch.decoding.corpus import CorpusResult
from rnnsearch.decoding.translator import Translator
from rnnsearch.stages.runner import Stage, StageContext


def decode_all(translator: Translator, sources: Sequence[Sequence[str]], cfg: TranslateConfig,
               batch_size: int) -> dict[str, CorpusResult]:
    """Each method of ``cfg.methods`` over every source, ``batch_size`` sentences at a time."""
    return {method: translator.translate(sources, method, method_options(cfg.search, method),
                                         batch_size)
            for method in cfg.methods}


def warm_up(translator: Translator, sources: Sequence[Sequence[str]], cfg: TranslateConfig
            ) -> None:
    """Decode one sentence per method: one-off set-up (CUDA context, cuBLAS) must not be timed."""
    for method in cfg.methods:
        translator.translate(sources[:1], method, method_options(cfg.search, method), 1,
                             progress=False)


def measure_speed(translator: Translator, sources: Sequence[Sequence[str]],
                  results: dict[str, CorpusResult], cfg: TranslateConfig, batch_size: int
                  ) -> dict[str, Any]:
    """Sentences/s of each method: the batched full run, and ``speed_sentences`` one at a time."""
    speed: dict[str, Any] = {}
    subset = list(sources[: cfg.speed_sentences])
    for method, result in results.items():
        speed[method] = {"sentences_per_s": round(result.sentences_per_second, 2),
                         "seconds": round(result.seconds, 2), "sentences": len(sources),
                         "batch_size": batch_size}
        if subset:
            alone = translator.translate(subset, method, method_options(cfg.search, method), 1,
                                         progress=False)
            speed[f"{method}_unbatched"] = {
                "sentences_per_s": round(alone.sentences_per_second, 2),
                "seconds": round(alone.seconds, 2), "sentences": len(subset), "batch_size": 1}
    return speed


def unk_skipped(cfg: TranslateConfig, translator: Translator, units: TextUnits) -> str | None:
    """Why an asked-for ``translate.unk_replace`` is skipped (subword units: rare words are
    pieces, not ``<unk>``, and a piece is no word to copy); None otherwise."""
    if not (cfg.unk_replace and translator.has_attention and units.subwords):
        return None
    return (f"skipped: {units.units} units spell rare words in pieces, so the model emits no "
            f"<unk> for them, and a source piece is no word to copy")


def write_systems(out: Path, translator: Translator, sources: Sequence[Sequence[str]],
                  results: dict[str, CorpusResult], cfg: TranslateConfig, tgt_lang: str,
                  units: TextUnits) -> list[str]:
    """Write each system's tokenised and detokenised (by ``units``) output; returns their names."""
    replace = (cfg.unk_replace and translator.has_attention
               and unk_skipped(cfg, translator, units) is None)
    variants = [False, True] if replace else [False]
    systems = []
    for method, result in results.items():
        for unk in variants:
            name = f"{method}{UNK_SUFFIX}" if unk else method
            words = [translator.target_words(t.best, src, unk)
                     for t, src in zip(result.translations, sources)]
            write_lines(out / f"{name}.tok.txt", [" ".join(w) for w in words])
            write_lines(out / f"{name}.detok.txt", [units.text(w, tgt_lang) for w in words])
            systems.append(name)
    if "beam" in results:
        _write_nbest(out / "beam.nbest.txt", translator, sources, results["beam"])
    return systems


def _write_nbest(path: Path, translator: Translator, sources: Sequence[Sequence[str]],
                 result: CorpusResult) -> None:
    """Moses n-best lines: ``index ||| tokens ||| score ||| normalised score``."""
    lines = []
    for index, (translation, src) in enumerate(zip(result.translations, sources)):
        for h in translation.hypotheses:
            words = " ".join(translator.target_words(h, src))
            lines.append(f"{index} ||| {words} ||| {h.score:.4f} ||| {h.norm_score:.4f}")
    write_lines(path, lines)


def sample_indices(sources: Sequence[Sequence[str]], cfg: TranslateConfig) -> list[int]:
    """The first ``samples`` sentences of 5 to ``sample_max_len`` words (the same in every cell)."""
    fits = [i for i, s in enumerate(sources) if 5 <= len(s) <= cfg.sample_max_len]
    return fits[: cfg.samples]


def write_attention(path: Path, results: dict[str, CorpusResult], indices: Sequence[int]) -> int:
    """``attention.npz`` with the matrices of ``indices`` (float16); returns how many."""
    arrays = {f"{method}/{i}": result.translations[i].best.attention.astype(np.float16)
              for method, result in results.items() for i in indices
              if result.translations[i].best.attention is not None}
    np.savez_compressed(path, **arrays)
    return len(arrays)


def alignment_samples(translator: Translator, sources: Sequence[Sequence[str]],
                      results: dict[str, CorpusResult], indices: Sequence[int]) -> list[dict]:
    """Words and rounded attention of sample sentences, for Figure 3 (empty without attention)."""
    if not translator.has_attention:
        return []
    method = "beam" if "beam" in results else next(iter(results))
    samples = []
    for i in indices:
        best = results[method].translations[i].best
        samples.append({"index": i, "method": method,
                        "source": translator.source_labels(sources[i]),
                        "target": translator.tgt_vocab.decode(best.tokens, strip_specials=False),
                        "attention": np.round(best.attention, 3).tolist()})
    return samples


def write_meta(path: Path, cell: str, translator: Translator, cfg: TranslateConfig,
               systems: list[str], speed: dict[str, Any], n_sentences: int,
               unk_note: str | None = None) -> dict[str, Any]:
    """``meta.json``: what was decoded, on which device, how, and how fast (and ``unk_replace``:
    why UNK replacement was skipped, where it was)."""
    config = getattr(translator.model, "config", None)
    meta = {"cell": cell,
            "model": dataclasses.asdict(config) if dataclasses.is_dataclass(config) else {},
            "has_attention": translator.has_attention, "device": translator.device,
            "sentences": n_sentences,
            "systems": systems, "search": dataclasses.asdict(cfg.search), "speed": speed,
            **({"unk_replace": unk_note} if unk_note else {})}
    write_json(path, meta)
    return meta


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cell", required=True, help="grid cell, e.g. search-50")
    parser.add_argument("--models", type=Path, default=Path("data/models"))
    parser.add_argument("--tokenized", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--out", type=Path, default=Path("data/translations"))
    parser.add_argument("--alignments", type=Path, default=Path("metrics/alignments"))


def write_outputs(args: argparse.Namespace, ctx: StageContext, translator: Translator,
                  sources: list[list[str]], results: dict[str, CorpusResult],
                  cfg: TranslateConfig, tgt_lang: str, units: TextUnits, speed: dict[str, Any]
                  ) -> None:
    """The cell's translations folder (atomically) and its alignment samples."""
    indices = sample_indices(sources, cfg)
    with ctx.output_dir(args.out / args.cell) as tmp:
        systems = write_systems(tmp, translator, sources, results, cfg, tgt_lang, units)
        kept = range(len(sources)) if cfg.attention == "all" else indices
        write_attention(tmp / "attention.npz", results, [] if cfg.attention == "none" else kept)
        write_meta(tmp / "meta.json", args.cell, translator, cfg, systems, speed, len(sources),
                   unk_skipped(cfg, translator, units))
    ctx.write_json(args.alignments / f"{args.cell}.json",
                   {"cell": args.cell,
                    "samples": alignment_samples(translator, sources, results, indices)})


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Decode the test set with every method, write the outputs, log the decode speed."""
    cfg = ctx.section(TranslateConfig)          # translate.device: cuda without a GPU fails here
    tgt_lang = ctx.section(PrepareConfig, "prepare").tgt_lang
    device = resolve_device(cfg.device)
    batch_size = cfg.batch_size_for(device)
    units = TextUnits.read(args.tokenized)      # a subword model missing or stale fails here
    translator = Translator.load(args.models / args.cell / "model.pt", args.tokenized,
                                 cfg.source_eos, device)
    lines = read_lines(args.tokenized / "test.src")
    sources = [line.split() for line in lines[: cfg.max_sentences or None]]
    warm_up(translator, sources, cfg)
    results = decode_all(translator, sources, cfg, batch_size)
    speed = measure_speed(translator, sources, results, cfg, batch_size)
    write_outputs(args, ctx, translator, sources, results, cfg, tgt_lang, units, speed)
    for name, row in speed.items():
        print(f"translate {args.cell}: {name}: {row['sentences_per_s']} sentences/s "
              f"(batch {row['batch_size']}, {row['sentences']} sentences, {device})")
    params = {**dataclasses.asdict(cfg), "device_used": device, "batch_size_used": batch_size}
    note = unk_skipped(cfg, translator, units)
    if note:
        print(f"translate {args.cell}: unk_replace {note}")
        params["unk_replace_used"] = False
    with ctx.mlflow_run(params, run_name=f"translate-{args.cell}",
                        tags={"cell": args.cell, "device": device}):
        tracking.log_numeric_metrics({"speed": speed})


STAGE = Stage("translate", __doc__, add_arguments,
              lambda a: [a.out / a.cell, a.alignments / f"{a.cell}.json"], body)
