"""What the report reads: metrics files only (no model, no translation, no training code)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Container, Mapping

from rnnsearch.errors import DataError
from rnnsearch.reporting.corpus import CorpusInfo
from rnnsearch.reporting.senses import check_senses

SYSTEM_KEYS = ("all", "by_length")                    # every system of metrics/eval/<cell>.json
BUCKET_KEYS = ("n", "bleu", "step")                   # every by_length bucket
F1_CLASSES = ("all", "in_vocabulary", "rare", "unseen")    # a system's unigram_f1, if measured
F1_KEYS = ("f1", "ref_tokens")                        # every class row of unigram_f1
SAMPLE_KEYS = ("index", "source", "target", "attention")   # every alignment sample
ENVIRONMENT = "environment"                 # the machine and library versions, not a result
RERUN = {"prepare": "rerun the prepare stage", "eval": "rerun the evaluate stage", "alignments": "rerun the translate stage",
         "train": "rerun the train stage", "embed": "rerun the embed stage",
         "lm": "rerun the pretrain_lm stage", "senses": "rerun the senses stage",
         "align": "rerun the align stage", "align_attention": "rerun the align_attention stage",
         "search_error": "rerun the search_error stage", "summary": "rerun the evaluate stage"}


def read_metrics_json(path: Path, hint: str) -> dict[str, Any]:
    """A metrics file's JSON object; a truncated, non-JSON or empty one (only ``environment``: its
    table would vanish silently) raises :class:`DataError` naming it, with ``hint`` (its stage)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not valid JSON (truncated?): {err}; {hint}") from err
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object, got {type(data).__name__}; {hint}")
    if not data.keys() - {ENVIRONMENT}:
        what = f"only its '{ENVIRONMENT}' block" if data else "an empty JSON object"
        raise DataError(f"{path}: holds no metrics ({what}); {hint}")
    return data


def _need(path: Path, data: Any, key: str, where: str, hint: str, kind: type = dict) -> Any:
    """``data[key]``, which must exist and be a ``kind``; errors name the file and the key."""
    if not isinstance(data, Mapping) or key not in data:
        raise DataError(f"{path}: missing key '{where}{key}'; {hint}")
    value = data[key]
    if not isinstance(value, kind):
        raise DataError(f"{path}: '{where}{key}' must be a {kind.__name__}, got "
                        f"{type(value).__name__}; {hint}")
    return value


def check_eval(path: Path, data: dict[str, Any]) -> None:
    """The keys the tables and figures read from ``metrics/eval/<cell>.json``."""
    hint = RERUN["eval"]
    model = _need(path, data, "model", "", hint)
    _need(path, model, "name", "model.", hint, str)
    systems = _need(path, data, "systems", "", hint)
    if not systems:
        raise DataError(f"{path}: 'systems' is empty; {hint}")
    for name, system in systems.items():
        where = f"systems.{name}."
        for key in SYSTEM_KEYS:
            _need(path, system, key, where, hint)
        for label, bucket in system["by_length"].items():
            if label != "signature":
                for key in BUCKET_KEYS:
                    _need(path, bucket, key, f"{where}by_length.{label}.", hint, object)
        if "unigram_f1" in system:
            check_unigram_f1(path, data, system["unigram_f1"], f"{where}unigram_f1.")


def check_unigram_f1(path: Path, data: dict[str, Any], f1: Any, where: str) -> None:
    """The rare-word keys: every class, every rank bin's F1 and step, the ``training_words``."""
    hint = RERUN["eval"]
    for name in F1_CLASSES:
        for key in F1_KEYS:
            _need(path, _need(path, f1, name, where, hint), key, f"{where}{name}.", hint, object)
    for label, row in _need(path, f1, "by_rank", where, hint).items():
        for key in ("f1", "step"):
            _need(path, row, key, f"{where}by_rank.{label}.", hint, object)
    words = _need(path, data, "training_words", "", hint)
    for key in ("training_tokens", "training_types", "vocabulary_words"):
        _need(path, words, key, "training_words.", hint, int)


def check_alignments(path: Path, data: dict[str, Any]) -> None:
    """The keys Figure 3 reads from ``metrics/alignments/<cell>.json``."""
    hint = RERUN["alignments"]
    for i, sample in enumerate(_need(path, data, "samples", "", hint, list)):
        for key in SAMPLE_KEYS:
            _need(path, sample, key, f"samples[{i}].", hint, object)


def _read_folder(folder: Path, check: Callable[[Path, dict[str, Any]], None] | None = None,
                 only: Container[str] | None = None) -> dict[str, dict[str, Any]]:
    """A folder's ``<name>.json`` files (in ``only``, if given) by sorted name, each checked by
    ``check``; empty when the folder is absent."""
    if not folder.is_dir():
        return {}
    files = {}
    for path in sorted(folder.glob("*.json")):
        if only is not None and path.stem not in only:
            continue
        files[path.stem] = read_metrics_json(path, RERUN.get(folder.name, "rerun its stage"))
        if check is not None:
            check(path, files[path.stem])
    return files


def _read_file(path: Path, check: Callable[[Path, dict[str, Any]], None] | None = None
               ) -> dict[str, Any] | None:
    """``path`` read (and checked by ``check``), or None when the stage never wrote it."""
    if not path.is_file():
        return None
    data = read_metrics_json(path, RERUN[path.stem])
    if check is not None:
        check(path, data)
    return data


@dataclass(frozen=True)
class ReportInputs:
    """Every metrics file the tables and figures are made from (absent ones empty/None)."""

    evals: dict[str, dict[str, Any]]                      # metrics/eval/<cell>.json
    alignments: dict[str, dict[str, Any]] = field(default_factory=dict)  # metrics/alignments/
    train: dict[str, dict[str, Any]] = field(default_factory=dict)       # metrics/train/<cell>.json
    search_errors: dict[str, dict[str, Any]] = field(default_factory=dict)  # metrics/search_error/
    embed: dict[str, Any] | None = None                   # metrics/embed.json
    lm: dict[str, Any] | None = None                      # metrics/lm.json
    senses: dict[str, Any] | None = None                  # metrics/senses.json
    align: dict[str, Any] | None = None                   # metrics/align.json
    align_attention: dict[str, Any] | None = None         # metrics/align_attention.json
    prepare: dict[str, Any] | None = None                 # metrics/prepare.json (the corpus)
    replicates: dict[str, Any] | None = None  # metrics/eval/replicates/summary.json (seeds)

    @classmethod
    def load(cls, metrics: Path) -> "ReportInputs":
        """Read ``metrics/`` for the cells in ``metrics/eval`` (other cells' files are an
        earlier grid's); a damaged file or missing key raises :class:`DataError` naming it."""
        evals = _read_folder(metrics / "eval", check_eval)
        return cls(evals=evals,
                   alignments=_read_folder(metrics / "alignments", check_alignments, evals),
                   train=_read_folder(metrics / "train", only=evals),
                   search_errors=_read_folder(metrics / "search_error", only=evals),
                   embed=_read_file(metrics / "embed.json"),
                   lm=_read_file(metrics / "lm.json"),
                   senses=_read_file(metrics / "senses.json", check_senses),
                   align=_read_file(metrics / "align.json"),
                   align_attention=_read_file(metrics / "align_attention.json"),
                   prepare=_read_file(metrics / "prepare.json"),
                   replicates=_read_file(metrics / "eval" / "replicates" / "summary.json"))

    @property
    def corpus(self) -> CorpusInfo | None:
        """The corpus the run translated, as prepare recorded it (None: not recorded)."""
        return CorpusInfo.from_metrics(self.prepare)

    def in_setting_of(self, paper: str) -> bool:
        """True when the run's corpus and direction are ``paper``'s (its numbers compare)."""
        corpus = self.corpus
        return corpus is not None and corpus.in_setting_of(paper)

    def ordered_cells(self, baseline: str = "encdec") -> list[str]:
        """Cells by max length, the baseline model first, then by name (the paper's order)."""
        def key(cell: str) -> tuple:
            model = self.evals[cell]["model"]
            return (model.get("max_len") or 0, model.get("name") != baseline, model.get("name"))
        return sorted(self.evals, key=key)
