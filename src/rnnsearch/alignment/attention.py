"""Attention as alignment: force-decode the gold target and read the attention weights; links
are each target word's most attended source word, or every source word over a threshold.
:func:`word_attention` makes a subword model's weights word-to-word, so AERs compare."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from rnnsearch.alignment import Link
from rnnsearch.alignment.corpus import GoldCorpus
from rnnsearch.data.subword import TextUnits
from rnnsearch.data.vocab import BOS_ID, PAD_ID, Vocabulary


def pad(rows: Sequence[Sequence[int]], prefix: Sequence[int] = ()) -> torch.Tensor:
    """batch x max_len ids, ``prefix`` first, padded with ``<pad>``."""
    width = max(len(prefix) + len(r) for r in rows)
    out = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    for b, row in enumerate(rows):
        out[b, :len(prefix) + len(row)] = torch.tensor(list(prefix) + list(row), dtype=torch.long)
    return out


def forced_attention(model: Any, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
                     batch_size: int = 32) -> list[np.ndarray]:
    """Per pair, the tgt_len x src_len weights of teacher-forced decoding (row ``j``: target word
    ``j``; no ``</s>`` row). ``model(src, src_len, tgt_in)`` -> logits, weights batch x T x S."""
    matrices = []
    with torch.inference_mode():
        for start in range(0, len(sources), batch_size):
            src, tgt = sources[start:start + batch_size], targets[start:start + batch_size]
            lengths = torch.tensor([len(s) for s in src])
            _, weights = model(pad(src), lengths, pad(tgt, [BOS_ID]))       # batch x T x S
            if weights is None:
                raise ValueError("the model has no attention to read alignments from")
            weights = weights.float().cpu().numpy()
            matrices += [weights[b, :len(t), :len(s)] for b, (s, t) in enumerate(zip(src, tgt))]
    return matrices


def word_attention(weights: np.ndarray, src_lengths: Sequence[int], tgt_lengths: Sequence[int]
                   ) -> np.ndarray:
    """tgt_pieces x src_pieces weights -> tgt_words x src_words, ``*_lengths``: pieces per word.
    Rows are averaged (still a distribution; a sum would let a threshold link long words more
    readily), columns summed (a word's pieces' total mass; a mean would favour whole words)."""
    def starts(lengths: Sequence[int]) -> np.ndarray:
        return np.cumsum([0, *lengths[:-1]])

    if weights.size == 0:
        return weights
    by_source = np.add.reduceat(weights, starts(src_lengths), axis=1)    # tgt_pieces x src_words
    summed = np.add.reduceat(by_source, starts(tgt_lengths), axis=0)     # tgt_words x src_words
    return summed / np.asarray(tgt_lengths, dtype=weights.dtype)[:, None]


def argmax_links(weights: np.ndarray) -> set[Link]:
    """``(source, target)`` links: each target word's most attended source word."""
    return {(int(i), j) for j, i in enumerate(weights.argmax(1))} if weights.size else set()


def threshold_links(weights: np.ndarray, threshold: float) -> set[Link]:
    """``(source, target)`` links: every source word with weight >= ``threshold``."""
    targets, sources = np.nonzero(weights >= threshold)
    return {(int(i), int(j)) for j, i in zip(targets, sources)}


WORD_UNITS = TextUnits("word", {})


def split_words(sentences: Sequence[Sequence[str]], units: TextUnits, side: str
                ) -> tuple[list[list[str]], list[list[int]]]:
    """Each sentence's units (its words, or each word's pieces in order) and units per word."""
    split = [[units.split([word], side) for word in words] for words in sentences]
    return ([[unit for word in words for unit in word] for words in split],
            [[len(word) for word in words] for words in split])


def word_matrices(model: Any, gold: GoldCorpus, vocabs: dict[str, Vocabulary], source: str,
                  units: TextUnits, batch_size: int) -> list[np.ndarray]:
    """Per gold pair, the target x source word attention of teacher-forced decoding (subword
    weights made word-to-word by :func:`word_attention`)."""
    target = "fr" if source == "en" else "en"
    src, src_lengths = split_words([m.tokens for m in getattr(gold, source)], units, "src")
    tgt, tgt_lengths = split_words([m.tokens for m in getattr(gold, target)], units, "tgt")
    matrices = forced_attention(model, [vocabs["src"].encode(s) for s in src],
                                [vocabs["tgt"].encode(t) for t in tgt], batch_size)
    return [word_attention(w, s, t) for w, s, t in zip(matrices, src_lengths, tgt_lengths)]


def variant_links(matrices: list[np.ndarray], source: str, threshold: float
                  ) -> dict[str, list[set[Link]]]:
    """Each link variant's (English, French) links per gold pair, read from the target x source
    ``matrices``: ``argmax`` and ``threshold <threshold>`` (the metrics' names)."""
    variants = {"argmax": argmax_links,
                f"threshold {threshold}": lambda w: threshold_links(w, threshold)}
    result = {}
    for name, links_of in variants.items():
        links = [links_of(w) for w in matrices]                         # (source, target)
        if source == "fr":
            links = [{(j, i) for i, j in sentence} for sentence in links]
        result[name] = links
    return result


def attention_counts(model: Any, gold: GoldCorpus, vocabs: dict[str, Vocabulary], source: str,
                     threshold: float, units: TextUnits = WORD_UNITS, batch_size: int = 32
                     ) -> dict[str, np.ndarray]:
    """Per link variant (:func:`variant_links`), AER's counts per gold sentence of ``model``'s
    attention (sentences x 4: :meth:`GoldCorpus.counts`), for a paired bootstrap of two models."""
    matrices = word_matrices(model, gold, vocabs, source, units, batch_size)
    return {name: gold.counts(links)
            for name, links in variant_links(matrices, source, threshold).items()}
