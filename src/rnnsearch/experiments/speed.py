"""Training throughput (target tokens/s) of a model on real bucketed batches.

    python -m rnnsearch.experiments.speed --data data/tokenized --model search --vocab 8000

Builds the model at the given sizes, clips the vocabularies to ``--vocab`` words (rarer ids become
``<unk>``), and times forward + backward + Adam over ``--steps`` batches after ``--warmup``.
"""
from __future__ import annotations

import argparse
import random
import time

import torch
import torch.nn.functional as F

from rnnsearch.config.model import ModelConfig
from rnnsearch.data.vocab import PAD_ID, UNK_ID, Vocabulary
from rnnsearch.models import build_model
from rnnsearch.training.data import bucket_batches, collate, read_pairs


def measure(model_name: str, data_dir: str, vocab: int, hidden: int, batch_size: int,
            steps: int, warmup: int, max_len: int) -> float:
    src_vocab = Vocabulary.load(f"{data_dir}/vocab.src.txt")
    tgt_vocab = Vocabulary.load(f"{data_dir}/vocab.tgt.txt")
    pairs, _ = read_pairs(data_dir, "train", src_vocab, tgt_vocab, max_len)
    clip = lambda ids: [i if i < vocab else UNK_ID for i in ids]  # noqa: E731
    pairs = [(clip(s), clip(t)) for s, t in pairs]
    batches = bucket_batches([(len(s), len(t)) for s, t in pairs], batch_size, 0.1,
                             random.Random(0))[: warmup + steps]
    torch.manual_seed(0)
    config = ModelConfig(model=model_name, embedding_size=hidden, hidden_size=hidden,
                         attention_size=hidden, output_size=hidden,
                         bidirectional=model_name != "encdec")
    model = build_model(config, vocab, vocab).train()
    optimizer = torch.optim.Adam(model.parameters())
    tokens, seconds = 0, 0.0
    for i, indices in enumerate(batches):
        batch = collate([pairs[j] for j in indices])
        start = time.perf_counter()
        logits, _ = model(batch.src, batch.src_len, batch.tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i >= warmup:
            seconds += time.perf_counter() - start
            tokens += batch.target_tokens
    return tokens / seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default="data/tokenized")
    parser.add_argument("--model", nargs="+", default=["encdec", "search"])
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--max-len", type=int, default=50)
    args = parser.parse_args(argv)
    for name in args.model:
        rate = measure(name, args.data, args.vocab, args.hidden, args.batch, args.steps,
                       args.warmup, args.max_len)
        print(f"{name}: {rate:,.0f} target tokens/s (h{args.hidden}, vocab {args.vocab}, "
              f"batch {args.batch}, {torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
