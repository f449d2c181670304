"""Do the hypotheses depend on the device? Decode the same sentences on two devices and compare.

    python -m rnnsearch.decoding.device_agreement --model data/models/search-50/model.pt \
        --vocab-dir data/tokenized --sources data/tokenized/test.src --out compare.json

Greedy and beam search (params.yaml's ``translate.search`` when present) decode the tokenised
sources on each device (``translate.batch_size`` / ``batch_size_cuda`` a batch). Per method the
report counts differing best hypotheses, shows the first few with both scores (nearly equal: a
floating-point near-tie; a large gap: a bug), the largest score and attention differences over
identical ones, and each device's speed. ``--seconds S`` bounds the time the methods share. Needs
only torch and the project (runs on a bare GPU machine); ``--devices cpu cpu`` runs it on a CPU."""
from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least, from_dict, read_params
from rnnsearch.config.methods import method_names
from rnnsearch.config.translate import (DEVICES, TranslateConfig, method_options,
                                        resolve_device)
from rnnsearch.data.textio import read_lines, write_json
from rnnsearch.decoding.corpus import CorpusResult
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.decoding.translator import Translator


def differences(first: CorpusResult, second: CorpusResult, examples: int = 5) -> dict[str, Any]:
    """How the best hypotheses of two decodings differ: how many, the first ``examples`` (ids and
    scores of both), and the largest score and attention differences over identical ones."""
    differing: list[int] = []
    score_diff = attention_diff = 0.0
    for index, (a, b) in enumerate(zip(first.translations, second.translations)):
        if a.best.tokens != b.best.tokens:
            differing.append(index)
            continue
        score_diff = max(score_diff, abs(a.best.score - b.best.score))
        if a.best.attention is not None and b.best.attention is not None and a.best.attention.size:
            attention_diff = max(attention_diff,
                                 float(np.abs(a.best.attention - b.best.attention).max()))
    sentences = len(first.translations)
    return {"sentences": sentences, "differing": len(differing),
            "differing_fraction": len(differing) / sentences if sentences else 0.0,
            "max_score_diff_identical": score_diff,
            "max_attention_diff_identical": attention_diff,
            "examples": [{"index": i,
                          "tokens": [list(first.translations[i].best.tokens),
                                     list(second.translations[i].best.tokens)],
                          "scores": [first.translations[i].best.score,
                                     second.translations[i].best.score]}
                         for i in differing[:examples]]}


def decode_within(translators: Sequence[Translator], batch_sizes: Sequence[int],
                  sentences: Sequence[Sequence[str]], method: str, options: SearchOptions,
                  chunk: int, until: float = math.inf) -> list[CorpusResult]:
    """``method`` over ``sentences`` on each translator's device (after an untimed warm-up
    sentence), ``chunk`` sentences at a time on each in turn, no chunk started that would end
    past ``until`` (``time.perf_counter()``) at the last one's pace; one result per translator."""
    for translator in translators:
        translator.translate(sentences[:1], method, options, 1, progress=False)
    parts: list[list[CorpusResult]] = [[] for _ in translators]
    for first in range(0, len(sentences), chunk):
        started = time.perf_counter()
        for part, translator, batch_size in zip(parts, translators, batch_sizes):
            part.append(translator.translate(sentences[first: first + chunk], method, options,
                                             batch_size, progress=False))
        now = time.perf_counter()
        if now + (now - started) > until:
            break
    return [CorpusResult([t for result in part for t in result.translations],
                         sum(result.seconds for result in part)) for part in parts]


def compare_devices(model_path: str | Path, vocab_dir: str | Path,
                    sentences: Sequence[Sequence[str]], devices: Sequence[str],
                    config: TranslateConfig = TranslateConfig(),
                    methods: Sequence[str] | None = None, seconds: float = 0.0
                    ) -> dict[str, Any]:
    """Decode ``sentences`` (lists of words) with the model at ``model_path`` on both
    ``devices``; returns the speeds and, per method (default: all), :func:`differences` of the
    second device against the first. ``seconds`` > 0: the methods share that time, each
    comparing the leading sentences that fit, a chunk at a time (the first chunk always)."""
    methods = method_names() if methods is None else methods
    translators = [Translator.load(model_path, vocab_dir, config.source_eos, device)
                   for device in devices]
    batch_sizes = [config.batch_size_for(device) for device in devices]
    chunk = max(batch_sizes) if seconds else max(len(sentences), 1)
    end = time.perf_counter() + seconds if seconds else math.inf
    results = {}
    for done, method in enumerate(methods):
        now = time.perf_counter()
        results[method] = decode_within(translators, batch_sizes, sentences, method,
                                        method_options(config.search, method), chunk,
                                        now + (end - now) / (len(methods) - done))
    speed = [{"device": device, "batch_size": batch_size, "sentences_per_s": {
        method: round(results[method][index].sentences_per_second, 2) for method in methods}}
        for index, (device, batch_size) in enumerate(zip(devices, batch_sizes))]
    return {"devices": list(devices), "sentences": len(sentences), "seconds": seconds or None,
            "speed": speed, "search": dataclasses.asdict(config.search),
            "methods": {m: differences(*results[m]) for m in methods}}


def _cut_short(report: dict[str, Any], compared: int) -> str:
    """`` (the first N of M in --seconds S)`` where a method compared fewer than all sentences."""
    if compared >= report["sentences"]:
        return ""
    return f" (the first {compared} of {report['sentences']} in --seconds {report['seconds']:g})"


def summary(report: dict[str, Any]) -> list[str]:
    """One line per method: how many best hypotheses differ between the devices (of how many
    compared, where a time budget cut it short)."""
    first, second = report["devices"]
    return [f"{method}: {d['differing']} of {d['sentences']} best hypotheses differ"
            f"{_cut_short(report, d['sentences'])} "
            f"({first} vs {second}); identical ones: score within "
            f"{d['max_score_diff_identical']:.2e}, attention within "
            f"{d['max_attention_diff_identical']:.2e}"
            for method, d in report["methods"].items()]


def translate_config(params_path: str | None, beam_size: int) -> TranslateConfig:
    """The ``translate`` section of ``params_path`` (or of ./params.yaml where there is one;
    else the defaults), with ``beam_size`` (when > 0) overriding ``translate.search``."""
    path = params_path or ("params.yaml" if Path("params.yaml").is_file() else None)
    section = read_params(path).get("translate", {}) if path else {}
    config = from_dict(TranslateConfig, section, "translate")
    if beam_size:
        search = dataclasses.replace(config.search, beam_size=beam_size,
                                     nbest=min(config.search.nbest, beam_size))
        config = dataclasses.replace(config, search=search)
    return config


def model_parser(module: str, description: str | None) -> argparse.ArgumentParser:
    """The parser of a tool that decodes tokenised sources with one trained model."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, type=Path, help="a model.pt of the train stage")
    parser.add_argument("--vocab-dir", required=True, type=Path, help="holds vocab.{src,tgt}.txt")
    parser.add_argument("--sources", required=True, type=Path,
                        help="tokenised sentences, one a line (e.g. data/tokenized/test.src)")
    return parser


def shown_path(path: Path) -> str:
    """``path`` as a report shows it: relative to the working directory when inside it, else
    its folder and name (a temporary folder of one machine tells another reader nothing)."""
    path = path.resolve()
    inside = path.is_relative_to(Path.cwd())
    return (path.relative_to(Path.cwd()) if inside else Path(*path.parts[-2:])).as_posix()


@entry_point("compare")
def main(argv: list[str] | None = None) -> int:
    parser = model_parser("rnnsearch.decoding.device_agreement", __doc__)
    parser.add_argument("--devices", nargs=2, choices=DEVICES, default=["cpu", "cuda"])
    parser.add_argument("--methods", nargs="+", choices=method_names(),
                        default=list(method_names()))
    parser.add_argument("--max-sentences", type=at_least(0), default=0,
                        help="the first N only (0: all)")
    parser.add_argument("--seconds", type=at_least(0, float), default=0.0,
                        help="a time budget: no new chunk of sentences once it is spent, the "
                             "report counting those compared (0: all sentences)")
    parser.add_argument("--beam-size", type=at_least(0), default=0, help="override translate.search")
    parser.add_argument("--params", help="params file (default: ./params.yaml if present)")
    parser.add_argument("--out", type=Path, help="write the report here as JSON")
    args = parser.parse_args(argv)
    config = translate_config(args.params, args.beam_size)
    devices = [resolve_device(name, "--devices") for name in args.devices]
    lines = read_lines(args.sources)[: args.max_sentences or None]
    report = compare_devices(args.model, args.vocab_dir, [line.split() for line in lines],
                             devices, config, args.methods, args.seconds)
    report["model"] = shown_path(args.model)
    if args.out:
        write_json(args.out, report)
    print("\n".join(summary(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
