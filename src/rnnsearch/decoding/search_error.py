"""Search errors and model errors (Stahlberg & Byrne 2019) of one trained cell.

Per test sentence, three outputs ranked by the search's own objective (the length penalty of
``translate.search``): the beam's best, the reference force-decoded through the same masked
steps, and a wide beam's best. A reference above the beam's output is a search error the beam
made for certain; a wide beam above it, one a wider search repairs; a beam output other than the
reference scoring at least as high as it is a model error (the model prefers a wrong output).

    python -m rnnsearch.decoding.search_error --model data/models/search-50/model.pt \
        --vocab-dir data/tokenized --sources data/tokenized/test.src \
        --references data/tokenized/test.tgt --sentences 200 --wide-beam 50 --out errors.json
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Sequence

import torch

from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least
from rnnsearch.data.textio import read_lines, write_json
from rnnsearch.data.vocab import BOS_ID, EOS_ID
from rnnsearch.decoding.compare import model_parser, translate_config
from rnnsearch.decoding.corpus import encode_source, pad_batch
from rnnsearch.decoding.options import SearchOptions, max_output_lengths, normalise
from rnnsearch.decoding.steps import next_log_probs
from rnnsearch.decoding.translator import Translator
from rnnsearch.errors import DataError

TIE = 1e-6    # score differences below this are float noise between batchings, not errors


def forced_scores(model: Any, src: torch.Tensor, src_len: torch.Tensor,
                  targets: Sequence[Sequence[int]], options: SearchOptions) -> list[float]:
    """Summed log-probabilities of ``targets`` (ids; ``</s>`` appended here) under the steps
    the search takes, masks and length limit included (-inf past the limit).
    ``src``: batch x src_len ids; ``src_len``: batch."""
    lengths = torch.tensor([len(t) + 1 for t in targets], device=src.device)      # batch
    gold = torch.full((len(targets), int(lengths.max())), EOS_ID, device=src.device)
    for row, ids in enumerate(targets):
        gold[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    memory = model.encode(src, src_len)
    state, limits = model.init_state(memory), max_output_lengths(src_len, options)
    prev = torch.full_like(lengths, BOS_ID)
    total = torch.zeros(len(targets), dtype=torch.float64, device=src.device)     # batch
    for step in range(gold.size(1)):
        out = next_log_probs(model, prev, state, memory, limits == step + 1)
        picked = out.log_probs.gather(1, gold[:, step, None]).squeeze(1).double()
        total += torch.where(step < lengths, picked, torch.zeros_like(picked))
        prev, state = gold[:, step], out.state
    return total.tolist()


def search_errors(translator: Translator, sources: Sequence[Sequence[str]],
                  references: Sequence[Sequence[str]], options: SearchOptions, wide_beam: int,
                  batch_size: int) -> dict[str, Any]:
    """The shares of sentences (tokenised word lists) with each kind of error (module
    docstring) for the beam of ``options`` against its reference and a ``wide_beam`` beam."""
    beam = translator.translate(sources, "beam", options, batch_size, progress=False)
    wide_options = dataclasses.replace(options, beam_size=wide_beam, nbest=1)
    wide = translator.translate(sources, "beam", wide_options, batch_size, progress=False)
    targets = [translator.tgt_vocab.encode(words) for words in references]
    forced: list[float] = []
    with torch.inference_mode():
        for first in range(0, len(sources), batch_size):
            chunk = range(first, min(first + batch_size, len(sources)))
            src, src_len = pad_batch([encode_source(sources[i], translator.src_vocab,
                                                    translator.source_eos) for i in chunk],
                                     translator.device)
            forced += forced_scores(translator.model, src, src_len, targets[first:chunk.stop],
                                    options)
    counts = {"reference_above_beam": 0, "wide_beam_above_beam": 0, "model_error": 0}
    for index, (ours, widest) in enumerate(zip(beam.translations, wide.translations)):
        best, ids = ours.best.norm_score, tuple(targets[index]) + (EOS_ID,)
        reference = normalise(forced[index], len(ids), options)
        counts["reference_above_beam"] += reference > best + TIE
        counts["wide_beam_above_beam"] += widest.best.norm_score > best + TIE
        counts["model_error"] += ours.best.tokens != ids and best >= reference - TIE
    return {"sentences": len(sources), "beam_size": options.beam_size, "wide_beam": wide_beam,
            "stop": options.stop, "length_penalty": options.length_penalty,
            **{name: count / max(len(sources), 1) for name, count in counts.items()}}


def paired_lines(sources: Path, references: Path, limit: int) -> tuple[list[list[str]], ...]:
    """The first ``limit`` tokenised lines of both files, which must have as many lines."""
    pair = [read_lines(path) for path in (sources, references)]
    if len(pair[0]) != len(pair[1]):
        raise DataError(f"{references}: {len(pair[1])} lines, but {sources} has {len(pair[0])}")
    return tuple([line.split() for line in lines[:limit]] for lines in pair)


@entry_point("search_error")
def main(argv: list[str] | None = None) -> int:
    parser = model_parser("rnnsearch.decoding.search_error", __doc__)
    parser.add_argument("--references", required=True, type=Path, help="tokenised, one a line")
    parser.add_argument("--sentences", type=at_least(1), default=200, help="the first N")
    parser.add_argument("--wide-beam", type=at_least(1), default=50)
    parser.add_argument("--params", help="params file (default: ./params.yaml if present)")
    parser.add_argument("--mlflow", metavar="RUN_NAME", help="also log the shares to MLflow")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    config = translate_config(args.params, 0)
    translator = Translator.load(args.model, args.vocab_dir, config.source_eos)
    sources, references = paired_lines(args.sources, args.references, args.sentences)
    report = search_errors(translator, sources, references, config.search, args.wide_beam,
                           config.batch_size)
    if args.mlflow:
        from rnnsearch import tracking

        with tracking.start_run("search_error", report, run_name=args.mlflow):
            tracking.log_numeric_metrics(report, "search_error/")
    if args.out:
        write_json(args.out, report)
    print(", ".join(f"{key} {value:.3f}" if isinstance(value, float) else f"{key} {value}"
                    for key, value in report.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
