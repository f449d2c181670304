"""sacrebleu scores with their signatures, on the whole test set or a subset of it."""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Sequence

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.significance import PairedTest


def _pick(items: Sequence[str], indices: Sequence[int] | None) -> list[str]:
    return list(items) if indices is None else [items[i] for i in indices]


def corpus_scores(hyps: Sequence[str], refs: Sequence[str], indices: Sequence[int] | None = None,
                  tokenize: str = "13a") -> dict[str, Any]:
    """BLEU, chrF (with sacrebleu signatures), length ratio and sentence count of detokenised
    ``hyps`` against raw ``refs`` (at ``indices``, or all); an empty subset scores ``None``."""
    hyps, refs = _pick(hyps, indices), _pick(refs, indices)
    if not hyps:
        return {"n": 0, "bleu": None, "chrf": None, "len_ratio": None}
    bleu_metric, chrf_metric = BLEU(tokenize=tokenize), CHRF()
    bleu = bleu_metric.corpus_score(hyps, [refs])
    chrf = chrf_metric.corpus_score(hyps, [refs])
    return {"n": len(hyps), "bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2),
            "len_ratio": round(bleu.sys_len / bleu.ref_len, 3) if bleu.ref_len else None,
            "bleu_signature": str(bleu_metric.get_signature()),
            "chrf_signature": str(chrf_metric.get_signature())}


@contextlib.contextmanager
def _sacrebleu_seed(seed: int) -> Iterator[None]:
    """sacrebleu reads its bootstrap seed from ``SACREBLEU_SEED``; set it for one call."""
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if old is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = old


def paired_bootstrap(system: Sequence[str], baseline: Sequence[str], refs: Sequence[str],
                     indices: Sequence[int] | None = None, samples: int = 1000, seed: int = 12345,
                     tokenize: str = "13a") -> dict[str, Any]:
    """sacrebleu's paired bootstrap (Koehn 2004) of ``system`` against ``baseline`` on BLEU:
    p-value, BLEUs, signature; by its Python API (the CLI's JSON output crashes on numpy floats)."""
    system, baseline, refs = _pick(system, indices), _pick(baseline, indices), _pick(refs, indices)
    if not refs:
        return {"n": 0, "p_value": None}
    with _sacrebleu_seed(seed):
        test = PairedTest([("baseline", baseline), ("system", system)],
                          {"BLEU": BLEU(tokenize=tokenize)}, references=[refs], test_type="bs",
                          n_samples=samples)
        signature, results = test()
    base, sys_result = results["BLEU"]
    return {"n": len(refs), "p_value": round(float(sys_result.p_value), 4),
            "bleu": round(float(sys_result.score), 2), "baseline_bleu": round(float(base.score), 2),
            "signature": str(signature["BLEU"])}
