"""What a report is about (corpus, language pair, splits, test set, from
``metrics/prepare.json``) and whether the run is in a paper's setting (then its numbers show)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rnnsearch.reporting.tables import Table

SPLITS = ("train", "dev", "test")
# Where each paper's numbers were measured (Bahdanau et al.: WMT'14 En->Fr, whose data includes
# these Hansards; Luong et al.: WMT'14 En->De); others get no paper column (would not compare).
PAPER_SETTINGS = {"bahdanau": {("hansard36", "en", "fr"), ("wmt14", "en", "fr")},
                  "luong": {("wmt14", "en", "de")}}


@dataclass(frozen=True)
class CorpusInfo:
    """The corpus block of ``metrics/prepare.json`` and the split sizes beside it."""

    name: str
    title: str
    src_lang: str
    tgt_lang: str
    test_set: str
    pairs: dict[str, int]
    inputs: dict[str, dict[str, dict[str, str]]]   # split -> role -> {"file", "sha256"}

    @classmethod
    def from_metrics(cls, prepare: dict[str, Any] | None) -> "CorpusInfo | None":
        """Read from ``metrics/prepare.json`` (None when it is absent or predates the block)."""
        if not prepare or not isinstance(prepare.get("corpus"), dict):
            return None
        corpus = prepare["corpus"]
        splits = {s: prepare.get(s, {}) for s in SPLITS}
        return cls(name=str(corpus.get("name", "?")), title=str(corpus.get("title", "")),
                   src_lang=str(corpus.get("src_lang", "?")),
                   tgt_lang=str(corpus.get("tgt_lang", "?")),
                   test_set=str(corpus.get("test_set", "")),
                   pairs={s: int(v.get("pairs", 0)) for s, v in splits.items()},
                   inputs={s: v["inputs"] for s, v in splits.items() if v.get("inputs")})

    @property
    def pair(self) -> str:
        """``en->fr``."""
        return f"{self.src_lang}->{self.tgt_lang}"

    def in_setting_of(self, paper: str) -> bool:
        """True when ``paper``'s numbers were measured on this corpus and direction."""
        return (self.name, self.src_lang, self.tgt_lang) in PAPER_SETTINGS[paper]

    def table(self) -> Table:
        """The report's first table: what was translated, from which files, how much."""
        rows = [("Corpus", f"{self.name}: {self.title}" if self.title else self.name),
                ("Language pair", self.pair),
                ("Pairs (train / dev / test)",
                 " / ".join(f"{self.pairs.get(s, 0):,}" for s in SPLITS)),
                ("Test set", self.test_set or "?")]
        for split, roles in self.inputs.items():
            for role, given in roles.items():
                rows.append((f"{split} {role}",
                             f"`{given.get('file', '?')}` (sha256 `{given.get('sha256', '?')}`)"))
        return Table("The run: corpus, language pair and test set", ("Item", "Value"),
                     tuple(rows))


def unknown_corpus_table() -> Table:
    """Said instead of :meth:`CorpusInfo.table` when prepare recorded no corpus block."""
    return Table("The run: corpus, language pair and test set", ("Item", "Value"),
                 (("Corpus", "not recorded: metrics/prepare.json has no 'corpus' block; "
                             "rerun the prepare stage"),))
