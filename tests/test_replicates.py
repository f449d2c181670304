"""Replicates (replicates.seeds): the spread over seeds and the replicate-aware paired
bootstrap, checked against values computed another way. The tiny pipeline with two replicates
per system runs end to end in test_pipeline_e2e.py, on a copy of its committed tiny run."""
from __future__ import annotations

import itertools
import statistics
from fractions import Fraction

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from rnnsearch import tracking
from rnnsearch.config.base import check_params, from_dict
from rnnsearch.config.replicates import ReplicatesConfig
from rnnsearch.errors import ConfigError
from rnnsearch.evaluation.replicates import bleu_statistics, replicate_bootstrap, spread
from rnnsearch.evaluation.scores import paired_bootstrap


def test_spread_is_the_mean_and_sample_sd():
    assert spread([12.0, 13.0, 14.5]) == {"mean": 13.17, "sd": 1.26, "n": 3,
                                           "values": [12.0, 13.0, 14.5]}
    assert spread([20.0]) == {"mean": 20.0, "sd": None, "n": 1, "values": [20.0]}
    assert spread([1.0, None])["mean"] is None          # an empty subset in one replicate


# The worked example: 3 test sentences with additive per-sentence scores (the corpus score is
# their sum), a system with 2 replicates and a baseline with 2. A resample draws 3 sentences
# (27 equally likely draws) and, per system, 2 replicates with replacement (4 each): 432
# outcomes. Observed: |mean(3, 2) - mean(1, 1)| = 3/2. Enumerated below, E|d| = 113/72, and 29
# of the 432 outcomes have |d| - E|d| > 3/2: p = 29/432 = 0.0671 as the resamples grow.
SYSTEM = [[2, 0, 1], [1, 1, 0]]
BASELINE = [[0, 1, 0], [1, 0, 0]]


def exact_p(system: list[list[int]], baseline: list[list[int]]) -> Fraction:
    """P(|d| - E|d| > observed) over every equally likely outcome of one resample."""
    sentences = len(system[0])
    differences = []
    for draw in itertools.product(range(sentences), repeat=sentences):
        for ours in itertools.product(range(len(system)), repeat=len(system)):
            for theirs in itertools.product(range(len(baseline)), repeat=len(baseline)):
                mean_ours = Fraction(sum(system[r][i] for r in ours for i in draw), len(ours))
                mean_theirs = Fraction(sum(baseline[r][i] for r in theirs for i in draw),
                                       len(theirs))
                differences.append(abs(mean_ours - mean_theirs))
    expected = sum(differences) / len(differences)
    observed = abs(Fraction(sum(map(sum, system)), len(system))
                   - Fraction(sum(map(sum, baseline)), len(baseline)))
    return Fraction(sum(d - expected > observed for d in differences), len(differences))


def test_worked_example_converges_to_the_enumerated_p():
    assert exact_p(SYSTEM, BASELINE) == Fraction(29, 432)
    stats = [np.array(scores, dtype="float32")[:, None] for scores in SYSTEM + BASELINE]
    result = replicate_bootstrap(stats[:2], stats[2:], lambda summed: float(summed[0]),
                                 samples=20000, seed=7)
    assert result["bleu"] == 2.5 and result["baseline_bleu"] == 1.0   # the observed means
    assert abs(result["p_value"] - 29 / 432) < 0.01, result


def sentences(seed: int, count: int = 40) -> tuple[list[str], list[str], list[str]]:
    """Two systems' outputs and references made of a few words (word overlap varies)."""
    rng = np.random.default_rng(seed)
    words = "the a cat dog sat on mat house red blue runs sleeps".split()
    refs = [" ".join(rng.choice(words, 6)) for _ in range(count)]

    def noisy(keep: float) -> list[str]:
        return [" ".join(w if rng.random() < keep else rng.choice(words) for w in ref.split())
                for ref in refs]
    return noisy(0.7), noisy(0.6), refs


def test_one_replicate_each_is_sacrebleus_paired_bootstrap():
    system, baseline, refs = sentences(0)
    ours, score = bleu_statistics(system, refs)
    theirs, _ = bleu_statistics(baseline, refs)
    one_run = paired_bootstrap(system, baseline, refs, samples=200, seed=5)
    result = replicate_bootstrap([ours], [theirs], score, samples=200, seed=5)
    assert result["p_value"] == one_run["p_value"]
    assert (result["bleu"], result["baseline_bleu"]) == (one_run["bleu"],
                                                          one_run["baseline_bleu"])


def resampled_p(system: list[list[str]], baseline: list[list[str]], refs: list[str],
                samples: int, seed: int) -> float:
    """The replicate-aware p computed the slow way: sacreBLEU's corpus BLEU of each resampled
    list of sentences (the same draws as :func:`replicate_bootstrap`)."""
    def bleu(hyps: list[str], draw: np.ndarray) -> float:
        return BLEU().corpus_score([hyps[i] for i in draw], [[refs[i] for i in draw]]).score

    everything = np.arange(len(refs))
    observed = abs(statistics.fmean(bleu(h, everything) for h in system)
                   - statistics.fmean(bleu(h, everything) for h in baseline))
    draws = np.random.default_rng(seed).choice(len(refs), size=(samples, len(refs)))
    replicate_rng = np.random.default_rng([seed, len(system), len(baseline)])
    differences = []
    for draw in draws:
        means = [statistics.fmean(bleu(group[r], draw)
                                  for r in replicate_rng.integers(0, len(group), len(group)))
                 for group in (system, baseline)]
        differences.append(abs(means[0] - means[1]))
    centred = np.array(differences) - np.mean(differences)
    return round((int(np.sum(centred > observed)) + 1) / (samples + 1), 4)


def test_replicate_bootstrap_matches_the_slow_way():
    runs = [sentences(seed) for seed in (1, 2, 3)]
    refs = runs[0][2]
    system = [run[0] for run in runs]
    baseline = [sentences(seed)[1] for seed in (1, 4)]
    _, score = bleu_statistics(system[0], refs)
    stats = [bleu_statistics(h, refs)[0] for h in system + baseline]
    result = replicate_bootstrap(stats[:3], stats[3:], score, samples=60, seed=11)
    assert result["replicates"] == 3 and result["baseline_replicates"] == 2
    assert result["p_value"] == resampled_p(system, baseline, refs, 60, 11)


@pytest.mark.parametrize("seeds, message", [([2, 2], "repeats a seed"),
                                            ([1234], "is train.seed"),
                                            ([-1], "a seed must be in")])
def test_bad_seeds_name_the_key(seeds, message):
    params = {"train": {"seed": 1234}, "replicates": {"seeds": seeds}}
    config = from_dict(ReplicatesConfig, params["replicates"], "replicates")
    with pytest.raises(ConfigError, match=rf"replicates\.seeds: .*{message}"):
        check_params(config, "replicates", params)


def test_runs_of_a_replicate_are_tagged_with_its_system_and_seed(monkeypatch):
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    assert tracking.split_replicate("search-50-seed2") == ("search-50", 2)
    tags = tracking.run_tags("translate", {"cell": "search-50-seed2"})
    assert (tags["system"], tags["seed"]) == ("search-50", "2")
    monkeypatch.setenv("PL_GLOBAL_SEED", "1234")     # a grid cell's own training run
    tags = tracking.run_tags("train", {"cell": "search-50"})
    assert (tags["cell"], tags["system"], tags["seed"]) == ("search-50", "search-50", "1234")
    with tracking.replicate_of("search-50", 3):      # train_seed: train's code, another seed
        tags = tracking.run_tags("train", {"cell": "search-50"})
        assert tracking.experiment_run_name("search-50") == "search-50-seed3"
    assert (tags["cell"], tags["system"], tags["seed"]) == ("search-50-seed3", "search-50", "3")
