"""FLOPs counted by torch while a step runs (rnnsearch.bench.ops), the roofline they imply and
the report's use of it."""
from __future__ import annotations

import pytest
import torch

from rnnsearch.bench.measure import BenchModel, new_training
from rnnsearch.bench.ops import flops
from rnnsearch.bench.report import part_table
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import TrainConfig
from rnnsearch.data.vocab import SPECIALS
from rnnsearch.training.data import collate
from rnnsearch.training.harness import train_step


def test_a_layers_products_are_counted_forward_and_backward():
    """A linear layer: one [5 x 8] @ [8 x 16] product forward; backward two more (the input's
    and the weight's gradients), so three times its FLOPs."""
    layer, x = torch.nn.Linear(8, 16), torch.randn(5, 8, requires_grad=True)
    assert flops(lambda: layer(x)) == 2 * 5 * 8 * 16
    assert flops(lambda: layer(x).sum().backward()) == 3 * 2 * 5 * 8 * 16
    a, b, y = torch.randn(2, 4, 5), torch.randn(2, 5, 6), torch.randn(5, 8)
    with torch.inference_mode():       # decoding's: linear and matmul reach torch undecomposed
        assert flops(lambda: (layer(y), torch.matmul(a, b))) == 2 * 5 * 8 * 16 + 2 * 2 * 4 * 5 * 6


@pytest.mark.parametrize("model", ["encdec", "search", "search_cond", "luong", "transformer"])
def test_every_architectures_training_step_is_counted_with_no_formula_of_its_own(model):
    """The train stage's step (forward, backward, Adam) of each grid model: torch counts its
    FLOPs, at least the output layer's product forward and backward."""
    vocab = len(SPECIALS) + 6
    config = ModelConfig(model=model, embedding_size=8, hidden_size=8, attention_size=8,
                         output_size=8, heads=2, feedforward_size=16, encoder_layers=1,
                         decoder_layers=1)
    train = TrainConfig(base_model=config, models={model: {}})
    bench_model = BenchModel("x", train, vocab, model)
    batch = collate([([4, 5, 6, 7], [6, 4, 5]), ([5, 8, 9], [7, 8, 9, 4])])
    counted = flops(lambda: train_step(*new_training(bench_model, "cpu"), batch))
    assert counted >= 3 * 2 * batch.target_tokens * 8 * vocab


def test_a_share_above_the_roofline_is_refused_not_shown():
    """The first GPU check printed 105-389% "of the model's GEMM roofline": a share above 100%
    is a wrong FLOP count or rate, so the row says it is refused instead of showing it."""
    rows = [{"model": "paper", "batch": 80, "precision": "32-true", "tokens_per_s": tokens,
             "ms_per_step": 1.0, "gflops": 1.0, "roofline_share": tokens / 1000,
             "peak_memory_mib": 1.0} for tokens in (3890.0, 800.0)]
    above, below = part_table({"training": rows}, "training", "Training")[1].splitlines()[-2:]
    assert "refused: 389% is above the roofline" in above and "389%" not in below
    assert "| 80% |" in below
