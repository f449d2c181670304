"""Callbacks: the best dev model's weights (``model.pt``, the LM's ``best.pt``); greedy dev BLEU."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Sequence

import pytorch_lightning as pl
import sacrebleu
import torch

from rnnsearch.data.vocab import Vocabulary
from rnnsearch.models.seq2seq import Seq2Seq, save_model
from rnnsearch.training.data import Pair, collate
from rnnsearch.training.module import BleuScorer


class BestModelSaver(pl.Callback):
    """After each validation, ``save(pl_module.model, path)`` when ``monitor`` strictly improved;
    the best score is checkpointed, so a resumed run never overwrites a better model."""

    def __init__(self, path: str | Path, monitor: str = "val/loss", mode: str = "min",
                 save: Callable[[Any, Path], None] = save_model) -> None:
        self.path, self.monitor, self.mode, self.save = Path(path), monitor, mode, save
        self.best: float | None = None
        self.best_step = -1
        self.best_metrics: dict[str, float] = {}

    def _improved(self, value: float) -> bool:
        if self.best is None or math.isnan(self.best):   # a NaN is beaten by any number
            return True
        return value < self.best if self.mode == "min" else value > self.best

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        value = float(trainer.callback_metrics[self.monitor])
        if not self._improved(value):
            return
        self.best, self.best_step = value, trainer.global_step
        self.best_metrics = {k: float(v) for k, v in trainer.callback_metrics.items()
                             if k.startswith("val/")}
        if trainer.is_global_zero:
            self.save(pl_module.model, self.path)

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_step": self.best_step, "best_metrics": self.best_metrics}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best = state_dict["best"]
        self.best_step = state_dict["best_step"]
        self.best_metrics = state_dict["best_metrics"]


def make_dev_bleu(pairs: Sequence[Pair], references: Sequence[str], tgt_vocab: Vocabulary,
                  sentences: int, batch_size: int = 64) -> BleuScorer | None:
    """Greedy BLEU (tokenised, sacrebleu ``tokenize="none"``) on the first ``sentences`` dev
    pairs; None when ``sentences`` is 0 or the decoding package is missing."""
    if sentences <= 0:
        return None
    try:
        from rnnsearch.decoding.greedy import greedy
        from rnnsearch.decoding.options import SearchOptions
    except ImportError:
        return None
    sample, refs = list(pairs[:sentences]), list(references[:sentences])
    options = SearchOptions(beam_size=1, nbest=1)   # greedy's, as translate.methods gives it

    def score(model: Seq2Seq) -> float:
        training = model.training
        model.eval()
        device = next(model.parameters()).device
        hypotheses = []
        with torch.no_grad():
            for start in range(0, len(sample), batch_size):
                batch = collate(sample[start: start + batch_size]).to(device)
                src_len = batch.src_len.to(device)       # greedy keeps its limits there
                for translation in greedy(model, batch.src, src_len, options):
                    hypotheses.append(" ".join(tgt_vocab.decode(translation.best.tokens)))
        model.train(training)
        # tokenised on purpose; force=True silences sacreBLEU's detokenize warning (same score)
        bleu = sacrebleu.BLEU(tokenize="none", force=True)
        return float(bleu.corpus_score(hypotheses, [refs]).score)

    return score
