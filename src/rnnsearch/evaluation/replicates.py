"""Replicates: one system trained with several seeds (``replicates.seeds``); their spread, and a
significance test that counts it (Clark, Dyer, Lavie & Smith 2011).

A system's score is its replicates' mean, with their sample standard deviation.
:func:`replicate_bootstrap` is sacreBLEU's paired bootstrap (Koehn 2004) with replicates resampled
too: each resample draws the test sentences with replacement (one draw for both systems) and, per
system, as many of its replicates, with replacement; its statistic is the difference of the two
systems' mean BLEU over the drawn replicates. p-value as sacreBLEU's: (resamples whose centred
absolute difference exceeds the observed one + 1) / (samples + 1). With one replicate per system
this is sacreBLEU's bootstrap draw for draw (same seed); with several, the seed variance widens
the differences, so a difference one pair of runs calls significant may not be."""
from __future__ import annotations

import statistics
from typing import Any, Callable, Sequence

import numpy as np
from sacrebleu.metrics import BLEU

Stats = np.ndarray        # [sentences, statistics] sacreBLEU's per-sentence sufficient statistics
Score = Callable[[np.ndarray], float]   # summed statistics [statistics] -> corpus score


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """``{"mean", "sd", "n", "values"}`` of one score over a system's replicates; sd: sample
    (n - 1), None under two values; any ``None`` value (an empty subset): mean and sd None."""
    known = [value for value in values if value is not None]
    if len(known) < len(values) or not known:
        return {"mean": None, "sd": None, "n": len(values), "values": list(values)}
    return {"mean": round(statistics.fmean(known), 2),
            "sd": round(statistics.stdev(known), 2) if len(known) > 1 else None,
            "n": len(known), "values": list(values)}


def bleu_statistics(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a"
                    ) -> tuple[Stats, Score]:
    """The per-sentence BLEU statistics of ``hyps`` (float32, as sacreBLEU's bootstrap keeps
    them) and the function that turns summed statistics into corpus BLEU."""
    metric = BLEU(tokenize=tokenize)
    stats = np.array(metric._extract_corpus_statistics(list(hyps), [list(refs)]),
                     dtype="float32")
    return stats, lambda summed: metric._compute_score_from_stats(summed).score


def replicate_bootstrap(system: Sequence[Stats], baseline: Sequence[Stats], score: Score,
                        indices: Sequence[int] | None = None, samples: int = 1000,
                        seed: int = 12345) -> dict[str, Any]:
    """The replicate-aware paired bootstrap (module docstring) of ``system`` against ``baseline``
    (per-replicate statistics [sentences, statistics]) on the sentences at ``indices`` (None: all).
    ``p_value`` (None without sentences), the observed mean BLEUs, replicate and sentence counts."""
    picked = [np.asarray(s if indices is None else s[list(indices)]) for s in (*system,
                                                                                  *baseline)]
    sentences = len(picked[0])
    if sentences == 0 or samples <= 0:
        return {"p_value": None, "n": sentences}
    ours, theirs = picked[:len(system)], picked[len(system):]
    observed = [float(np.mean([score(s.sum(0)) for s in group])) for group in (ours, theirs)]
    draws = np.random.default_rng(seed).choice(sentences, size=(samples, sentences), replace=True)
    replicate_rng = np.random.default_rng([seed, len(ours), len(theirs)])
    differences = np.empty(samples)
    for b, draw in enumerate(draws):                 # draw: [sentences] indices
        means = [np.mean([score(group[r][draw].sum(0))
                          for r in replicate_rng.integers(0, len(group), len(group))])
                 for group in (ours, theirs)]
        differences[b] = abs(means[0] - means[1])
    centred = differences - differences.mean()
    count = int(np.sum(centred > abs(observed[0] - observed[1])))
    return {"p_value": round((count + 1) / (samples + 1), 4), "n": sentences,
            "bleu": round(observed[0], 2), "baseline_bleu": round(observed[1], 2),
            "replicates": len(ours), "baseline_replicates": len(theirs), "samples": samples}


def system_spread(results: Sequence[dict[str, Any]], method: str) -> dict[str, Any]:
    """The spread (:func:`spread`) of ``method``'s BLEU over a system's replicates' metrics, on
    all sentences, the no-UNK subset and each length bucket."""
    scores = [metrics["systems"][method] for metrics in results]
    labels = [label for label in scores[0]["by_length"] if label != "signature"]
    return {"all": spread([s["all"]["bleu"] for s in scores]),
            "no_unk": spread([s["no_unk"]["bleu"] for s in scores]),
            "by_length": {label: spread([s["by_length"][label]["bleu"] for s in scores])
                          for label in labels}}


def system_test(system: Sequence[Sequence[str]], baseline: Sequence[Sequence[str]],
                test: Any, cfg: Any) -> dict[str, Any]:
    """:func:`replicate_bootstrap` of one method's hypotheses (a list per replicate) against the
    baseline's on all, no-UNK and each length bucket of ``test`` (an evaluation TestSet; p null
    under ``evaluate.min_bucket_sentences`` sentences)."""
    first, score = bleu_statistics(system[0], test.refs, cfg.bleu_tokenize)
    ours = [first] + [bleu_statistics(h, test.refs, cfg.bleu_tokenize)[0] for h in system[1:]]
    theirs = [bleu_statistics(h, test.refs, cfg.bleu_tokenize)[0] for h in baseline]

    def test_on(indices: Sequence[int] | None) -> dict[str, Any]:
        return replicate_bootstrap(ours, theirs, score, indices, cfg.bootstrap_samples,
                                   cfg.bootstrap_seed)

    return {"all": test_on(None), "no_unk": test_on(test.no_unk),
            "by_length": {bucket.label: test_on(bucket.indices)["p_value"]
                          if len(bucket.indices) >= cfg.min_bucket_sentences else None
                          for bucket in test.buckets}}
