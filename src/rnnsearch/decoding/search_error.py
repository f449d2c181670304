"""Search errors and model errors (Stahlberg & Byrne 2019) of one trained cell.

Per test sentence, three outputs scored by the search's objective (``translate.search``'s length
penalty): the beam's best, the reference force-decoded through the same masked steps, a wide beam's
best. Reference above the beam's output: a certain search error; wide beam above it: one a wider
search repairs; a beam output other than the reference scoring at least as high: a model error (the
model prefers a wrong output). :mod:`rnnsearch.stages.search_error` measures them per grid cell."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

import torch

from rnnsearch.config.evaluate import SEARCH_ERROR_SHARES
from rnnsearch.data.textio import read_lines
from rnnsearch.data.vocab import BOS_ID, EOS_ID
from rnnsearch.decoding.corpus import encode_source, pad_sources
from rnnsearch.decoding.options import SearchOptions, max_output_lengths, normalise
from rnnsearch.decoding.steps import next_log_probs
from rnnsearch.decoding.translator import Translator
from rnnsearch.errors import DataError

TIE = 1e-6    # score differences below this are float noise between batchings, not errors


def forced_scores(model: Any, src: torch.Tensor, src_len: torch.Tensor,
                  targets: Sequence[Sequence[int]], options: SearchOptions) -> list[float]:
    """Summed log-probabilities of ``targets`` (ids, ``</s>`` appended) for ``src`` (batch x src_len
    ids; ``src_len``: batch) under the search's steps, masks and length limit (-inf past it)."""
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
    docstring) for the beam of ``options`` against its reference and a ``wide_beam`` beam.
    The wide beam decodes fewer sentences at once, as many hypotheses as the beam's batch."""
    beam = translator.translate(sources, "beam", options, batch_size, progress=False)
    wide_options = dataclasses.replace(options, beam_size=wide_beam, nbest=1)
    wide_batch = max(1, batch_size * options.beam_size // wide_beam)
    wide = translator.translate(sources, "beam", wide_options, wide_batch, progress=False)
    targets = [translator.tgt_vocab.encode(words) for words in references]
    forced: list[float] = []
    with torch.inference_mode():
        for first in range(0, len(sources), batch_size):
            chunk = range(first, min(first + batch_size, len(sources)))
            src, src_len = pad_sources([encode_source(sources[i], translator.src_vocab,
                                                    translator.source_eos) for i in chunk],
                                     translator.device)
            forced += forced_scores(translator.model, src, src_len, targets[first:chunk.stop],
                                    options)
    counts = dict.fromkeys(SEARCH_ERROR_SHARES, 0)
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
