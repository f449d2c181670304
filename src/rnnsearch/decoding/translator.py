"""A trained model with its vocabularies: tokens in, target words (and alignments) out; shared
by the translate stage and the command line, so both pre- and post-process alike."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from rnnsearch.data.vocab import EOS, Vocabulary
from rnnsearch.decoding.corpus import CorpusResult, encode_source, translate_corpus
from rnnsearch.decoding.hypothesis import Hypothesis
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.decoding.unk import replace_unknowns
from rnnsearch.errors import DataError


@dataclass(frozen=True)
class Translator:
    """``model`` (the decoder interface) plus the vocabularies it was trained with."""

    model: Any
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary
    source_eos: bool = False
    device: str = "cpu"

    @classmethod
    def load(cls, model_path: str | Path, vocab_dir: str | Path, source_eos: bool = False,
             device: str = "cpu") -> "Translator":
        """Load ``model.pt`` and ``vocab.{src,tgt}.txt``; sizes must agree."""
        from rnnsearch.models.seq2seq import load_model

        model = load_model(model_path, map_location=device).to(device)
        vocab_dir = Path(vocab_dir)
        src_vocab = Vocabulary.load(vocab_dir / "vocab.src.txt")
        tgt_vocab = Vocabulary.load(vocab_dir / "vocab.tgt.txt")
        for side, vocab, size in (("src", src_vocab, model.src_vocab),
                                  ("tgt", tgt_vocab, model.tgt_vocab)):
            if len(vocab) != size:
                raise DataError(f"{model_path}: trained with a {side} vocabulary of {size} words, "
                                f"but {vocab_dir}/vocab.{side}.txt has {len(vocab)}")
        return cls(model, src_vocab, tgt_vocab, source_eos, device)

    @property
    def has_attention(self) -> bool:
        return bool(getattr(self.model, "has_attention", True))

    def translate(self, sentences: Sequence[Sequence[str]], method: str, options: SearchOptions,
                  batch_size: int, progress: bool = True) -> CorpusResult:
        """Decode tokenised sentences (lists of words)."""
        sources = [encode_source(words, self.src_vocab, self.source_eos) for words in sentences]
        with torch.inference_mode():
            return translate_corpus(self.model, sources, method, options, batch_size,
                                    self.device, progress)

    def source_labels(self, words: Sequence[str]) -> list[str]:
        """The source positions the attention columns stand for (the real words, not <unk>)."""
        labels = list(words) if words or self.source_eos else ["<unk>"]
        return labels + [EOS] if self.source_eos else labels

    def target_words(self, hypothesis: Hypothesis, src_words: Sequence[str],
                     unk_replace: bool = False) -> list[str]:
        """The output words (``</s>`` dropped), ``<unk>`` replaced from the source if asked."""
        words = self.tgt_vocab.decode(hypothesis.tokens)
        if unk_replace:
            words = replace_unknowns(words, src_words, hypothesis.attention)
        return words
