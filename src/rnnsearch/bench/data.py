"""The bench's data, synthetic (speed depends on shapes, not words): training pairs with lengths
drawn like the default Hansard sample's (source median 15, targets 1.13 times as long, at most
50) in the tokenize stage's layout, and test sources stratified like its test set (1-80 words)."""
from __future__ import annotations

import random
from pathlib import Path

from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.training.data import Batch, bucket_batches, collate, read_pairs

MAX_LEN = 50                                   # the max-50 cell's training pairs
TEST_BUCKETS = ((1, 10), (11, 20), (21, 30), (31, 40), (41, 50), (51, 60), (61, 80))


def synthetic_vocabulary(size: int) -> Vocabulary:
    words = SPECIALS + tuple(f"w{i}" for i in range(size - len(SPECIALS)))
    return Vocabulary(words, (0,) * len(words))


def training_lengths(rng: random.Random) -> tuple[int, int]:
    src = max(1, round(rng.gammavariate(2.2, 7.8)))
    return src, max(1, round(src * 1.13 * rng.uniform(0.85, 1.15)))


def write_synthetic_corpus(out: Path, vocab_size: int, pairs: int, seed: int = 0) -> None:
    """``train``/``dev`` ``.src``/``.tgt`` and both vocabularies in ``out``."""
    rng = random.Random(seed)
    vocab = synthetic_vocabulary(vocab_size)
    words = vocab.words[len(SPECIALS):]
    out.mkdir(parents=True, exist_ok=True)
    for side in ("src", "tgt"):
        vocab.save(out / f"vocab.{side}.txt")
    for split, count in (("train", pairs), ("dev", max(8, pairs // 100))):
        lines: dict[str, list[str]] = {"src": [], "tgt": []}
        for src, tgt in (training_lengths(rng) for _ in range(count)):
            lines["src"].append(" ".join(rng.choices(words, k=src)))
            lines["tgt"].append(" ".join(rng.choices(words, k=tgt)))
        for side, text in lines.items():
            (out / f"{split}.{side}").write_text("\n".join(text) + "\n", encoding="utf-8")


def stratified_sources(vocab_size: int, per_bucket: int, seed: int = 1) -> list[list[int]]:
    """``per_bucket`` source id lists of uniformly drawn length in each of :data:`TEST_BUCKETS`."""
    rng = random.Random(seed)
    return [[rng.randrange(len(SPECIALS), vocab_size) for _ in range(rng.randint(low, high))]
            for low, high in TEST_BUCKETS for _ in range(per_bucket)]


def training_batches(data_dir: Path, vocab_size: int, batch_size: int) -> tuple[Batch, float]:
    """A full batch of median target length as the train stage cuts them, and the padding share
    of the tokens (source + target) of the first 200 batches."""
    vocab = synthetic_vocabulary(vocab_size)
    pairs, _ = read_pairs(data_dir, "train", vocab, vocab, MAX_LEN)
    groups = bucket_batches([(len(s), len(t)) for s, t in pairs], batch_size, 0.1,
                            random.Random(0))
    batches = [collate([pairs[i] for i in group]) for group in groups[:200]]
    real = sum(int(b.src_len.sum()) + b.target_tokens for b in batches)
    padding = 1 - real / sum(b.src.numel() + b.tgt_out.numel() for b in batches)
    full = sorted((g for g in groups if len(g) == max(map(len, groups))),
                  key=lambda g: max(len(pairs[i][1]) for i in g))
    return collate([pairs[i] for i in full[len(full) // 2]]), padding
