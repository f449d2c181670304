"""Decoding many sentences: batch them by source length (less padding), decode, restore the
order. A sentence's output does not depend on its batch (:mod:`rnnsearch.decoding.beam`), so
the batching changes nothing but speed."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from tqdm import tqdm

from rnnsearch.config.methods import DECODING_METHODS
from rnnsearch.config.registry import load
from rnnsearch.data.vocab import EOS_ID, UNK_ID, Vocabulary
from rnnsearch.decoding.hypothesis import Translation
from rnnsearch.decoding.options import SearchOptions

# (model, src batch x src_len ids, src_len batch, options) -> one Translation per sentence
Decoder = Callable[[Any, torch.Tensor, torch.Tensor, SearchOptions], list[Translation]]


def decoder(method: str) -> Decoder:
    """The search function of ``method`` (:data:`~rnnsearch.config.methods.DECODING_METHODS`)."""
    return load(DECODING_METHODS[method].function)


def encode_source(tokens: Sequence[str], vocab: Vocabulary, add_eos: bool) -> list[int]:
    """Source ids as the model was trained on them; never empty (an empty line becomes
    ``</s>`` or ``<unk>``) so that every encoder has a position to attend to."""
    ids = vocab.encode(tokens, add_eos=add_eos)
    return ids or [EOS_ID if add_eos else UNK_ID]


def pad_sources(sources: Sequence[Sequence[int]], device: str | torch.device = "cpu"
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``sources`` as a padded batch: (batch x max_len ids, batch lengths)."""
    lengths = torch.tensor([len(s) for s in sources], dtype=torch.long)
    src = torch.zeros(len(sources), int(lengths.max()), dtype=torch.long)    # <pad> = 0
    for row, ids in enumerate(sources):
        src[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return src.to(device), lengths.to(device)


@dataclass(frozen=True)
class CorpusResult:
    """Translations in input order, and how fast they came."""

    translations: list[Translation]
    seconds: float

    @property
    def sentences_per_second(self) -> float:
        """Decoding speed (encoding and search, not tokenisation)."""
        return len(self.translations) / self.seconds if self.seconds > 0 else float("inf")


def translate_corpus(model: Any, sources: Sequence[Sequence[int]], method: str,
                     options: SearchOptions, batch_size: int,
                     device: str | torch.device = "cpu", progress: bool = True) -> CorpusResult:
    """Decode every source (lists of ids) with ``method`` (a name of ``DECODING_METHODS``)."""
    decode = decoder(method)
    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
    results: list[Translation | None] = [None] * len(sources)
    model.eval()
    start = time.perf_counter()
    with tqdm(total=len(sources), desc=method, unit="sent", disable=not progress) as bar:
        for first in range(0, len(order), batch_size):
            chunk = order[first: first + batch_size]
            src, src_len = pad_sources([sources[i] for i in chunk], device)
            for index, translation in zip(chunk, decode(model, src, src_len, options)):
                results[index] = translation
            bar.update(len(chunk))
    return CorpusResult(results, time.perf_counter() - start)  # type: ignore[arg-type]
