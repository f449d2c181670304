"""Greedy and beam search: the notes' worked example, k=1 == greedy, batch invariance,
length normalisation, n-best, length limits."""
from __future__ import annotations

import math

import pytest
import torch

from rnnsearch.data.vocab import BOS_ID, EOS_ID
from rnnsearch.decoding.beam import beam_search
from rnnsearch.decoding.corpus import pad_sources, translate_corpus
from rnnsearch.decoding.greedy import greedy
from rnnsearch.decoding.options import SearchOptions, max_output_lengths, normalise, reachable
from rnnsearch.decoding.steps import next_log_probs
from test_decoding_toy import ScriptedModel, TinyAttentionModel

WORDS = "he I hit struck was got me a with on one pie tart the his".split()

# Spec section 5: k = 2; "he" (-0.7), "I" (-0.9); "I was" (-1.6), "he hit" (-1.7);
# "he hit me" (-2.5), "he hit a" (-2.8); best finished: "he hit me with a pie" (-4.3).
WORKED = {
    (): {"he": -0.7, "I": -0.9},
    ("he",): {"hit": -1.0, "struck": -2.2},
    ("I",): {"was": -0.7, "got": -0.9},
    ("he", "hit"): {"me": -0.8, "a": -1.1},
    ("I", "was"): {"hit": -1.3, "struck": -1.4},
    ("he", "hit", "me"): {"with": -0.6, "on": -1.0},
    ("he", "hit", "a"): {"pie": -0.9, "tart": -1.0},
    ("he", "hit", "me", "with"): {"a": -0.4, "one": -1.2},
    ("he", "hit", "me", "on"): {"the": -0.6, "his": -1.5},
    ("he", "hit", "me", "with", "a"): {"pie": -0.6, "tart": -0.8},
    ("he", "hit", "me", "with", "one"): {"pie": -0.5},
    ("he", "hit", "me", "with", "a", "pie"): {"</s>": -0.2},
    ("he", "hit", "me", "with", "a", "tart"): {"</s>": -0.3},
}


def _one(model, options, source=(4, 5, 6)):
    src, src_len = pad_sources([list(source)])
    return beam_search(model, src, src_len, options)[0]


class Recorder(ScriptedModel):
    """Records the prefixes of the live beam at every step."""

    def __init__(self, *args):
        super().__init__(*args)
        self.beams: list[list[str]] = []

    def step(self, prev, state, memory):
        logits, new_state, attn = super().step(prev, state, memory)
        self.beams.append([self.text(tuple(p.tolist())) for p in new_state.prefix])
        return logits, new_state, attn


def test_worked_example_beam_two():
    model = Recorder(WORDS, WORKED)
    translation = _one(model, SearchOptions(beam_size=2, nbest=2))
    best = translation.best
    assert model.text(best.tokens) == "he hit me with a pie"
    assert best.score == pytest.approx(-4.3, abs=1e-4)
    assert best.tokens[-1] == EOS_ID
    # the live beams the notes list, step by step
    assert set(model.beams[1]) == {"he", "I"}
    assert set(model.beams[2]) == {"I was", "he hit"}
    assert set(model.beams[3]) == {"he hit me", "he hit a"}
    assert [model.text(h.tokens) for h in translation.hypotheses] == [
        "he hit me with a pie", "he hit me with a tart"]


def test_greedy_cannot_take_back_a():
    """The notes' greedy failure: after "he hit", "a" is locally best (-0.4 against -1.3 for
    "me"), but nothing good follows it; beam search (k=2) keeps "he hit me" and recovers.
    (In the worked example's own table "me" is locally best, so greedy would not fail there.)"""
    table = {(): {"he": -0.4, "I": -1.5},
             ("he",): {"hit": -0.2},
             ("he", "hit"): {"a": -0.4, "me": -1.3},
             ("he", "hit", "a"): {"</s>": -1.5, "pie": -1.6},
             ("he", "hit", "me"): {"with": -0.1},
             ("he", "hit", "me", "with"): {"a": -0.1},
             ("he", "hit", "me", "with", "a"): {"pie": -0.1},
             ("he", "hit", "me", "with", "a", "pie"): {"</s>": -0.1}}
    model = ScriptedModel(WORDS, table)
    options = SearchOptions(beam_size=2, length_penalty="none")
    src, src_len = pad_sources([[4, 5, 6]])
    greedy_out = greedy(model, src, src_len, options)[0].best
    beam_out = beam_search(model, src, src_len, options)[0].best
    assert model.text(greedy_out.tokens) == "he hit a"
    assert model.text(beam_out.tokens) == "he hit me with a pie"
    assert beam_out.score > greedy_out.score


def test_finished_hypotheses_compared_length_normalised():
    """A short hypothesis with the better sum loses to a longer one with the better mean."""
    table = {(): {"he": -0.5, "I": -1.6},
             ("he",): {"</s>": -1.6, "hit": -0.3},
             ("he", "hit"): {"me": -0.1},
             ("he", "hit", "me"): {"</s>": -1.8}}
    model = ScriptedModel(WORDS, table)
    raw = _one(model, SearchOptions(beam_size=2, length_penalty="none")).best
    mean = _one(model, SearchOptions(beam_size=2, length_penalty="mean")).best
    gnmt = _one(model, SearchOptions(beam_size=2, length_penalty="gnmt", alpha=2.0)).best
    assert model.text(raw.tokens) == "he"                      # -2.1 beats -2.7
    assert model.text(mean.tokens) == "he hit me"              # -2.7/4 beats -2.1/2
    assert model.text(gnmt.tokens) == "he hit me"
    assert mean.norm_score == pytest.approx(mean.score / 4)


def _tiny_sources(count: int = 9, seed: int = 1) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    lengths = [1, 2, 3, 5, 8, 13, 4, 7, 11, 6, 2, 9][:count]
    return [torch.randint(4, 30, (n,), generator=generator).tolist() for n in lengths]


@pytest.mark.parametrize("attention", [True, False])
def test_beam_width_one_equals_greedy(attention):
    model = TinyAttentionModel(attention=attention)
    src, src_len = pad_sources(_tiny_sources())
    options = SearchOptions(beam_size=1, nbest=1, max_len_a=1.0, max_len_b=5)
    for g, b in zip(greedy(model, src, src_len, options), beam_search(model, src, src_len, options)):
        assert g.best.tokens == b.best.tokens
        assert g.best.score == pytest.approx(b.best.score, abs=1e-9)
        if attention:
            assert g.best.attention.shape == b.best.attention.shape
            assert torch.allclose(torch.tensor(g.best.attention), torch.tensor(b.best.attention))


@pytest.mark.parametrize("method, stop", [("greedy", "first_k"), ("beam", "first_k"),
                                          ("beam", "bound")])
def test_output_independent_of_batch_size_and_companions(method, stop):
    model = TinyAttentionModel()
    sources = _tiny_sources()
    options = SearchOptions(beam_size=4, nbest=3, max_len_a=1.0, max_len_b=4, stop=stop)
    alone = [translate_corpus(model, [s], method, options, 1, progress=False).translations[0]
             for s in sources]
    for batch_size in (2, 4, len(sources)):
        shuffled = sources[::-1] + _tiny_sources(5, seed=7)          # other companions
        together = translate_corpus(model, shuffled, method, options, batch_size,
                                    progress=False).translations[: len(sources)][::-1]
        for one, many in zip(alone, together):
            assert [h.tokens for h in one.hypotheses] == [h.tokens for h in many.hypotheses]
            for h1, h2 in zip(one.hypotheses, many.hypotheses):
                assert h1.score == pytest.approx(h2.score, abs=1e-6)
                assert h1.attention.shape == h2.attention.shape


def test_nbest_and_length_limit():
    model = TinyAttentionModel()
    sources = _tiny_sources()
    options = SearchOptions(beam_size=5, nbest=5, max_len_a=0.5, max_len_b=2, max_len_cap=6)
    src, src_len = pad_sources(sources)
    for source, translation in zip(sources, beam_search(model, src, src_len, options)):
        limit = min(6, int(0.5 * len(source) + 2))
        scores = [h.norm_score for h in translation.hypotheses]
        assert 1 <= len(translation.hypotheses) <= 5
        assert scores == sorted(scores, reverse=True)
        for h in translation.hypotheses:
            assert len(h.tokens) <= limit and h.tokens[-1] == EOS_ID
            assert h.attention.shape == (len(h.tokens), len(source))


def exhaustive_best(model, source: list[int], options: SearchOptions) -> tuple[float, tuple]:
    """The best finished output (normalised score, tokens) over every output the length limit
    allows, found by enumerating them all through the searches' own masked distributions."""
    src, src_len = pad_sources([source])
    memory = model.encode(src, src_len)
    limit = int(max_output_lengths(src_len, options)[0])
    best: tuple[float, tuple] = (-math.inf, ())
    frontier = [((), 0.0, model.init_state(memory))]
    for step in range(limit):
        grown = []
        for tokens, score, state in frontier:
            prev = torch.tensor([tokens[-1] if tokens else BOS_ID])
            out = next_log_probs(model, prev, state, memory, torch.tensor([step + 1 == limit]))
            for word, log_prob in enumerate(out.log_probs[0].double().tolist()):
                if word == EOS_ID:
                    norm = normalise(score + log_prob, len(tokens) + 1, options)
                    best = max(best, (norm, (*tokens, EOS_ID)))
                elif log_prob > -math.inf:
                    grown.append(((*tokens, word), score + log_prob, out.state))
        frontier = grown
    return best


@pytest.mark.parametrize("stop", ["first_k", "bound"])
@pytest.mark.parametrize("penalty", ["none", "mean", "gnmt"])
def test_a_beam_as_wide_as_the_search_space_is_exhaustive_search(penalty, stop):
    """Words 4-6, unk and </s>, at most 4 tokens: 125 live prefixes at the most, so a beam of
    200 prunes nothing and each rule must find what enumerating every output finds."""
    model = TinyAttentionModel(vocab=7, seed=3)
    options = SearchOptions(beam_size=200, nbest=1, length_penalty=penalty, alpha=0.6,
                            max_len_a=0.0, max_len_b=4, stop=stop)
    for source in ([4, 5, 6], [6, 6, 4, 5], [5]):
        norm, tokens = exhaustive_best(model, source, options)
        found = _one(model, options, source).best
        assert found.tokens == tokens and found.norm_score == pytest.approx(norm, abs=1e-9)


# With k = 2 both best pairs of step 2 end the sentence ("x", "z" finished: first_k stops), while
# "z w" is still live and ends better by the mean log-probability: (log .45 + log .45 - .01) / 3
# against (log .45 + log .6) / 2.
EARLY = {(): {"x": math.log(0.45), "z": math.log(0.45)},
         ("x",): {"</s>": math.log(0.6)},
         ("z",): {"</s>": math.log(0.5), "w": math.log(0.45)},
         ("z", "w"): {"</s>": -0.01}}


def test_first_k_stops_before_the_best_output_and_the_bound_finds_it():
    model = ScriptedModel("x z q w".split(), EARLY)
    first = _one(model, SearchOptions(beam_size=2, nbest=2, stop="first_k"))
    assert [model.text(h.tokens) for h in first.hypotheses] == ["x", "z"]
    assert first.best.norm_score == pytest.approx((math.log(0.45) + math.log(0.6)) / 2)
    bound = _one(model, SearchOptions(beam_size=2, nbest=1, stop="bound"))
    assert model.text(bound.best.tokens) == "z w"
    assert bound.best.norm_score == pytest.approx((2 * math.log(0.45) - 0.01) / 3)


def test_reachable_is_the_sum_normalised_at_the_length_limit():
    scores, limits = torch.tensor([-2.0, -6.0], dtype=torch.float64), torch.tensor([4, 10])
    assert reachable(scores, limits, SearchOptions(length_penalty="none")).tolist() == [-2, -6]
    assert reachable(scores, limits, SearchOptions(length_penalty="mean")).tolist() == [-0.5,
                                                                                      -0.6]
    gnmt = reachable(scores, limits, SearchOptions(length_penalty="gnmt", alpha=0.6))
    assert gnmt.tolist() == pytest.approx([-2 / 1.5 ** 0.6, -6 / 2.5 ** 0.6])


def test_the_searches_read_no_field_of_a_models_state_or_memory():
    """The state protocol (rnnsearch.models.state): greedy and beam search only pass a model's
    memory and state on and reorder them, so that every architecture's own types serve."""
    import ast
    from pathlib import Path

    import rnnsearch.decoding.beam as beam_module
    import rnnsearch.decoding.greedy as greedy_module

    read = []
    for module in (beam_module, greedy_module):
        tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
        read += [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                 and ast.unparse(node.value).split(".")[-1] in ("state", "memory")]
    assert read == []


def test_the_transformers_state_and_memory_are_its_own_and_reorder_like_any_other():
    from rnnsearch.decoding.steps import select_rows
    from rnnsearch.models.transformer import TransformerMemory, TransformerState
    from test_transformer import batch, small

    model = small()
    src, src_len, _ = batch()
    memory = model.encode(src, src_len)
    state = model.init_state(memory)
    _, state, _ = model.step(torch.tensor([2, 2]), state, memory)
    assert isinstance(memory, TransformerMemory) and isinstance(state, TransformerState)
    swapped = select_rows(state, torch.tensor([1, 0]))
    front = state.keys[0][..., :state.length]                          # batch x h x dh x 1
    assert torch.equal(swapped.keys[0][..., :1], front[[1, 0]]) and swapped.length == 1
