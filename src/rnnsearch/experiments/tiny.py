"""A tiny trained model with its vocabularies and test sentences, no corpus needed.

    python -m rnnsearch.experiments.tiny --out /tmp/tiny [--steps 300]

A small RNNsearch trained on the synthetic reversal task, written as the train and tokenize
stages write (``model.pt``, ``vocab.{src,tgt}.txt`` of words ``s0 .. s19``, ``test.src``) for
``make gpu-check``: a trained model's peaked distributions make near-ties as rare as in real use."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig
from rnnsearch.data.textio import write_lines
from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.experiments.synthetic import SymbolTask, train
from rnnsearch.models.seq2seq import build_model, save_model

SYMBOLS, MIN_LEN, MAX_LEN = 20, 5, 40
TASK = SymbolTask("reverse", SYMBOLS, MIN_LEN, MAX_LEN)


def symbol_vocabulary(symbols: int = SYMBOLS) -> Vocabulary:
    """The specials, then one word per symbol: ``s0`` has id :data:`FIRST_SYMBOL`."""
    words = SPECIALS + tuple(f"s{i}" for i in range(symbols))
    return Vocabulary(words, (0,) * len(words))


def make_tiny(out: Path, steps: int = 300, sentences: int = 300, seed: int = 1234) -> dict:
    """Train the tiny model and write ``model.pt``, both vocabularies and ``test.src`` into
    ``out``; returns what was made (steps, seconds, sentences)."""
    torch.manual_seed(seed)
    vocab = symbol_vocabulary()
    config = ModelConfig(model="search", embedding_size=32, hidden_size=64, attention_size=64,
                         output_size=64)
    model = build_model(config, len(vocab), len(vocab))
    done, seconds = train(model, OptimConfig(lr=0.003), TASK, 64, steps, 10.0,
                          torch.Generator().manual_seed(seed))
    save_model(model.eval(), out / "model.pt")
    vocab.save(out / "vocab.src.txt")
    vocab.save(out / "vocab.tgt.txt")
    test = TASK.sample(torch.Generator().manual_seed(seed + 1), sentences)
    lines = [" ".join(vocab.decode(row[:length].tolist()))
             for row, length in zip(test.src, test.src_len.tolist())]
    write_lines(out / "test.src", lines)
    return {"steps": done, "seconds": round(seconds, 1), "sentences": len(lines)}


@entry_point("tiny")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.experiments.tiny",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--steps", type=at_least(0), default=300, help="training steps (batch 64)")
    parser.add_argument("--sentences", type=at_least(1), default=300, help="test sentences")
    parser.add_argument("--seed", type=at_least(0), default=1234)
    args = parser.parse_args(argv)
    made = make_tiny(args.out, args.steps, args.sentences, args.seed)
    print(f"tiny: {made['steps']} steps in {made['seconds']} s, {made['sentences']} test "
          f"sentences in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
