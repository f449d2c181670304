"""``train.trainer.cuda_graphs``: RNNsearch's decoder loop replayed as CUDA graphs.

On the CPU: the padding that gives graphs repeating shapes changes neither the loss nor any
gradient, the loop as a module of tensors computes what the decoder computes, the runner falls
back to the eager loop off the GPU, and a bad setting fails naming its key. The tests marked
``cuda`` (skipped without a GPU; ``make gpu-check`` runs them) check the graphs
themselves: the same loss and gradients as the eager loop, and a short real training run.
"""
from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from conftest import REPO
from rnnsearch.config.base import load_section
from rnnsearch.errors import ConfigError
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig, TrainConfig, TrainerConfig
from rnnsearch.data.vocab import PAD_ID
from rnnsearch.models.seq2seq import build_model
from rnnsearch.training import run as run_module
from rnnsearch.training.data import collate, pad_to_shape, round_up
from rnnsearch.training.graphs import (GraphedLoops, LoopModule, enable_cuda_graphs,
                                       relative_difference)
from rnnsearch.training.module import TranslationTask
from rnnsearch.training.run import train_cell, use_cuda_graphs
from test_training import config as train_config
from test_training import corpus  # noqa: F401  (the fixture of a tiny tokenised corpus)

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
VOCAB = 40


def small_model(model: str = "search", **changes) -> torch.nn.Module:
    torch.manual_seed(0)
    config = ModelConfig(model=model, embedding_size=12, hidden_size=16, attention_size=10,
                         output_size=8, maxout=True, dropout=0.0, **changes)
    return build_model(config, VOCAB, VOCAB)


# the models with a step-by-step attention loop, as (model, changes) for small_model
LOOPED = {"search": ("search", {}), "search-lstm": ("search", {"cell": "lstm"}),
          "luong-local_p": ("luong", {"attention": "local_p", "score": "general"}),
          "luong-lstm": ("luong", {"cell": "lstm", "score": "general"})}


def random_pairs(count: int, seed: int = 0, longest: int = 12) -> list[tuple[list[int], list[int]]]:
    """``count`` pairs of random words, each side 1 to ``longest`` words long."""
    rng = random.Random(seed)
    return [([rng.randrange(4, VOCAB) for _ in range(rng.randint(1, longest))],
             [rng.randrange(4, VOCAB) for _ in range(rng.randint(1, longest))])
            for _ in range(count)]


def loss_and_grads(model: torch.nn.Module, batch) -> tuple[float, dict[str, torch.Tensor]]:
    """The summed token cross-entropy of ``batch`` and every parameter's gradient."""
    model.zero_grad(set_to_none=True)
    task = TranslationTask(model, OptimConfig())
    total, _ = task.token_losses(batch)
    total.backward()
    return total.item(), {n: p.grad.clone() for n, p in model.named_parameters()
                          if p.grad is not None}


def test_round_up_and_pad_to_shape():
    assert [round_up(n, 8) for n in (1, 8, 9, 16, 17)] == [8, 8, 16, 16, 24]
    batch = collate(random_pairs(5))
    padded = pad_to_shape(batch, rows=8, multiple=8)
    assert padded.src.shape == (8, round_up(batch.src.size(1), 8))
    assert padded.tgt_in.shape == padded.tgt_out.shape == (8, round_up(batch.tgt_in.size(1), 8))
    assert padded.src_len.tolist() == batch.src_len.tolist() + [0, 0, 0]
    assert padded.target_tokens == batch.target_tokens == int((batch.tgt_out != PAD_ID).sum())
    assert (padded.tgt_out[5:] == PAD_ID).all() and (padded.src[5:] == PAD_ID).all()
    with pytest.raises(ValueError, match="does not fit the 4 rows"):
        pad_to_shape(batch, rows=4, multiple=8)


@pytest.mark.parametrize("variant", LOOPED)
def test_padding_to_graph_shapes_changes_no_loss_and_no_gradient(variant):
    """What the graphs train on (padded rows and lengths) gives the eager loop's numbers."""
    name, changes = LOOPED[variant]
    model = small_model(name, **changes).train()       # dropout 0: the two passes compare
    batch = collate(random_pairs(6))
    loss, grads = loss_and_grads(model, batch)
    padded_loss, padded_grads = loss_and_grads(model, pad_to_shape(batch, rows=9, multiple=8))
    assert padded_loss == pytest.approx(loss, rel=1e-5)
    assert padded_grads.keys() == grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(padded_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("variant", LOOPED)
def test_loop_module_computes_the_decoders_loop(variant):
    name, changes = LOOPED[variant]
    model = small_model(name, **changes).train()
    batch = collate(random_pairs(4))
    memory = model.encode(batch.src, batch.src_len)
    state = model.init_state(memory)
    _, word_gates = model.decoder._embed(batch.tgt_in)
    expected = model.decoder.attention_loop(word_gates, memory, state)
    layout = tuple(f for f in ("cell", "feed") if getattr(state, f) is not None)
    module = LoopModule(model.decoder, layout)
    got = module(word_gates, memory.keys, memory.values, memory.mask, memory.lengths,
                 state.hidden, state.step, *(getattr(state, f) for f in layout))
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
    # every decoder parameter is on the capture's surface: none can miss its gradient
    assert {n for n, _ in module.named_parameters()} == {
        f"decoder.{n}" for n, _ in model.decoder.named_parameters()}


def test_runner_falls_back_to_the_eager_loop_off_the_gpu():
    model = small_model().train()
    batch = collate(random_pairs(3))
    eager, _ = model(batch.src, batch.src_len, batch.tgt_in)
    runner = enable_cuda_graphs(model)
    assert model.decoder.loop_runner is runner and isinstance(runner, GraphedLoops)
    through_runner, _ = model(batch.src, batch.src_len, batch.tgt_in)
    torch.testing.assert_close(through_runner, eager, rtol=0, atol=0)
    assert runner.captured == 0


def fake_capture(monkeypatch, capture=None) -> None:
    """Stand-ins for the CUDA calls of a capture, on the CPU: ``make_graphed_callables`` is
    ``capture(module, sample_args, **options)``, by default the module itself (it computes what
    the module computes), and the runner takes every step for GPU training."""
    monkeypatch.setattr(torch.cuda, "make_graphed_callables",
                        capture or (lambda module, sample_args, **options: module))
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: "pool")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(GraphedLoops, "is_gpu_training", lambda self, word_gates: True)


def eager_then_graphed(monkeypatch, capture):
    """``capture`` standing in for CUDA's, a small model and batch with their eager loss and
    gradients, then the model's CUDA-graph runner: (model, batch, loss, grads, runner)."""
    fake_capture(monkeypatch, capture)
    model = small_model().train()
    batch = pad_to_shape(collate(random_pairs(5)), rows=8, multiple=8)
    loss, grads = loss_and_grads(model, batch)
    return model, batch, loss, grads, enable_cuda_graphs(model)


@pytest.mark.parametrize("variant", LOOPED)
def test_runner_captures_once_per_shape_and_replays_the_loop(monkeypatch, variant):
    """The runner's plumbing on the CPU, the capture standing in for itself (what a capture
    returns computes what the module computes): one capture per padded shape, reused after,
    the sample arguments shaped like the real ones, loss and gradients those of the eager loop."""
    samples = []

    def capture(module, sample_args, **options):
        samples.append([tuple(t.shape) for t in sample_args])
        assert options["allow_unused_input"] and all(not t.is_inference() for t in sample_args)
        return module

    fake_capture(monkeypatch, capture)
    kind, changes = LOOPED[variant]
    model = small_model(kind, **changes).train()
    runner = enable_cuda_graphs(model)
    pairs = {8: random_pairs(5, 1, longest=6), 16: random_pairs(5, 2, longest=14)}
    for padded in (8, 16, 8):
        batch = pad_to_shape(collate(pairs[padded]), rows=8, multiple=8)
        model.decoder.loop_runner = None
        loss, grads = loss_and_grads(model, batch)
        model.decoder.loop_runner = runner
        replayed_loss, replayed_grads = loss_and_grads(model, batch)
        assert replayed_loss == loss and replayed_grads.keys() == grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(replayed_grads[name], grad, rtol=0, atol=0, msg=name)
    optional = (model.config.cell == "lstm") + (kind == "luong")     # LSTM cell, fed state
    assert runner.captured == len(samples) == 2
    assert [len(s) for s in samples] == [7 + optional] * 2 and samples[0][0][:2] == (8, 8)


def test_a_failed_capture_leaves_the_run_on_the_eager_loop(monkeypatch, caplog):
    """A capture CUDA refuses (an operation it cannot record, out of memory) costs the run its
    speed-up, not its progress: a warning, the eager loop from then on, the reason recorded."""
    def refuse(*args, **kwargs):
        raise RuntimeError("operation not permitted when stream is capturing")

    model, batch, loss, _, runner = eager_then_graphed(monkeypatch, refuse)
    with caplog.at_level("WARNING", logger="rnnsearch"):
        assert loss_and_grads(model, batch)[0] == loss
        assert loss_and_grads(model, batch)[0] == loss
    assert "training goes on without CUDA graphs" in caplog.text
    assert caplog.text.count("capturing the decoder loop") == 1       # tried once, not per step
    assert runner.stats() == {"cuda_graph_shapes": 0, "cuda_graph_capture_seconds": 0.0,
                              "cuda_graph_error": "operation not permitted when stream is "
                                                  "capturing"}


def test_a_failed_capture_gives_back_the_graphs_already_captured(monkeypatch):
    """Captures run with autograd's stale-stream override on (restored after), and when a
    later shape's capture fails, the graphs captured before it and their pool are dropped:
    the eager loop from then on needs that memory (at the paper's width, six shapes of graphs
    filled a 141 GB GPU)."""
    override = torch._C._override_stale_capture_stream
    seen = []

    def capture(module, sample_args, **options):
        seen.append(override())
        if len(seen) == 2:
            raise RuntimeError("CUDA out of memory")
        return module

    model, _, _, _, runner = eager_then_graphed(monkeypatch, capture)
    emptied = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    for longest in (6, 14):
        batch = pad_to_shape(collate(random_pairs(5, longest, longest=longest)), rows=8, multiple=8)
        loss_and_grads(model, batch)
        assert override() is False
    assert seen == [True, True] and runner.error == "CUDA out of memory"
    assert runner.graphs == {} and runner.pool is None and emptied == [True]


def scaled_outputs(module, sample_args, **options):
    """A graph that computes something else: the loop's outputs, 10% too large."""
    return lambda *args: tuple(out * 1.1 for out in module(*args))


def stale_inputs(module, sample_args, **options):
    """A graph that replays its capture's inputs instead of copying in the new ones."""
    frozen = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in sample_args)
    return lambda *args: module(*frozen)


def no_input_gradient(module, sample_args, **options):
    """A graph whose outputs are right but whose backward loses the gradient of its first
    input (the word embeddings' share of the decoder input)."""
    def replay(word_gates, *rest):
        cut = word_gates.detach() + 0.0 * (word_gates - word_gates.detach())
        return module(cut, *rest)
    return replay


@pytest.mark.parametrize("wrong", [scaled_outputs, stale_inputs, no_input_gradient],
                         ids=["scaled", "stale", "no-input-gradient"])
def test_a_graph_that_disagrees_with_the_eager_loop_is_not_used(monkeypatch, caplog, wrong):
    """The run's first capture is checked against the eager loop on inputs it did not see:
    a graph that computes something else (wrong outputs, inputs not copied in) would train a
    wrong model silently; instead it is a warning, the eager loop, and the reason recorded."""
    model, batch, loss, grads, runner = eager_then_graphed(monkeypatch, wrong)
    with caplog.at_level("WARNING", logger="rnnsearch"):
        got, got_grads = loss_and_grads(model, batch)
    assert got == loss and all(torch.equal(got_grads[n], g) for n, g in grads.items())
    assert runner.captured == 0 and "training goes on without CUDA graphs" in caplog.text
    assert runner.stats()["cuda_graph_error"].startswith(
        "the captured loop disagrees with the eager loop (largest relative difference")


def test_a_graph_that_agrees_is_used_and_its_check_recorded(monkeypatch):
    fake_capture(monkeypatch)
    model = small_model().train()
    runner = enable_cuda_graphs(model)
    loss_and_grads(model, pad_to_shape(collate(random_pairs(5)), rows=8, multiple=8))
    assert runner.captured == 1 and "cuda_graph_error" not in runner.stats()
    assert runner.stats()["cuda_graph_check_difference"] == 0.0


def test_relative_difference():
    b = torch.tensor([2.0, -4.0])
    assert relative_difference(b + torch.tensor([0.0, 0.4]), b) == pytest.approx(0.1)
    assert relative_difference(None, None) == relative_difference(torch.zeros(2), None) == 0.0
    assert relative_difference(None, b) == relative_difference(b, b[:1]) == float("inf")


def test_train_cell_with_graphs_trains_like_without(monkeypatch, tmp_path, corpus):
    """The train stage's own ``train_cell`` with ``cuda_graphs`` through Lightning (padded
    batches, the runner in training, the eager loop in validation, checkpoints), the capture
    standing in for itself on the CPU: the same dev loss as without graphs, up to the float
    rounding of the padded shapes, and the captures in the metrics."""
    pytest.importorskip("mlflow")        # train_cell logs to MLflow (absent in a minimal install)
    monkeypatch.setattr(torch.cuda, "make_graphed_callables", lambda module, *a, **k: module)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: "pool")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(GraphedLoops, "is_gpu_training", lambda self, word_gates: True)
    monkeypatch.setattr(run_module, "require", lambda *args: None)    # "no CUDA GPU" check
    plain = train_cell(train_config(), "search", 12, corpus, tmp_path / "plain")
    graphed = train_cell(train_config(trainer={"accelerator": "auto", "cuda_graphs": True}),
                         "search", 12, corpus, tmp_path / "graphed")
    assert graphed["steps"] == plain["steps"] == 6
    assert graphed["val_loss"] == pytest.approx(plain["val_loss"], rel=1e-4)
    assert 1 <= graphed["cuda_graph_shapes"] <= 6 and "cuda_graph_error" not in graphed
    assert "cuda_graph_shapes" not in plain
    assert (tmp_path / "graphed/model.pt").is_file()


def test_models_without_the_loop_and_cpu_settings_fail_naming_the_key(monkeypatch):
    for name, changes in (("encdec", {}), ("luong", {"input_feeding": False})):
        with pytest.raises(ConfigError, match=r"train\.trainer\.cuda_graphs: model .* has no "
                                              r"step-by-step decoder loop"):
            enable_cuda_graphs(small_model(name, **changes))
    with pytest.raises(ConfigError, match=r"train\.trainer\.cuda_graphs: needs a GPU"):
        TrainerConfig(accelerator="cpu", cuda_graphs=True).check("train.trainer")
    with pytest.raises(ConfigError, match=r"graph_length_multiple: must be > 0"):
        TrainerConfig(graph_length_multiple=0).check("train.trainer")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = load_section(TrainConfig, "train", REPO / "params.yaml")
    config = dataclasses.replace(config, trainer=TrainerConfig(accelerator="gpu", cuda_graphs=True))
    with pytest.raises(ConfigError, match=r"train\.trainer\.cuda_graphs: true, but torch sees no"):
        use_cuda_graphs(config, small_model())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert use_cuda_graphs(config, small_model("encdec")) is None    # a mixed grid trains on


@needs_gpu
@pytest.mark.cuda
@pytest.mark.parametrize("variant", ["search", "luong-local_p"])
@pytest.mark.parametrize("precision", [torch.float32, torch.bfloat16])
def test_graphed_loop_gives_the_eager_loss_and_gradients(precision, variant):
    """Replays of two shapes (lengths padded to 8 and to 16), each twice (the second replay
    reuses the capture), against the eager loop on the same padded batches."""
    kind, changes = LOOPED[variant]
    model = small_model(kind, **changes).cuda().train()
    runner = GraphedLoops(model.decoder)
    pairs = {8: random_pairs(6, 1, longest=6), 16: random_pairs(6, 2, longest=14)}
    for padded in (8, 16, 8, 16):
        batch = pad_to_shape(collate(pairs[padded]), rows=8, multiple=8).to("cuda")
        assert batch.src.size(1) == batch.tgt_in.size(1) == padded
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == torch.bfloat16):
            model.decoder.loop_runner = None
            loss, grads = loss_and_grads(model, batch)
            model.decoder.loop_runner = runner
            graphed_loss, graphed_grads = loss_and_grads(model, batch)
        tolerance = 1e-4 if precision == torch.float32 else 2e-2
        assert graphed_loss == pytest.approx(loss, rel=tolerance)
        for name, grad in grads.items():
            torch.testing.assert_close(graphed_grads[name], grad, rtol=tolerance, atol=tolerance,
                                       msg=name)
    assert runner.captured == 2


@needs_gpu
@pytest.mark.cuda
def test_training_steps_with_graphs_follow_the_eager_ones():
    """Twenty Adam steps over varied batches: the losses of the graphed run follow the eager
    run's (the same data and initial weights; float differences only)."""
    losses = {}
    for graphs in (False, True):
        model = small_model().cuda().train()
        if graphs:
            runner = enable_cuda_graphs(model)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        task = TranslationTask(model, OptimConfig())
        losses[graphs] = []
        for step in range(20):
            batch = pad_to_shape(collate(random_pairs(6, step % 5)), rows=8, multiple=8).to("cuda")
            optimizer.zero_grad(set_to_none=True)
            total, tokens = task.token_losses(batch)
            (total / tokens).backward()
            optimizer.step()
            losses[graphs].append((total / tokens).item())
    assert runner.captured >= 1
    assert losses[True] == pytest.approx(losses[False], rel=1e-3)
    assert losses[True][-1] < losses[True][0]
