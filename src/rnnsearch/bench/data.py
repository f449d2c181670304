"""The bench's data, synthetic (speed depends on shapes, not words): training pairs with lengths
drawn like the default Hansard sample's (source median 15, targets 1.13 times as long, at most
50) in the tokenize stage's layout, and test sources stratified like its test set (1-80 words)."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.training.data import Batch, Pair, bucket_batches, collate, read_pairs

MAX_LEN = 50                                   # the max-50 cell's training pairs
TEST_BUCKETS = ((1, 10), (11, 20), (21, 30), (31, 40), (41, 50), (51, 60), (61, 80))


def synthetic_vocabulary(size: int) -> Vocabulary:
    words = SPECIALS + tuple(f"w{i}" for i in range(size - len(SPECIALS)))
    return Vocabulary(words, (0,) * len(words))


def training_lengths(rng: random.Random) -> tuple[int, int]:
    src = max(1, round(rng.gammavariate(2.2, 7.8)))
    return src, max(1, round(src * 1.13 * rng.uniform(0.85, 1.15)))


@dataclass(frozen=True)
class Lengths:
    """Mean lengths of training pairs: source tokens, target tokens with ``</s>``."""

    src: float
    tgt: float


def write_synthetic_corpus(out: Path, vocab_size: int, pairs: int, seed: int = 0) -> Lengths:
    """``train``/``dev`` ``.src``/``.tgt`` and both vocabularies in ``out``; returns the mean
    lengths of the pairs the max-50 cell keeps."""
    rng = random.Random(seed)
    vocab = synthetic_vocabulary(vocab_size)
    words = vocab.words[len(SPECIALS):]
    out.mkdir(parents=True, exist_ok=True)
    for side in ("src", "tgt"):
        vocab.save(out / f"vocab.{side}.txt")
    kept = [0, 0, 0]                                       # pairs, source and target words
    for split, count in (("train", pairs), ("dev", max(8, pairs // 100))):
        lines: dict[str, list[str]] = {"src": [], "tgt": []}
        for _ in range(count):
            src, tgt = training_lengths(rng)
            lines["src"].append(" ".join(rng.choices(words, k=src)))
            lines["tgt"].append(" ".join(rng.choices(words, k=tgt)))
            if split == "train" and max(src, tgt) <= MAX_LEN:
                kept = [kept[0] + 1, kept[1] + src, kept[2] + tgt]
        for side, text in lines.items():
            (out / f"{split}.{side}").write_text("\n".join(text) + "\n", encoding="utf-8")
    return Lengths(kept[1] / kept[0], kept[2] / kept[0] + 1)


def stratified_sources(vocab_size: int, per_bucket: int, seed: int = 1) -> list[list[int]]:
    """``per_bucket`` source id lists of uniformly drawn length in each of :data:`TEST_BUCKETS`."""
    rng = random.Random(seed)
    return [[rng.randrange(len(SPECIALS), vocab_size) for _ in range(rng.randint(low, high))]
            for low, high in TEST_BUCKETS for _ in range(per_bucket)]


@dataclass
class Batches:
    """Training pairs cut into bucketed batches as the train stage cuts them."""

    pairs: list[Pair]
    groups: list[list[int]]

    def batch(self, index: int) -> Batch:
        return collate([self.pairs[i] for i in self.groups[index % len(self.groups)]])

    def padding_fraction(self, count: int = 200) -> float:
        """Padding share of the tokens (source + target) of the first ``count`` batches."""
        real = padded = 0
        for batch in map(self.batch, range(count)):
            real += int(batch.src_len.sum()) + batch.target_tokens
            padded += batch.src.numel() + batch.tgt_out.numel()
        return 1 - real / padded

    def median(self) -> Batch:
        """A full batch of median target length."""
        full = sorted((g for g in self.groups if len(g) == max(map(len, self.groups))),
                      key=lambda g: max(len(self.pairs[i][1]) for i in g))
        return collate([self.pairs[i] for i in full[len(full) // 2]])


def load_batches(data_dir: Path, vocab_size: int, batch_size: int, seed: int = 0) -> Batches:
    """The synthetic training pairs of ``data_dir`` in bucketed batches of ``batch_size``."""
    vocab = synthetic_vocabulary(vocab_size)
    pairs, _ = read_pairs(data_dir, "train", vocab, vocab, MAX_LEN)
    return Batches(pairs, bucket_batches([(len(s), len(t)) for s, t in pairs], batch_size, 0.1,
                                         random.Random(seed)))
