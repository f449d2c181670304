"""Everything the evaluate stage measures for one grid cell, as one metrics dict.

``metrics/eval/<cell>.json``::

    {"cell", "model": {name, kind, max_len, cell, score, attention, input_feeding},
     "has_attention", "sentences", "no_unk_sentences", ["no_unk_words_sentences",]
     "speed": {greedy: {sentences_per_s, ...}, ...},
     "systems": {<system>: {"all": {bleu, chrf, len_ratio, n, bleu_signature, chrf_signature},
                            "no_unk": {...}, ["no_unk_words": {...},]
                            "unk_removed": {...} (all, <unk> deleted),
                            "by_length": {"0-10": {bleu, chrf, len_ratio, n, step}, ...,
                                          "signature": <bleu signature>},
                            "vs_baseline": {"baseline", "all": {p_value, bleu, baseline_bleu,
                                            n, signature}, "no_unk": {the same keys},
                                            "by_length": {"0-10": p, ...}}},
                            "unigram_f1": {...}}},  (docs/contracts.md)
     "training_words": {training_tokens, training_types, vocabulary_words}}

A system is ``greedy``, ``beam`` or UNK-replaced ``beam_unk``. ``vs_baseline`` (absent for the
baseline): paired bootstrap against the baseline model's same method at the same maximum length;
p null for buckets under ``evaluate.min_bucket_sentences`` sentences. ``no_unk_words`` (subword
units): a word-level run's ``no_unk`` subset, to score both on the same sentences."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rnnsearch.config.evaluate import EvaluateConfig
from rnnsearch.data.clean import sentence_length
from rnnsearch.data.textio import read_json, read_lines
from rnnsearch.data.vocab import UNK, Vocabulary
from rnnsearch.errors import DataError
from rnnsearch.evaluation.rare_words import TrainingWords, unigram_f1, unit_words
from rnnsearch.evaluation.scores import corpus_scores, paired_bootstrap
from rnnsearch.evaluation.subsets import Bucket, length_buckets, no_unk_indices
from rnnsearch.tracking import split_replicate

MODEL_KEYS = ("cell", "score", "attention", "input_feeding")


@dataclass(frozen=True)
class TestSet:
    """Raw references, scored subsets, the references' Moses words (``subwords``: tokenised files
    hold their pieces); ``no_unk_words``: no word outside word-level vocabularies (None: unset)."""

    refs: list[str]
    no_unk: list[int]
    buckets: list[Bucket]
    ref_words: tuple[list[str], ...] = ()
    subwords: bool = False
    no_unk_words: list[int] | None = None

    @classmethod
    def load(cls, prepared: Path, tokenized: Path, edges: Sequence[int],
             limit: int | None = None, subwords: bool = False,
             word_vocabs: tuple[Vocabulary, Vocabulary] | None = None) -> "TestSet":
        """References from ``prepared/test.tgt``, OOVs from ``tokenized``, length buckets by
        ``sentence_length`` of ``prepared/test.src`` (as prepare drew them). ``limit``: the first
        N sentences only; ``word_vocabs`` (source, target): for ``no_unk_words``."""
        refs = read_lines(prepared / "test.tgt")[:limit]
        lengths = source_lengths(prepared, limit)
        src = read_lines(tokenized / "test.src")[:limit]
        tgt = read_lines(tokenized / "test.tgt")[:limit]
        vocabs = [Vocabulary.load(tokenized / f"vocab.{side}.txt") for side in ("src", "tgt")]
        src_words = [unit_words(line, subwords) for line in src]
        ref_words = tuple(unit_words(line, subwords) for line in tgt)
        no_unk_words = (None if word_vocabs is None else
                        no_unk_indices([" ".join(w) for w in src_words],
                                       [" ".join(w) for w in ref_words], *word_vocabs))
        return cls(refs, no_unk_indices(src, tgt, *vocabs),
                   length_buckets(lengths, edges),
                   ref_words, subwords, no_unk_words)


def source_lengths(prepared: Path, limit: int | None = None) -> list[int]:
    """The ``sentence_length`` of each line of ``prepared/test.src`` (the first ``limit``)."""
    return [sentence_length(line) for line in read_lines(prepared / "test.src")[:limit]]


def score_system(hyps: Sequence[str], test: TestSet, cfg: EvaluateConfig) -> dict[str, Any]:
    """All, no-UNK and per-length-bucket scores of one system."""
    tok = cfg.bleu_tokenize
    overall = corpus_scores(hyps, test.refs, tokenize=tok)
    by_length: dict[str, Any] = {}
    for bucket in test.buckets:
        row = corpus_scores(hyps, test.refs, bucket.indices, tok)
        row.pop("bleu_signature", None)
        row.pop("chrf_signature", None)
        by_length[bucket.label] = {**row, "step": bucket.step}
    by_length["signature"] = overall["bleu_signature"]
    scores = {"all": overall, "no_unk": corpus_scores(hyps, test.refs, test.no_unk, tok)}
    if test.no_unk_words is not None:
        scores["no_unk_words"] = corpus_scores(hyps, test.refs, test.no_unk_words, tok)
    return {**scores, "unk_removed": corpus_scores(remove_unk(hyps), test.refs, tokenize=tok),
            "by_length": by_length}


def remove_unk(hyps: Sequence[str]) -> list[str]:
    """The hypotheses with every ``<unk>`` deleted, even glued to punctuation (``<unk>,``), and
    spaces collapsed (how e.g. Joey NMT scores its output)."""
    return [" ".join(hyp.replace(UNK, " ").split()) for hyp in hyps]


def compare_systems(hyps: Sequence[str], baseline: Sequence[str], baseline_name: str,
                    test: TestSet, cfg: EvaluateConfig) -> dict[str, Any]:
    """Paired bootstrap of ``hyps`` against ``baseline``: all, no-UNK (Table 1's second column,
    resampled within it) and each length bucket (p null under ``evaluate.min_bucket_sentences``)."""
    def test_on(indices: Sequence[int] | None) -> dict[str, Any]:
        return paired_bootstrap(hyps, baseline, test.refs, indices, cfg.bootstrap_samples,
                                cfg.bootstrap_seed, cfg.bleu_tokenize)

    by_length = {b.label: test_on(b.indices)["p_value"]
                 if len(b.indices) >= cfg.min_bucket_sentences else None for b in test.buckets}
    return {"baseline": baseline_name, "all": test_on(None), "no_unk": test_on(test.no_unk),
            "by_length": by_length}


def read_system(folder: Path, system: str, test: TestSet, kind: str = "detok") -> list[str]:
    """``system``'s hypotheses in ``folder``, one per ``\n``-ended line (empty kept), detokenised
    (``kind`` ``detok``) or in model units (``tok``); DataError unless as many as the references."""
    path = folder / f"{system}.{kind}.txt"
    hyps = read_lines(path)
    if len(hyps) != len(test.refs):
        raise DataError(f"{path} has {len(hyps)} lines, the references {len(test.refs)}")
    return hyps


def rare_word_scores(folder: Path, system: str, test: TestSet, training: TrainingWords
                     ) -> dict[str, Any]:
    """Unigram F1 by training frequency of ``system``'s Moses words against the references'."""
    hyps = [unit_words(line, test.subwords) for line in read_system(folder, system, test, "tok")]
    return unigram_f1(hyps, test.ref_words, training)


def evaluate_cell(cell: str, folder: Path, test: TestSet, cfg: EvaluateConfig,
                  baseline: tuple[str, Path] | None = None,
                  training: TrainingWords | None = None) -> dict[str, Any]:
    """The metrics dict of one cell; ``baseline``: (cell name, translations folder) or None;
    ``training``: the training target words, for unigram F1 by frequency (None: not measured)."""
    meta = read_json(folder / "meta.json")          # a truncated file names itself
    system, seed = split_replicate(cell)
    name, _, max_len = system.rpartition("-")
    model = {"name": name, "kind": meta.get("model", {}).get("model", name),
             "max_len": int(max_len) if max_len.isdigit() else None,
             **{k: meta.get("model", {}).get(k) for k in MODEL_KEYS}}
    systems = {}
    for system in meta["systems"]:
        hyps = read_system(folder, system, test)
        systems[system] = score_system(hyps, test, cfg)
        if baseline is not None and cfg.bootstrap_samples > 0:
            base_hyps = read_system(baseline[1], system.removesuffix("_unk"), test)
            systems[system]["vs_baseline"] = compare_systems(hyps, base_hyps, baseline[0], test, cfg)
        if training is not None:
            systems[system]["unigram_f1"] = rare_word_scores(folder, system, test, training)
    replicate = {} if seed is None else {"system": system, "seed": seed}
    metrics = {"cell": cell, **replicate, "model": model, "has_attention": meta.get("has_attention"),
               "sentences": len(test.refs), "no_unk_sentences": len(test.no_unk),
               "speed": meta.get("speed", {}), "systems": systems}
    if test.no_unk_words is not None:
        metrics["no_unk_words_sentences"] = len(test.no_unk_words)
    if training is not None:
        metrics["training_words"] = training.summary()
    return metrics
