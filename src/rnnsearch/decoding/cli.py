"""Translate your own sentences with a trained model.

    python -m rnnsearch.decoding.cli --model data/models/search-50/model.pt [FILE]
    echo "The cat sat on the mat." | rnnsearch-translate --model data/models/search-50/model.pt --align

Reads a sentence a line from FILE (or stdin), tokenises it as the pipeline did (params.yaml's
``prepare.src_lang`` and ``tokenize.lowercase``, subword pieces where the vocabularies have
models), decodes it (``translate.search`` unless overridden), prints one detokenised translation
a line; ``--nbest N`` prints N (normalised score, tab, text); ``--align`` adds the attention in
percent (target rows x source columns). Defaults: ``translate.device``, ``translate.batch_size``
(CPU) or ``translate.batch_size_cuda`` (GPU)."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, Sequence, TextIO, get_args

import numpy as np

from rnnsearch.command import entry_point
from rnnsearch.config.base import (DEFAULT_PARAMS, at_least, from_dict, read_params,
                                   required_section)
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.config.tokenize import TokenizeConfig
from rnnsearch.config.methods import method_names
from rnnsearch.config.search import STOPS
from rnnsearch.config.translate import (DEVICES, LengthPenalty, TranslateConfig, method_options,
                                        resolve_device)
from rnnsearch.data.textio import decode_lines
from rnnsearch.data.subword import TextUnits
from rnnsearch.data.tokenize import tokenize_line
from rnnsearch.decoding.hypothesis import Hypothesis
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.decoding.translator import Translator
from rnnsearch.errors import ConfigError


def format_alignment(source: Sequence[str], target: Sequence[str], attention: np.ndarray) -> str:
    """A small text matrix: one row per target word, one column per source position (percent)."""
    width = max(len(w) for w in target) if target else 1
    lines = ["source: " + " ".join(f"{j}:{w}" for j, w in enumerate(source)),
             " " * width + "".join(f"{j:>4}" for j in range(len(source)))]
    for word, row in zip(target, attention):
        lines.append(f"{word:<{width}}" + "".join(f"{round(100 * p):>4}" for p in row))
    return "\n".join(lines)


def read_input(path: str) -> list[str]:
    """The lines of ``path`` (``-``: standard input), strictly UTF-8, split at ``\n`` only; a
    bad byte sequence is a :class:`DataError` naming the file (``<stdin>``) and line."""
    if path == "-":
        return list(decode_lines(sys.stdin.buffer, "<stdin>"))
    with open(path, "rb") as handle:
        return list(decode_lines(handle, path))


def read_cli_params(path: str | None) -> tuple[dict[str, Any], str]:
    """``--params`` (must exist), else ./params.yaml, and its name. Without either it refuses
    (:class:`ConfigError`) rather than guess: the training params say how text is tokenised."""
    if path:
        return read_params(path), path
    if not Path(DEFAULT_PARAMS).is_file():
        raise ConfigError(f"no {DEFAULT_PARAMS} here: --params names the params file the model "
                          f"was trained with (its prepare.src_lang, prepare.tgt_lang and "
                          f"tokenize.lowercase say how your text is tokenised)")
    return read_params(DEFAULT_PARAMS), str(DEFAULT_PARAMS)


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the command line decodes with: params.yaml, then the options given."""

    src_lang: str
    tgt_lang: str
    lowercase: bool
    source_eos: bool
    search: SearchOptions
    device: str          # cpu or cuda (resolved on this machine)
    batch_size: int


def _settings(args: argparse.Namespace) -> Settings:
    """:class:`Settings` from params.yaml, then the command line."""
    params, origin = read_cli_params(args.params)
    prepare, tokenize, translate = (
        from_dict(cls, required_section(params, name, origin), name)
        for cls, name in ((PrepareConfig, "prepare"), (TokenizeConfig, "tokenize"),
                          (TranslateConfig, "translate")))
    device = (resolve_device(args.device, "--device") if args.device
              else resolve_device(translate.device))
    search = translate.search
    # One line per input unless --nbest: translate.search.nbest sizes the stage's n-best files
    overrides: dict[str, Any] = {"nbest": args.nbest or 1}
    if args.beam_size is not None:
        overrides["beam_size"] = args.beam_size
    if args.length_penalty:
        overrides["length_penalty"] = args.length_penalty
    if args.alpha is not None:
        overrides["alpha"] = args.alpha
    if args.stop:
        overrides["stop"] = args.stop
    search = method_options(dataclasses.replace(search, **overrides), args.method)
    search.check("command line")
    return Settings(prepare.src_lang, prepare.tgt_lang, tokenize.lowercase,
                    translate.source_eos, search, device,
                    args.batch_size or translate.batch_size_for(device))


def _print_translation(out: TextIO, translator: Translator, units: TextUnits, words: list[str],
                       hypotheses: Sequence[Hypothesis], tgt_lang: str,
                       args: argparse.Namespace) -> None:
    for rank, hypothesis in enumerate(hypotheses):
        target = translator.target_words(hypothesis, words, args.unk_replace)
        text = units.text(target, tgt_lang)
        prefix = f"{hypothesis.norm_score:.3f}\t" if len(hypotheses) > 1 else ""
        print(prefix + text, file=out)
        if args.align and rank == 0 and hypothesis.attention is not None:
            shown = target + ["</s>"]
            print(format_alignment(translator.source_labels(words), shown,
                                   hypothesis.attention) + "\n", file=out)


def argument_parser() -> argparse.ArgumentParser:
    """The command line's options."""
    parser = argparse.ArgumentParser(prog="rnnsearch-translate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", nargs="?", default="-", help="text file (default: stdin)")
    parser.add_argument("--model", required=True, type=Path, help="a model.pt of the train stage")
    parser.add_argument("--vocab-dir", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--params", help=f"params file (default: ./{DEFAULT_PARAMS} if present)")
    parser.add_argument("--method", choices=method_names(), default="beam")
    parser.add_argument("--beam-size", type=at_least(1), default=None,
                        help="override translate.search")
    parser.add_argument("--length-penalty", choices=get_args(LengthPenalty), default=None,
                        help="how beam search ranks finished hypotheses (override "
                             "translate.search)")
    parser.add_argument("--alpha", type=at_least(0, float), default=None,
                        help="the GNMT length penalty's exponent (override translate.search)")
    parser.add_argument("--stop", choices=STOPS, default=None,
                        help="when a sentence's beam search ends: first_k (k finished) or bound "
                             "(no live hypothesis can win) (override translate.search)")
    parser.add_argument("--nbest", type=at_least(1), default=None,
                        help="print the N best translations of each line (default: the best)")
    parser.add_argument("--unk-replace", action="store_true", help="copy the attended source word")
    parser.add_argument("--align", action="store_true", help="print the attention matrix")
    parser.add_argument("--batch-size", type=at_least(1), default=0,
                        help="sentences decoded together (default: translate.batch_size, or "
                             "translate.batch_size_cuda on a GPU)")
    parser.add_argument("--device", choices=DEVICES, default=None,
                        help="where to decode (default: translate.device; auto = the GPU when "
                             "torch sees one, else the CPU)")
    return parser


@entry_point("rnnsearch-translate")
def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    settings = _settings(args)
    units = TextUnits.read(args.vocab_dir)
    translator = Translator.load(args.model, args.vocab_dir, settings.source_eos, settings.device)
    sentences = [units.split(tokenize_line(line.strip(), settings.src_lang, settings.lowercase),
                             "src")
                 for line in read_input(args.input)]
    # A blank line stays blank (no translation of nothing): output line i is input line i's
    to_decode = [words for words in sentences if words]
    result = translator.translate(to_decode, args.method, settings.search, settings.batch_size,
                                  progress=False)
    translations = iter(result.translations)
    for words in sentences:
        if not words:
            print(file=sys.stdout)
            continue
        _print_translation(sys.stdout, translator, units, words, next(translations).hypotheses,
                           settings.tgt_lang, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
