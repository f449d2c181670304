"""How local-p's window centre ``p_t = S sigmoid(v_p^T tanh(W_p h_t))`` moves while it trains.

Replays a train cell's set-up (:func:`rnnsearch.training.run.build`) in a loop of
:func:`rnnsearch.training.harness.train_step`; every ``--every`` steps prints ``p_t / S`` of the
first, middle and last real word and the sigmoid's input (past about +-5 its gradient vanishes).
Writes nothing but ``--json``.

    python -m rnnsearch.experiments.local_p_trace --model luong_local_p --max-len 30 \
        --steps 1000 --every 50 [--params params.yaml] [--data data/tokenized] [--json trace.json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterator

import torch
from torch import Tensor

from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least, load_section
from rnnsearch.errors import ConfigError
from rnnsearch.config.train import TrainConfig
from rnnsearch.data.vocab import PAD_ID
from rnnsearch.reporting.tables import fmt, markdown_head, markdown_row
from rnnsearch.training.data import Batch
from rnnsearch.training.harness import train_step

COLUMNS = ("step", "loss", "first", "middle", "last", "input_mean", "input_sd")


def window_positions(inputs: list[Tensor], tgt_out: Tensor) -> dict[str, float]:
    """Where one batch's windows sit: ``inputs`` are the predictor's outputs (the sigmoid's input)
    as the decoder called it, each batch x steps x 1; ``tgt_out`` batch x T (padded)."""
    logits = torch.cat([x.squeeze(-1) for x in inputs], dim=1).float()   # batch x T
    real = tgt_out != PAD_ID                                             # batch x T
    last = real.sum(1) - 1                                               # batch
    fraction = torch.sigmoid(logits)                                     # p_t / S, batch x T
    rows = torch.arange(tgt_out.size(0))
    pick = {"first": torch.zeros_like(last), "middle": last // 2, "last": last}
    values = logits[real]
    return {**{name: float(fraction[rows, where].mean()) for name, where in pick.items()},
            "input_mean": float(values.mean()), "input_sd": float(values.std())}


def batches(loader: Any) -> Iterator[Batch]:
    """The loader's batches, epoch after epoch (each epoch in its own order, as in training)."""
    while True:
        yield from loader


def trace(config: TrainConfig, model_name: str, max_len: int, data_dir: Path,
          embed_dir: Path | None, lm_path: Path | None, steps: int, every: int
          ) -> list[dict[str, float]]:
    """Train ``model_name`` for ``steps`` steps as its train cell would; a row every ``every``."""
    from rnnsearch.training.module import TranslationTask
    from rnnsearch.training.run import build

    data, model, _ = build(config, model_name, max_len, data_dir, embed_dir, lm_path)
    predictor = getattr(model.decoder.attention, "position", None)
    if predictor is None:
        raise ConfigError(f"train.models.{model_name}: not a local-p model (attention: local_p)")
    task = TranslationTask(model, config.optim)
    inputs: list[Tensor] = []
    hook = predictor.register_forward_hook(lambda _m, _args, out: inputs.append(out.detach()))
    try:
        return _train_and_trace(task, data.train_dataloader(), inputs, steps, every)
    finally:
        hook.remove()


def _train_and_trace(task: Any, loader: Any, inputs: list[Tensor], steps: int, every: int
                     ) -> list[dict[str, float]]:
    """The train stage's steps (:func:`rnnsearch.training.harness.train_step`), a row of
    :func:`window_positions` every ``every`` steps, from the forward pass before its update."""
    optimizer = task.configure_optimizers()
    rows = []
    for step, batch in zip(range(steps + 1), batches(loader)):
        inputs.clear()
        loss = train_step(task, optimizer, batch)
        if step % every == 0:
            rows.append({"step": step, "loss": float(loss),
                         **window_positions(inputs, batch.tgt_out)})
            print(format_row(rows[-1]), flush=True)
    return rows


def format_row(row: dict[str, float]) -> str:
    """One Markdown table row (printed as training goes, under :func:`markdown_head`)."""
    cells = [str(int(row["step"]))] + [fmt(float(row[name]), 3) for name in COLUMNS[1:]]
    return markdown_row(cells)


@entry_point("local_p_trace")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.experiments.local_p_trace",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--model", default="luong_local_p", help="a local-p variant of train.models")
    parser.add_argument("--max-len", type=at_least(1), default=30)
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--embed-dir", type=Path, default=Path("data/embed"),
                        help="word vectors (read when train.init.embeddings)")
    parser.add_argument("--lm", type=Path, default=Path("data/lm/decoder_init.pt"),
                        help="the decoder's LM initialisation (read when train.init.lm)")
    parser.add_argument("--steps", type=at_least(1), default=1000)
    parser.add_argument("--every", type=at_least(1), default=50)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    print(markdown_head(COLUMNS))
    config = load_section(TrainConfig, "train", args.params)
    rows = trace(config, args.model, args.max_len, args.data, args.embed_dir, args.lm,
                 args.steps, args.every)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
