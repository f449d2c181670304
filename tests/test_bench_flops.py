"""The FLOP counter against hand counts of three small models; the profiler's operator categories."""
from __future__ import annotations

import pytest

from rnnsearch.bench.flops import Shape, model_gemms, training_flops_per_token
from rnnsearch.bench.gemm import roofline_tokens_per_second
from rnnsearch.bench.report import training_rows
from rnnsearch.config.model import ModelConfig

SHAPE = Shape(batch=1, src_len=2, tgt_len=4, tgt_vocab=5)  # half a source token per target token


def test_encdec_hand_count():
    cfg = ModelConfig(model="encdec", embedding_size=2, hidden_size=3, bidirectional=False,
                      output_size=4)
    # GRU: 3 gates x H=3 -> 9 columns. Per target token (forward, 2 FLOPs per multiply-add):
    # encoder input 2*2*9*0.5=18, encoder recurrence 2*3*9*0.5=27, decoder word input 2*2*9=36,
    # fixed context input 2*3*9=54, decoder recurrence 2*3*9=54, deep output 2*(3+2+3)*4=64,
    # output layer 2*4*5=40: 293 forward, x3 for forward + backward.
    assert training_flops_per_token(cfg, SHAPE) == pytest.approx(3 * 293)


def test_search_hand_count():
    cfg = ModelConfig(model="search", embedding_size=2, hidden_size=3, attention_size=4,
                      output_size=4)
    # bidirectional encoder (annotations 6 wide) over 0.5 source tokens per target token:
    # input 2 dirs*0.5*2*2*9=36, recurrence 2*0.5*2*3*9=54; attention keys 2*6*4*0.5=24,
    # query 2*3*4=24, scores 2*4*2 positions=16, context 2*6*2 positions=24; decoder word input
    # 36, context input 2*6*9=108, recurrence 54, deep output 2*(3+2+6)*4=88, output 40.
    assert training_flops_per_token(cfg, SHAPE) == pytest.approx(3 * 504)


def test_conditional_gru_adds_its_transitions_recurrence_to_search():
    """Was: the conditional GRU (search_cond) was counted by name as no-attention wiring, its
    context input 3 wide instead of 6 and without its second recurrence: 504 - 54 forward."""
    search = ModelConfig(model="search", embedding_size=2, hidden_size=3, attention_size=4,
                         output_size=4)
    cond = ModelConfig(model="search_cond", embedding_size=2, hidden_size=3, attention_size=4,
                       output_size=4)
    # the transition reads the 6-wide context (as search's decoder input does) and adds its own
    # recurrence, 2*3*9=54 FLOPs per target token
    assert training_flops_per_token(cond, SHAPE) == pytest.approx(3 * (504 + 54))
    names = [g.name for g in model_gemms(cond, SHAPE)]
    assert names == [*[g.name for g in model_gemms(search, SHAPE)][:9],
                     "dec.transition_recurrent", *[g.name for g in model_gemms(search, SHAPE)][9:]]


def test_a_decoder_without_a_count_is_refused(monkeypatch):
    from rnnsearch.config import architectures
    from rnnsearch.errors import ConfigError

    monkeypatch.setitem(architectures.ARCHITECTURES, "reversed", architectures.Architecture(
        "rnnsearch.models.reversed:ReversedDecoder"))
    with pytest.raises(ConfigError, match="no FLOP count for its decoder"):
        training_flops_per_token(ModelConfig(model="reversed"), SHAPE)


def test_transformer_hand_count():
    cfg = ModelConfig(model="transformer", embedding_size=2, hidden_size=2, heads=1,
                      feedforward_size=3)
    # d=2, one layer each side. Encoder, over 0.5 source tokens per target token: projections
    # q,k,v,o 2*2*8*0.5=16, scores 2*2*(2 keys)*0.5=4, mix 4, feed-forward 2*2*3*0.5 + 2*3*2*0.5
    # = 12. Decoder: projections (self q,k,v,o; cross q,o) 2*2*12=48, the source's cross keys and
    # values 2*2*4*0.5=8, self scores 2*2*(4 positions)=16, self mix 16, cross scores
    # 2*2*(2 source words)=8, cross mix 8, feed-forward 24. Output layer 2*2*5=20: 184 forward.
    assert training_flops_per_token(cfg, SHAPE) == pytest.approx(3 * 184)


def test_luong_general_has_combine_and_no_deep_output():
    cfg = ModelConfig(model="luong", score="general", cell="lstm", bidirectional=False)
    names = {g.name for g in model_gemms(cfg, Shape())}
    assert {"att.keys", "att.combine"} <= names and "dec.deep_output" not in names


def test_roofline_is_flops_over_rate():
    cfg = ModelConfig(model="encdec", embedding_size=2, hidden_size=3, bidirectional=False,
                      output_size=4)
    rates = [(g, 1.0) for g in model_gemms(cfg, SHAPE)]          # (product, GFLOP/s)
    assert roofline_tokens_per_second(rates) == pytest.approx(1e9 / (3 * 293))


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
