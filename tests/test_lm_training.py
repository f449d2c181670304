"""LM data streams, truncated BPTT with a carried state, and resuming a killed run exactly."""
from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
import torch

from rnnsearch.config.pretrain_lm import PretrainLMConfig
from rnnsearch.data.vocab import EOS_ID, UNK_ID, Vocabulary
from rnnsearch.lm.data import SegmentLoader, batchify, encode_stream, unigram_perplexity
from rnnsearch.lm.model import LanguageModel
from rnnsearch.lm.training import load_lm_data, train_lm

WORDS = "le la un une chat chien mange dort voit petit grand rouge sur dans jardin".split()


def write_lm_corpus(root: Path) -> Path:
    """A tiny tokenised target side under ``root``: train/dev/test.tgt and vocab.tgt.txt
    (200/20/20 sentences of 3-9 words)."""
    rng = random.Random(0)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 200), ("dev", 20), ("test", 20)):
        lines = [" ".join(rng.choices(WORDS, k=rng.randint(3, 9))) for _ in range(n)]
        (root / f"{split}.tgt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    counts = Counter((root / "train.tgt").read_text(encoding="utf-8").split())
    Vocabulary.build(counts, 14).save(root / "vocab.tgt.txt")
    return root


@pytest.fixture
def lm_data_dir(tmp_path: Path) -> Path:
    return write_lm_corpus(tmp_path)


def tiny_config(**overrides) -> PretrainLMConfig:
    settings = dict(embedding_size=8, hidden_size=8, dropout=0.3, init_embeddings=False, bptt=5,
                    batch_size=4, eval_batch_size=2, max_steps=12, max_minutes=None,
                    val_every=4, checkpoint_every=2, threads=0)
    return PretrainLMConfig(**{**settings, **overrides})


def test_stream_joins_sentences_with_eos_and_maps_unknowns():
    vocab = Vocabulary.build(Counter("a b a".split()), 10)
    stream = encode_stream(["a b", "c a"], vocab)
    a, b = vocab.ids["a"], vocab.ids["b"]
    assert stream.tolist() == [a, b, EOS_ID, UNK_ID, a, EOS_ID]


def test_segments_read_each_stream_left_to_right():
    streams = batchify(torch.arange(23), 2)  # 2 x 11 (the last token is dropped)
    loader = SegmentLoader(streams, bptt=4)
    segments = list(loader)
    assert len(segments) == len(loader) == 3  # 10 targets per stream: 4 + 4 + 2
    x, y = segments[0]
    assert x.tolist() == [[0, 1, 2, 3], [11, 12, 13, 14]]
    assert y.tolist() == [[1, 2, 3, 4], [12, 13, 14, 15]]
    assert segments[2][1].tolist() == [[9, 10], [20, 21]]
    assert torch.equal(torch.cat([s[1] for s in segments], 1).reshape(-1), loader.targets())


def test_a_restored_loader_starts_its_next_pass_at_the_first_segment_not_handed_out():
    """The state Lightning checkpoints with the loop: a pass cut after 2 of 3 segments resumes
    at the third, and only that pass does."""
    streams = batchify(torch.arange(23), 2)
    first = SegmentLoader(streams, bptt=4)
    reading = iter(first)
    next(reading), next(reading)
    state = first.state_dict()
    assert state == {"segments": 2}
    restored = SegmentLoader(streams, bptt=4)
    restored.load_state_dict(state)
    assert [x[0, 0].item() for x, _ in restored] == [8]
    assert [x[0, 0].item() for x, _ in restored] == [0, 4, 8]


def test_unigram_perplexity_add_one():
    train = torch.tensor([0, 1, 1, 1])  # counts + 1 over V = 2: [2, 4] / 6
    assert unigram_perplexity(train, torch.tensor([1, 1]), 2) == pytest.approx(1.5)
    assert unigram_perplexity(train, torch.tensor([0]), 2) == pytest.approx(3.0)


class _SpyLM(LanguageModel):
    """Records the state each forward call starts from and ends with."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple] = []

    def forward(self, x, state=None):
        logits, new_state = super().forward(x, state)
        if self.training:
            self.calls.append((state, new_state))
        return logits, new_state


def test_truncated_bptt_carries_the_detached_state(lm_data_dir, tmp_path, monkeypatch):
    monkeypatch.setattr("rnnsearch.lm.training.LanguageModel", _SpyLM)
    run = train_lm(tiny_config(max_steps=2), load_lm_data(lm_data_dir), tmp_path / "ckpt")
    (first_in, first_out), (second_in, _) = run.model.calls[:2]
    assert first_in is None
    for carried, final in zip(second_in, first_out):  # (h, c)
        assert torch.equal(carried, final)
        assert final.requires_grad and not carried.requires_grad


def test_changed_configuration_starts_afresh(lm_data_dir, tmp_path):
    data = load_lm_data(lm_data_dir)
    train_lm(tiny_config(max_steps=4), data, tmp_path / "c")
    longer = train_lm(tiny_config(max_steps=6), data, tmp_path / "c")
    assert not longer.resumed and longer.global_step == 6  # a bigger budget trains afresh
    again = train_lm(tiny_config(max_steps=6), data, tmp_path / "c")
    assert not again.resumed  # a finished run keeps no resume state (its result is the output)
    other = train_lm(tiny_config(max_steps=6, lr=0.01), data, tmp_path / "c")
    assert not other.resumed and other.global_step == 6
