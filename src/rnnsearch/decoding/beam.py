"""Batched beam search, written as small steps: start, expand + prune, finish, advance, retire.

Each step keeps a sentence's ``2k`` best (hypothesis, word) pairs (so ``k`` non-``</s>`` ones
remain), finishes those of the ``k`` best that emit ``</s>``, advances the ``k`` best others and
retires sentences done or at their length limit. ``translate.search.stop``: ``first_k``
(Bahdanau et al.'s) stops once ``k`` finished; ``bound`` once ``nbest`` finished and no live
hypothesis can beat them (:func:`rnnsearch.decoding.options.reachable`). Hypotheses only meet
their own sentence's, so the output does not depend on the batch."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from rnnsearch.data.vocab import BOS_ID, EOS_ID
from rnnsearch.decoding.hypothesis import Hypothesis, Translation
from rnnsearch.decoding.options import SearchOptions, max_output_lengths, normalise, reachable
from rnnsearch.decoding.steps import StepOutput, next_log_probs, select_rows


@dataclass(frozen=True)
class _Beam:
    """The live search over ``n`` active sentences x ``k`` hypotheses (rows ``i*k .. i*k+k-1``)."""

    sentence: torch.Tensor            # n: index of each active sentence in the input batch
    limits: torch.Tensor              # n: output length limit (tokens, </s> included)
    finished: torch.Tensor            # batch: finished hypotheses per input sentence so far
    scores: torch.Tensor              # n x k: cumulative log-probs (float64), -inf = empty
    tokens: torch.Tensor              # n*k x t: words so far
    attention: torch.Tensor | None    # n*k x t x S: attention rows so far
    memory: Any                       # the model's Memory, n*k rows
    state: Any                        # the model's DecoderState, n*k rows


@torch.inference_mode()
def beam_search(model: Any, src: torch.Tensor, src_len: torch.Tensor,
                options: SearchOptions = SearchOptions()) -> list[Translation]:
    """The ``options.nbest`` best translations of each sentence of a batch, best first.
    ``src``: batch x src_len ids; ``src_len``: batch (real lengths)."""
    k = options.beam_size
    beam = _start(model, src, src_len, options)
    finished: list[list[Hypothesis]] = [[] for _ in range(src.size(0))]
    lengths = src_len.tolist()            # on the host once: finishing reads them every step
    while beam.sentence.numel() > 0:
        step = beam.tokens.size(1)
        prev = beam.tokens[:, -1] if step else torch.full(
            (beam.tokens.size(0),), BOS_ID, dtype=torch.long, device=beam.tokens.device)
        at_limit = (beam.limits == step + 1).repeat_interleave(k)          # n*k
        out = next_log_probs(model, prev, beam.state, beam.memory, at_limit)
        top, origin, word = _expand_and_prune(beam.scores, out.log_probs)   # n x 2k each
        _finish(beam, out, top, origin, word, finished, lengths, options)
        beam, parents = _advance(beam, out, top, origin, word)
        beam = _retire(beam, _settled(beam, finished, options), parents)
    return [_rank(hypotheses, options.nbest) for hypotheses in finished]


def _start(model: Any, src: torch.Tensor, src_len: torch.Tensor,
           options: SearchOptions) -> _Beam:
    """Encode once, then copy each sentence's memory and state to its ``k`` rows."""
    batch, k = src.size(0), options.beam_size
    memory = model.encode(src, src_len)
    state = model.init_state(memory)
    rows = torch.arange(batch, device=src.device).repeat_interleave(k)     # batch*k
    scores = torch.full((batch, k), -torch.inf, dtype=torch.float64, device=src.device)
    scores[:, 0] = 0.0               # one live hypothesis (<s>) per sentence at first
    return _Beam(sentence=torch.arange(batch, device=src.device),
                 limits=max_output_lengths(src_len, options),
                 finished=torch.zeros(batch, dtype=torch.long, device=src.device),
                 scores=scores,
                 tokens=torch.empty(batch * k, 0, dtype=torch.long, device=src.device),
                 attention=None,
                 memory=select_rows(memory, rows),
                 state=select_rows(state, rows))


def _expand_and_prune(scores: torch.Tensor, log_probs: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``2k`` best (parent, word) pairs per sentence, best first, from ``scores`` n x k and
    ``log_probs`` n*k x V: their cumulative scores, parent slots (0..k-1) and words, each n x 2k.
    They are among each parent's ``2k`` best words (a parent adds one score to all its words), so
    only ``k x 2k`` candidates are ranked in float64, not ``k x V``."""
    n, k = scores.shape
    width = min(2 * k, log_probs.size(1))
    best, words = log_probs.topk(width, dim=1)                                # n*k x 2k
    total = scores.unsqueeze(-1) + best.view(n, k, width).double()           # n x k x 2k
    top, flat = total.view(n, k * width).topk(min(2 * k, k * width), dim=1)  # n x 2k
    return top, flat // width, words.view(n, k * width).gather(1, flat)


def _finish(beam: _Beam, out: StepOutput, top: torch.Tensor, origin: torch.Tensor,
            word: torch.Tensor, finished: list[list[Hypothesis]], lengths: list[int],
            options: SearchOptions) -> None:
    """Move the pairs among the ``k`` best that emit ``</s>`` to their sentence's finished list,
    fetching what they need to the host in one transfer per kind (sentence, score, words,
    attention), not a few per hypothesis: each waits for the GPU, and a batch finishes thousands.
    ``lengths``: real source lengths of the input batch, on the host."""
    k = beam.scores.size(1)
    ends = (word[:, :k] == EOS_ID) & torch.isfinite(top[:, :k])              # n x k
    slots, ranks = ends.nonzero(as_tuple=True)                                # m, m
    if slots.numel() == 0:
        return
    rows = slots * k + origin[slots, ranks]                                   # m
    sentences = beam.sentence[slots]                                          # m
    beam.finished.index_add_(0, sentences, torch.ones_like(sentences))
    scores = top[slots, ranks].tolist()
    tokens = beam.tokens.index_select(0, rows).tolist()                       # m x t
    attention = _attention_rows(beam, out, rows)                              # m x t+1 x S
    for i, (sentence, score, ids) in enumerate(zip(sentences.tolist(), scores, tokens)):
        ids = (*ids, EOS_ID)
        matrix = None if attention is None else attention[i, :, : lengths[sentence]].copy()
        finished[sentence].append(Hypothesis(ids, score, normalise(score, len(ids), options),
                                             matrix))


def _attention_rows(beam: _Beam, out: StepOutput, rows: torch.Tensor):
    """The attention of hypotheses ``rows`` so far plus this step's: m x t+1 x S (numpy), or
    None for a model without attention."""
    if out.attention is None:
        return None
    last = out.attention.index_select(0, rows).unsqueeze(1)                  # m x 1 x S
    if beam.attention is not None:
        last = torch.cat([beam.attention.index_select(0, rows), last], dim=1)
    return last.cpu().numpy()


def _advance(beam: _Beam, out: StepOutput, top: torch.Tensor, origin: torch.Tensor,
             word: torch.Tensor) -> tuple[_Beam, torch.Tensor]:
    """The new beam (the ``k`` best pairs not emitting ``</s>``) and its parents (n*k rows of the
    step's state, the order its state keeps for :func:`_retire` to reorder once for both)."""
    n, k = beam.scores.shape
    keep = torch.sort((word == EOS_ID).int(), dim=1, stable=True).indices[:, :k]  # n x k
    scores = top.gather(1, keep)
    scores = scores.masked_fill(word.gather(1, keep) == EOS_ID, -torch.inf)
    new_word = word.gather(1, keep).reshape(-1)                               # n*k
    parents = (origin.gather(1, keep)
               + k * torch.arange(n, device=top.device).unsqueeze(1)).reshape(-1)
    tokens = torch.cat([beam.tokens.index_select(0, parents), new_word.unsqueeze(1)], dim=1)
    attention = None
    if out.attention is not None:
        step_attn = out.attention.index_select(0, parents).unsqueeze(1)      # n*k x 1 x S
        attention = step_attn if beam.attention is None else torch.cat(
            [beam.attention.index_select(0, parents), step_attn], dim=1)
    return _Beam(beam.sentence, beam.limits, beam.finished, scores, tokens, attention,
                 beam.memory, out.state), parents


def _settled(beam: _Beam, finished: list[list[Hypothesis]], options: SearchOptions
             ) -> torch.Tensor:
    """n: whether each active sentence's search is over under ``options.stop`` (module
    docstring). ``bound`` compares, per sentence, the ``nbest``-th best normalised score
    finished so far with the best its live hypotheses could reach by the length limit."""
    count = beam.finished.index_select(0, beam.sentence)                      # n
    if options.stop == "first_k":
        return count >= options.beam_size
    nth = [sorted((h.norm_score for h in finished[i]), reverse=True)[options.nbest - 1]
           if len(finished[i]) >= options.nbest else -torch.inf
           for i in beam.sentence.tolist()]
    best = reachable(beam.scores.max(dim=1).values, beam.limits, options)     # n
    return torch.tensor(nth, dtype=best.dtype, device=best.device) >= best


def _retire(beam: _Beam, settled: torch.Tensor, parents: torch.Tensor) -> _Beam:
    """Drop sentences whose search is over (``settled``, n), at their length limit, or with no
    live hypothesis; the kept hypotheses' state is rows ``parents`` of the beam's."""
    k = beam.scores.size(1)
    at_limit = beam.limits <= beam.tokens.size(1)
    dead = ~torch.isfinite(beam.scores).any(dim=1)
    keep = ~(settled | at_limit | dead)
    if bool(keep.all()):
        return dataclasses.replace(beam, state=select_rows(beam.state, parents))
    slots = keep.nonzero().squeeze(1)                                         # m
    rows = (slots.unsqueeze(1) * k + torch.arange(k, device=slots.device)).reshape(-1)
    return _Beam(beam.sentence[slots], beam.limits[slots], beam.finished, beam.scores[slots],
                 beam.tokens.index_select(0, rows),
                 None if beam.attention is None else beam.attention.index_select(0, rows),
                 select_rows(beam.memory, rows), select_rows(beam.state, parents[rows]))


def _rank(hypotheses: list[Hypothesis], nbest: int) -> Translation:
    """The ``nbest`` finished hypotheses with the best normalised scores (stable on ties)."""
    ranked = sorted(hypotheses, key=lambda h: -h.norm_score)
    return Translation(tuple(ranked[:nbest]))
