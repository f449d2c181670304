"""The gold set as the pipeline sees it, and the EM aligners run on it plus the training text."""
from __future__ import annotations

import multiprocessing as mp
import signal
import time
from dataclasses import dataclass
from multiprocessing.pool import Pool
from typing import Any, Sequence

import numpy as np

from rnnsearch.alignment import Link
from rnnsearch.alignment.aer import alignment_scores, diagonal_links, sentence_counts
from rnnsearch.alignment.gold import GoldPair
from rnnsearch.alignment.ibm1 import DiagonalPrior, train_model1, viterbi
from rnnsearch.alignment.mapping import Mapped, gold_links
from rnnsearch.alignment.symmetrize import links_from_choices, symmetrise


@dataclass(frozen=True)
class GoldCorpus:
    """Gold pairs with both sides mapped to pipeline tokens (``en``/``fr`` :class:`Mapped`)."""

    pairs: list[GoldPair]
    en: list[Mapped]
    fr: list[Mapped]

    @classmethod
    def from_records(cls, records: Sequence[dict[str, Any]]) -> "GoldCorpus":
        """The inverse of :meth:`records` (``data/align/gold.json``)."""
        def mapped(r: dict[str, Any], lang: str) -> Mapped:
            return Mapped(tuple(r[lang]), tuple(tuple(c) for c in r[f"{lang}_cover"]))

        pairs = [GoldPair(r["id"], tuple(r["gold_en"]), tuple(r["gold_fr"]),
                          frozenset(map(tuple, r["sure"])), frozenset(map(tuple, r["possible"])))
                 for r in records]
        return cls(pairs, [mapped(r, "en") for r in records], [mapped(r, "fr") for r in records])

    def pipeline_links(self, index: int, kind: str) -> list[Link]:
        """Sentence ``index``'s Sure (``kind="sure"``) or Possible links between pipeline tokens:
        every token pair covering a gold link."""
        gold = getattr(self.pairs[index], kind)
        e_cover, f_cover = self.en[index].cover, self.fr[index].cover
        return sorted((i, j) for i, ci in enumerate(e_cover) for j, cj in enumerate(f_cover)
                      if any((e, f) in gold for e in ci for f in cj))

    def to_gold(self, links: Sequence[set[Link]]) -> list[set[Link]]:
        """Per sentence, links between pipeline tokens -> links between gold words."""
        return [gold_links(l, e.cover, f.cover) for l, e, f in zip(links, self.en, self.fr)]

    def score(self, links: Sequence[set[Link]]) -> dict[str, float | int]:
        """AER, precision, recall of pipeline-token links against the gold."""
        return alignment_scores(self.to_gold(links), [p.sure for p in self.pairs],
                                [p.possible for p in self.pairs])

    def counts(self, links: Sequence[set[Link]]) -> np.ndarray:
        """AER's counts per gold sentence of pipeline-token links (sentences x 4:
        :func:`rnnsearch.alignment.aer.sentence_counts`)."""
        return sentence_counts(self.to_gold(links), [p.sure for p in self.pairs],
                               [p.possible for p in self.pairs])

    def diagonal(self) -> dict[str, float | int]:
        """The diagonal baseline's scores (on the gold tokens themselves)."""
        return alignment_scores([diagonal_links(len(p.en), len(p.fr)) for p in self.pairs],
                                [p.sure for p in self.pairs], [p.possible for p in self.pairs])

    def records(self) -> list[dict[str, Any]]:
        """JSON-able sentences: ids, gold words and links, pipeline tokens and their covers."""
        return [{"id": p.ident, "gold_en": list(p.en), "gold_fr": list(p.fr),
                 "sure": sorted(p.sure), "possible": sorted(p.possible),
                 "en": list(e.tokens), "fr": list(f.tokens),
                 "en_cover": [list(c) for c in e.cover], "fr_cover": [list(c) for c in f.cover]}
                for p, e, f in zip(self.pairs, self.en, self.fr)]


@dataclass(frozen=True)
class EMJob:
    """One aligner in one direction: target words of ``tgt`` choose among ``src`` words."""

    model: str
    direction: str                  # "<tgt lang>|<src lang>", e.g. "fr|en"
    src: Sequence[Sequence[str]]
    tgt: Sequence[Sequence[str]]
    iterations: int
    prior: DiagonalPrior | None
    keep: int                       # Viterbi alignments of the first ``keep`` sentences
    alpha: float | None = None      # Dirichlet prior: variational Bayes (None: EM)


def run_job(job: EMJob) -> dict[str, Any]:
    """Train by EM; the log-likelihood curve, the kept sentences' Viterbi choices, seconds."""
    started = time.perf_counter()
    model, groups = train_model1(job.src, job.tgt, job.iterations, job.prior,
                                 desc=f"EM {job.model} {job.direction}", alpha=job.alpha)
    choices = viterbi(model, groups, job.keep)
    return {"model": job.model, "direction": job.direction, "choices": choices,
            "log_likelihood": model.log_likelihood, "parameters": len(model.t),
            "seconds": round(time.perf_counter() - started, 1)}


def run_jobs(jobs: Sequence[EMJob], processes: int) -> list[dict[str, Any]]:
    """Every job, ``processes`` at a time (:func:`worker_pool`)."""
    if processes <= 1 or len(jobs) <= 1:
        return [run_job(job) for job in jobs]
    with worker_pool(min(processes, len(jobs))) as pool:
        return pool.map(run_job, jobs, chunksize=1)


def worker_pool(processes: int) -> Pool:
    """``processes`` forked workers (sharing the corpus copy-on-write) with SIGTERM reset to the
    default, so ``Pool.terminate`` ends them whichever thread takes it: the stage runner's
    inherited handler runs only in the main thread, so a SIGTERM taken by tqdm's monitor thread
    while the main one waited for a task would end neither the worker nor the stage."""
    return mp.get_context("fork").Pool(processes, initializer=signal.signal,
                                       initargs=(signal.SIGTERM, signal.SIG_DFL))


def symmetrised(choices: Sequence[Sequence[Sequence[int]]], directions: Sequence[str],
                names: Sequence[str]) -> dict[str, list[set[Link]]]:
    """Per sentence ``(e, f)`` links of both directions (``choices`` of f given e, then of e
    given f, named ``directions``) and of each symmetrisation of ``names``."""
    fe = [links_from_choices(c, target_is_f=True) for c in choices[0]]
    ef = [links_from_choices(c, target_is_f=False) for c in choices[1]]
    out = {directions[0]: fe, directions[1]: ef}
    out.update({name: [symmetrise(name, a, b) for a, b in zip(fe, ef)] for name in names})
    return out
