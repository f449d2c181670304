"""Language-model data: the text as one token stream, cut into truncated-BPTT segments.

Sentences, each closed by ``</s>``, are joined and split into B parallel streams ``[B, L]`` (the
last ``N mod B`` tokens dropped); segment i is ``streams[:, ik : ik+k]``, its targets one step
later: a model carrying its state across segments sees each stream as one long text."""
from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import torch

from rnnsearch.data.textio import read_lines
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.errors import DataError

Segment = tuple[torch.Tensor, torch.Tensor]  # inputs, targets: batch x steps


def encode_stream(lines: list[str], vocab: Vocabulary) -> torch.Tensor:
    """Token ids of ``lines`` as one stream, each sentence followed by ``</s>``: ``[N]``."""
    ids: list[int] = []
    for line in lines:
        ids += vocab.encode(line.split(), add_eos=True)
    return torch.tensor(ids, dtype=torch.long)


def read_stream(path: str | Path, vocab: Vocabulary) -> torch.Tensor:
    """:func:`encode_stream` of a tokenised file: ``[N]``."""
    return encode_stream(read_lines(path), vocab)


def batchify(stream: torch.Tensor, n_streams: int) -> torch.Tensor:
    """Cut ``[N]`` into ``n_streams`` rows of equal length: ``[B, N // B]``."""
    length = stream.numel() // n_streams
    if length < 2:
        raise DataError(f"a stream of {stream.numel()} tokens is too short for {n_streams} "
                        f"parallel streams (each needs at least 2 tokens)")
    return stream[: n_streams * length].view(n_streams, length)


class SegmentLoader:
    """The segments of ``[B, L]`` streams in order, one ``(inputs, targets)`` per step; resumable
    as :class:`~rnnsearch.training.resume.ResumableLoader`: :meth:`state_dict` counts the segments
    this pass handed out (Lightning reads a sized loader without fetching ahead: all were trained
    on), and a run restored mid-epoch starts that pass at the next one."""

    def __init__(self, streams: torch.Tensor, bptt: int) -> None:
        self.streams = streams  # batch x length
        self.bptt = bptt
        self._start = 0         # where the next pass starts (load_state_dict)
        self._served = 0        # segments of the current pass handed out

    def __len__(self) -> int:
        return math.ceil((self.streams.shape[1] - 1) / self.bptt)

    def segment(self, i: int) -> Segment:
        """Segment ``i``: inputs and targets, both ``batch x steps`` (the last may be shorter)."""
        begin = i * self.bptt
        end = min(begin + self.bptt, self.streams.shape[1] - 1)
        return self.streams[:, begin:end], self.streams[:, begin + 1: end + 1]

    def state_dict(self) -> dict[str, int]:
        return {"segments": self._served}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        self._start = int(state_dict["segments"])

    def __iter__(self) -> Iterator[Segment]:
        # A generator: the start is read at the first next(), not at Lightning's probing iter().
        # Cleared at once: Lightning stops after len() batches, so code after the loop never runs.
        start, self._start = self._start, 0
        for i in range(start, len(self)):
            self._served = i + 1
            yield self.segment(i)

    def targets(self) -> torch.Tensor:
        """Every target token in reading order: ``[B * (L - 1)]``."""
        return self.streams[:, 1:].reshape(-1)


def unigram_perplexity(train: torch.Tensor, targets: torch.Tensor, vocab_size: int) -> float:
    """Perplexity of ``targets`` under ``P(w) = (count(w) + 1) / (N + V)``, counted on ``train``
    over the whole vocabulary (specials included, as in the LM's softmax): the baseline to beat."""
    counts = torch.bincount(train, minlength=vocab_size).double() + 1.0  # V
    log_prob = counts.log() - math.log(counts.sum().item())  # V
    return math.exp(-log_prob[targets].mean().item())

