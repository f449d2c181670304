"""Word vocabularies of N entries: the four specials, then the N - 4 most frequent words.

``vocab.{src,tgt}.txt``: one ``word<TAB>count`` a line, the line number (from 0) is the id;
``<pad>``, ``<unk>``, ``<s>``, ``</s>`` come first, count 0. Unlisted words map to ``<unk>``."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from rnnsearch.data.textio import read_lines
from rnnsearch.errors import DataError

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


@dataclass(frozen=True)
class Vocabulary:
    """A fixed word list; ``ids`` maps words to ids, ``words[i]`` is word ``i``."""

    words: tuple[str, ...]
    counts: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.words[: len(SPECIALS)] != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {self.words[:4]}")
        object.__setattr__(self, "ids", {w: i for i, w in enumerate(self.words)})

    pad_id = PAD_ID
    unk_id = UNK_ID
    bos_id = BOS_ID
    eos_id = EOS_ID

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: str) -> bool:
        return word in self.ids  # type: ignore[attr-defined]

    def encode(self, tokens: Sequence[str], add_eos: bool = False) -> list[int]:
        """Map tokens to ids (unknown words to ``<unk>``), optionally closing with ``</s>``."""
        ids_map = self.ids  # type: ignore[attr-defined]
        ids = [ids_map.get(t, UNK_ID) for t in tokens]
        return ids + [EOS_ID] if add_eos else ids

    def decode(self, ids: Iterable[int], strip_specials: bool = True) -> list[str]:
        """Map ids back to words; stops at ``</s>`` and drops ``<pad>``/``<s>`` by default."""
        words = []
        for i in ids:
            i = int(i)
            if strip_specials and i == EOS_ID:
                break
            if strip_specials and i in (PAD_ID, BOS_ID):
                continue
            words.append(self.words[i])
        return words

    @classmethod
    def build(cls, counter: Counter, max_size: int, min_count: int = 1) -> "Vocabulary":
        """``max_size`` entries in all: the specials, then the ``max_size - 4`` most frequent
        words (ties broken alphabetically)."""
        ranked = sorted((w for w, c in counter.items() if c >= min_count and w not in SPECIALS),
                        key=lambda w: (-counter[w], w))[: max(0, max_size - len(SPECIALS))]
        return cls(SPECIALS + tuple(ranked), (0,) * len(SPECIALS) + tuple(counter[w] for w in ranked))

    def save(self, path: str | Path) -> None:
        """Write the ``word<TAB>count`` file."""
        lines = (f"{w}\t{c}\n" for w, c in zip(self.words, self.counts))
        Path(path).write_text("".join(lines), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        """Read a vocabulary file written by :meth:`save`; errors (:class:`DataError`) name the
        file and line. A word listed twice is refused: every id after it would shift."""
        words, counts = [], []
        first_line: dict[str, int] = {}
        for number, line in enumerate(read_lines(path), 1):
            word, sep, count = line.partition("\t")
            if not sep or not count.isdigit():
                raise DataError(f"{path}:{number}: expected 'word<TAB>count', got {line!r}")
            if word in first_line:
                raise DataError(f"{path}:{number}: the word {word!r} is listed again (first at "
                                f"line {first_line[word]}); ids after it would shift: rerun the "
                                f"tokenize stage")
            first_line[word] = number
            words.append(word)
            counts.append(int(count))
        try:
            return cls(tuple(words), tuple(counts))
        except ValueError as err:
            raise DataError(f"{path}: {err}") from err
