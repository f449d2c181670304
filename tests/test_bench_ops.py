"""FLOPs and matrix products counted by torch while a step runs (rnnsearch.bench.ops), the
roofline they imply, and the report's use of it; the profiler's operator categories."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from rnnsearch.bench.ops import Product, count, roofline_seconds
from rnnsearch.bench.report import training_rows
from rnnsearch.bench.training import new_training
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig
from rnnsearch.data.vocab import SPECIALS
from rnnsearch.training.data import collate
from rnnsearch.training.harness import train_step


def test_a_layers_product_is_counted_forward_and_backward():
    """A linear layer: one [5 x 8] @ [8 x 16] product forward; backward two more (the input's
    and the weight's gradients), so three times its FLOPs, all of them products."""
    layer, x = torch.nn.Linear(8, 16), torch.randn(5, 8, requires_grad=True)
    forward = count(lambda: layer(x))
    assert forward.products == Counter({Product(1, 5, 8, 16): 1})
    assert forward.flops == forward.product_flops == 2 * 5 * 8 * 16
    both = count(lambda: layer(x).sum().backward())
    assert both.flops == both.product_flops == 3 * 2 * 5 * 8 * 16
    assert sum(both.products.values()) == 3


def test_a_batched_product_is_one_shape_of_its_batch():
    a, b = torch.randn(3, 4, 5), torch.randn(3, 5, 6)
    assert count(lambda: torch.bmm(a, b)).products == Counter({Product(3, 4, 5, 6): 1})


@pytest.mark.parametrize("model", ["encdec", "search", "search_cond", "luong", "transformer"])
def test_every_architectures_training_step_is_counted_with_no_formula_of_its_own(model):
    """The train stage's step (forward, backward, Adam) of each grid model: torch counts its
    FLOPs, and its matrix products carry them (the Transformer's fused attention is counted by
    torch but runs no product the recorder sees)."""
    vocab = len(SPECIALS) + 6
    config = ModelConfig(model=model, embedding_size=8, hidden_size=8, attention_size=8,
                         output_size=8, heads=2, feedforward_size=16, encoder_layers=1,
                         decoder_layers=1)
    batch = collate([([4, 5, 6, 7], [6, 4, 5]), ([5, 8, 9], [7, 8, 9, 4])])
    task, optimizer = new_training(config, vocab, OptimConfig())
    counted = count(lambda: train_step(task, optimizer, batch))
    assert counted.flops > 0 and 0.5 * counted.flops <= counted.product_flops <= counted.flops
    assert len(counted.products) > 3


def test_the_roofline_is_the_products_work_at_their_rates():
    products = Counter({Product(1, 64, 64, 64): 10, Product(2, 8, 8, 8): 3})
    work = 10 * 2 * 64**3 + 3 * 2 * 2 * 8**3
    assert roofline_seconds(products, lambda p: 2.0) == pytest.approx(work / 2e9)
    fast_big = {Product(1, 64, 64, 64): 4.0, Product(2, 8, 8, 8): 1.0}
    assert roofline_seconds(products, fast_big.__getitem__) == pytest.approx(
        10 * 2 * 64**3 / 4e9 + 3 * 2 * 2 * 8**3 / 1e9)
    # only the larger shape measured: the rest at its rate
    assert roofline_seconds(products, fast_big.__getitem__, most=1) == pytest.approx(work / 4e9)


def test_a_training_row_above_its_roofline_is_refused_on_any_device():
    """The first GPU check printed 105-389% "of the model's GEMM roofline": a share above 100%
    is a wrong FLOP count or peak, so the row says it is refused instead of showing it."""
    results = {"card": {"tflops_fp32": 10.0, "tflops_bf16": 20.0},
               "arithmetic": [{"model": "paper", "batch": 80, "mflop_per_token": 1.0,
                               "roofline_tokens_per_s_fp32": 1000.0}],
               "training": [{"model": "paper", "batch": 80, "precision": "32-true",
                             "tokens_per_s": tokens, "ms_per_step": 1.0, "peak_memory_mib": 1.0}
                            for tokens in (3890.0, 800.0)]}
    above, below = training_rows(results)
    assert "refused: 389% is above the roofline" in above and "389%" not in " ".join(
        map(str, below))
    assert "80%" in below


def test_profile_categories_by_operator_name():
    from rnnsearch.bench.profile import category

    assert category("aten::addmm") == "GEMM (mm, addmm, bmm)"
    assert category("aten::_log_softmax_backward_data") == "log-softmax + NLL (fwd, bwd)"
    assert category("aten::topk") == "top-k"
    assert category("aten::lerp_").startswith("other elementwise")
    assert category("aten::as_strided") == "other"


def test_products_are_recorded_in_inference_mode_too():
    """Was: decoding (inference_mode) reached the recorder as undecomposed ``linear`` and
    ``matmul`` calls, so it saw no product while torch counted 3.5 GFLOP, and the roofline
    divided by zero."""
    layer, x = torch.nn.Linear(8, 16), torch.randn(3, 5, 8)
    a, b = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 5, 6)
    with torch.inference_mode():
        counted = count(lambda: (layer(x), torch.matmul(a, b)))
    assert counted.products == Counter({Product(1, 15, 8, 16): 1, Product(6, 4, 5, 6): 1})
    assert counted.product_flops == counted.flops
