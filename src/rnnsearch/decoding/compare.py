"""Do the hypotheses depend on the device? Decode the same sentences on two devices and compare.

    python -m rnnsearch.decoding.compare --model data/models/search-50/model.pt \\
        --vocab-dir data/tokenized --sources data/tokenized/test.src --out compare.json

Greedy and beam search (``translate.search`` of params.yaml, when there is one) decode the
tokenised sources (one sentence a line, as the tokenize stage writes them) with the same model on
each device, ``translate.batch_size`` sentences a batch on the CPU and ``translate.batch_size_cuda``
on a GPU. Per method, the report counts the sentences whose best hypothesis differs and shows the
first few with both scores: where the two scores are nearly equal, a floating-point near-tie fell
the other way (GPU kernels add up in another order than the CPU's); a large gap would be a bug.
Over the identical hypotheses it gives the largest score and attention differences; and each
device's speed.

It needs torch and the project only (no Moses tokeniser, no MLflow), so it runs on a GPU machine
that has nothing else installed; ``--devices cpu cpu`` runs the same code on a CPU.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from rnnsearch.config.base import ConfigError, from_dict, read_params
from rnnsearch.config.translate import DEVICES, METHODS, TranslateConfig, resolve_device
from rnnsearch.data.textio import read_lines, write_json
from rnnsearch.decoding.corpus import CorpusResult
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.decoding.translator import Translator


def method_options(options: SearchOptions, method: str) -> SearchOptions:
    """Greedy keeps one hypothesis; beam uses ``options`` as given."""
    return dataclasses.replace(options, beam_size=1, nbest=1) if method == "greedy" else options


def differences(first: CorpusResult, second: CorpusResult, examples: int = 5) -> dict[str, Any]:
    """How the best hypotheses of two decodings of the same sentences differ: how many differ,
    the first ``examples`` of them (token ids and scores of both), and the largest score and
    attention differences among the sentences whose hypotheses are identical."""
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


def decode_on(translator: Translator, sentences: Sequence[Sequence[str]], methods: Sequence[str],
              options: SearchOptions, batch_size: int) -> dict[str, CorpusResult]:
    """Each method over every sentence on the translator's device, after one warm-up sentence
    (so that CUDA's one-off set-up is not timed)."""
    results = {}
    for method in methods:
        translator.translate(sentences[:1], method, method_options(options, method), 1,
                             progress=False)
        results[method] = translator.translate(sentences, method, method_options(options, method),
                                               batch_size, progress=False)
    return results


def compare_devices(model_path: str | Path, vocab_dir: str | Path,
                    sentences: Sequence[Sequence[str]], devices: Sequence[str],
                    config: TranslateConfig = TranslateConfig(),
                    methods: Sequence[str] = METHODS) -> dict[str, Any]:
    """Decode ``sentences`` (lists of words) with the model at ``model_path`` on both
    ``devices`` (``cpu`` / ``cuda``, resolved), each at its batch size of ``config``; returns
    the speeds and, per method, :func:`differences` of the second device against the first."""
    results, speed = [], []
    for device in devices:
        translator = Translator.load(model_path, vocab_dir, config.source_eos, device)
        batch_size = config.batch_size_for(device)
        results.append(decode_on(translator, sentences, methods, config.search, batch_size))
        speed.append({"device": device, "batch_size": batch_size, "sentences_per_s": {
            method: round(r.sentences_per_second, 2) for method, r in results[-1].items()}})
    return {"devices": list(devices), "sentences": len(sentences), "speed": speed,
            "search": dataclasses.asdict(config.search),
            "methods": {m: differences(results[0][m], results[1][m]) for m in methods}}


def summary(report: dict[str, Any]) -> list[str]:
    """One line per method: how many best hypotheses differ between the two devices."""
    first, second = report["devices"]
    return [f"{method}: {d['differing']} of {d['sentences']} best hypotheses differ "
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.decoding.compare",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, type=Path, help="a model.pt of the train stage")
    parser.add_argument("--vocab-dir", required=True, type=Path, help="holds vocab.{src,tgt}.txt")
    parser.add_argument("--sources", required=True, type=Path,
                        help="tokenised sentences, one a line (e.g. data/tokenized/test.src)")
    parser.add_argument("--devices", nargs=2, choices=DEVICES, default=["cpu", "cuda"])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--max-sentences", type=int, default=0, help="the first N only (0: all)")
    parser.add_argument("--beam-size", type=int, default=0, help="override translate.search")
    parser.add_argument("--params", help="params file (default: ./params.yaml if present)")
    parser.add_argument("--out", type=Path, help="write the report here as JSON")
    args = parser.parse_args(argv)
    try:
        config = translate_config(args.params, args.beam_size)
        devices = [resolve_device(name, "--devices") for name in args.devices]
        lines = read_lines(args.sources)[: args.max_sentences or None]
        report = compare_devices(args.model, args.vocab_dir, [line.split() for line in lines],
                                 devices, config, args.methods)
    except (ConfigError, OSError, ValueError) as err:
        print(f"compare: error: {err}", file=sys.stderr)
        return 2
    report["model"] = str(args.model)
    if args.out:
        write_json(args.out, report)
    print("\n".join(summary(report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
