"""One registry per concept: a new decoding method or architecture is one entry plus its module.

The examples of docs/contributing.md ("Adding a decoder or an architecture") are read from the
page: each module is written to a temporary folder and each entry, its module path pointed
there, registered for the test. Params validation, the command lines, the translate stage's
decoding and the model code then accept it with no other edit; before it is registered, the
same params fail.
"""
from __future__ import annotations

import dataclasses
import io
import re
import sys
from typing import Any, Callable

import pytest
import torch

from conftest import REPO
from decoding_workspace import SRC, make_workspace
from rnnsearch.config.base import from_dict
from rnnsearch.config.methods import DECODING_METHODS, DecodingMethod
from rnnsearch.config.architectures import ARCHITECTURES, TRANSFORMER_SETTINGS, Architecture
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.report import ReportConfig
from rnnsearch.config.translate import TranslateConfig, method_options
from rnnsearch.data.vocab import EOS_ID
from rnnsearch.decoding import cli, device_agreement
from rnnsearch.decoding.translator import Translator
from rnnsearch.errors import ConfigError
from rnnsearch.models.encoder import Encoder
from rnnsearch.models.seq2seq import build_model, load_model, save_model
from rnnsearch.stages.translate import decode_all

DOC = REPO / "docs" / "contributing.md"


def doc_blocks(heading: str) -> list[str]:
    """The Python code blocks of contributing.md's section ``### heading``."""
    text = DOC.read_text(encoding="utf-8")
    section = re.split(r"\n##+ ", text.split(f"\n### {heading}\n", 1)[1], maxsplit=1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def register_from_doc(heading: str, registry: dict[str, Any], name: str, cls: type,
                      field: str, module: str, tmp_path, monkeypatch) -> Callable[[], Any]:
    """The section's module written as ``doc_<name>.py`` under ``tmp_path``; returns a function
    that registers the section's new entry (its ``field`` pointed at that file instead of
    ``module``) in ``registry`` and returns the loaded module. The page's other entries must be
    the registry's own."""
    code, entries = doc_blocks(heading)
    namespace: dict[str, Any] = {cls.__name__: cls, "TRANSFORMER_SETTINGS": TRANSFORMER_SETTINGS}
    exec(entries, namespace)                             # the page's registry, with the new entry
    shown = next(value for key, value in namespace.items()
                 if key.isupper() and isinstance(value, dict))
    assert {key: shown[key] for key in registry} == registry
    assert set(shown) - set(registry) == {name}
    local = f"doc_{name}"
    (tmp_path / f"{local}.py").write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, local, raising=False)
    entry = dataclasses.replace(shown[name],
                                **{field: getattr(shown[name], field).replace(module, local)})

    def register() -> Any:
        monkeypatch.setitem(registry, name, entry)
        return __import__(local)
    return register


@pytest.fixture
def register_sampling(tmp_path, monkeypatch) -> Callable[[], Any]:
    return register_from_doc("A decoder", DECODING_METHODS, "sample", DecodingMethod,
                             "function", "rnnsearch.decoding.sampling", tmp_path, monkeypatch)


@pytest.fixture
def register_reversed(tmp_path, monkeypatch) -> Callable[[], Any]:
    return register_from_doc("An architecture", ARCHITECTURES, "encdec_reversed", Architecture,
                             "encoder", "rnnsearch.models.reversed", tmp_path, monkeypatch)


def test_a_registered_decoder_is_a_method_params_accept(register_sampling):
    section = {"methods": ["greedy", "beam", "sample"]}
    with pytest.raises(ConfigError, match=r"translate\.methods\[2\]"):
        from_dict(TranslateConfig, section, "translate")
    with pytest.raises(ConfigError, match=r"report\.method"):
        from_dict(ReportConfig, {"method": "sample_unk"}, "report")
    register_sampling()
    assert from_dict(TranslateConfig, section, "translate").methods == ("greedy", "beam", "sample")
    assert from_dict(ReportConfig, {"method": "sample_unk"}, "report").method == "sample_unk"
    search = from_dict(TranslateConfig, {}, "translate").search     # beam_size 5
    assert method_options(search, "sample") == dataclasses.replace(search, beam_size=1, nbest=1)
    assert method_options(search, "beam") == search


def test_a_registered_decoder_decodes_in_the_stage_and_both_commands(
        register_sampling, tmp_path, monkeypatch, capsys):
    root = make_workspace(tmp_path)
    monkeypatch.chdir(root)
    model, vocab = "data/models/search-50/model.pt", "data/tokenized"
    with pytest.raises(SystemExit):                          # not a choice yet
        cli.main(["--model", model, "--method", "sample"])
    register_sampling()
    translator = Translator.load(model, vocab)
    sources = [line.split() for line in SRC]
    cfg = from_dict(TranslateConfig, {"methods": ["greedy", "sample"]}, "translate")
    results = decode_all(translator, sources, cfg, batch_size=2)
    assert list(results) == ["greedy", "sample"]
    for translation, source in zip(results["sample"].translations, sources):
        (best,) = translation.hypotheses
        assert best.tokens[-1] == EOS_ID and EOS_ID not in best.tokens[:-1]
        assert best.attention.shape == (len(best.tokens), max(len(source), 1))
    again = decode_all(translator, sources, cfg, batch_size=2)["sample"].translations
    assert [t.best.tokens for t in again] == [t.best.tokens for t in results["sample"].translations]

    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"The cat sat.\nA dog\n")))
    assert cli.main(["--model", model, "--method", "sample"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert device_agreement.main(["--model", model, "--vocab-dir", vocab, "--sources",
                                  f"{vocab}/test.src", "--devices", "cpu", "cpu",
                                  "--methods", "sample"]) == 0
    assert capsys.readouterr().out.startswith(f"sample: 0 of {len(SRC)} best hypotheses differ")


def test_a_registered_architecture_is_a_model_params_accept(register_reversed):
    with pytest.raises(ConfigError, match=r"model\.model.*encdec_reversed"):
        ModelConfig.from_dict({"model": "encdec_reversed"})
    register_reversed()
    config = ModelConfig.from_dict({"model": "encdec_reversed", "score": "dot"})
    assert not config.architecture.attention          # no attention: its score is not checked
    with pytest.raises(ConfigError, match=r"model\.score.*accept it: luong"):
        ModelConfig.from_dict({"model": "search", "score": "dot"})


def tiny_config(model: str) -> ModelConfig:
    return ModelConfig(model=model, embedding_size=8, hidden_size=8, output_size=8)


def test_a_registered_architecture_builds_saves_loads_and_decodes(
        register_reversed, tmp_path, monkeypatch, capsys):
    module = register_reversed()
    torch.manual_seed(0)
    model = build_model(tiny_config("encdec_reversed"), 12, 12).eval()
    assert type(model.encoder) is module.ReversedEncoder and not model.has_attention
    plain = build_model(tiny_config("encdec"), 12, 12)
    assert list(model.state_dict()) == list(plain.state_dict())    # the weights' names
    src = torch.tensor([[4, 5, 6, 7], [8, 9, 0, 0]])                # the second padded
    src_len = torch.tensor([4, 2])
    reversed_src = torch.tensor([[7, 6, 5, 4], [9, 8, 0, 0]])
    with torch.no_grad():
        summary = model.encoder(src, src_len)[1]
        forwards = Encoder.forward(model.encoder, reversed_src, src_len)[1]
    assert torch.equal(summary, forwards)                          # it reads backwards

    save_model(model, tmp_path / "model.pt")
    loaded = load_model(tmp_path / "model.pt")
    tgt_in = torch.tensor([[1, 4, 5], [1, 6, 7]])
    with torch.no_grad():
        assert torch.equal(loaded(src, src_len, tgt_in)[0], model(src, src_len, tgt_in)[0])

    root = make_workspace(tmp_path / "workspace", "encdec_reversed")
    monkeypatch.chdir(root)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"The cat sat.\n")))
    assert cli.main(["--model", "data/models/encdec_reversed-50/model.pt"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
