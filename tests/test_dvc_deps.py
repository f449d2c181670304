"""Each stage depends on the record of the code it runs (``data/code/stages/<stage>.json``,
written by the ``code`` stage: :mod:`rnnsearch.stages.code`), and a record changes exactly when
an edit can change what the stage writes: not for a docstring, a comment or the layout; for a code edit to a module the
stage imports; for a model's train and translate cells, not for another architecture's code or
a new architecture (their ``model_code`` record stands for their own). The tests edit a copy of
the sources and compare the records; tests/test_pipeline_e2e.py shows DVC itself acting on them.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from rnnsearch.code_graph import CANNOT_CHANGE_A_RESULT, code_digest, package_graph, read_graph
from rnnsearch.config.architectures import ARCHITECTURES
from rnnsearch.stages import code

STAGES = code.STAGES


@pytest.fixture
def sources(tmp_path, monkeypatch) -> Path:
    """A copy of ``src/`` and ``pipeline/`` that the records are read from."""
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "pipeline", tmp_path / "pipeline")
    monkeypatch.setattr(code, "SRC", tmp_path / "src")
    monkeypatch.setattr(code, "PIPELINE", tmp_path / "pipeline")
    return tmp_path / "src" / "rnnsearch"


def records() -> dict[str, dict]:
    """Every stage's record and every architecture's, from the sources as they are now."""
    graph = package_graph(code.SRC)
    stages = {name: code.stage_record(name, graph) for name in STAGES}
    models = {name: code.architecture_modules(entry, graph)
              for name, entry in ARCHITECTURES.items()}
    return {**stages, **{f"model:{name}": modules for name, modules in models.items()}}


def changed_after(edit) -> set[str]:
    """The records that differ after ``edit()``."""
    before = records()
    edit()
    after = records()
    return {name for name in before if before[name] != after[name]}


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def test_every_stage_of_dvc_yaml_but_the_records_depends_on_its_own_record():
    for name, stage in STAGES_OF_DVC_YAML.items():
        if name in ("code", "model_code"):
            continue
        runs = script_stage(stage["cmd"])     # translate_seed runs translate's script
        record = f"data/code/stages/{runs}.json"
        assert record in stage["deps"] or any(d.startswith(record) for d in stage["deps"]), name
        assert not any(str(dep).startswith(("src/", "pipeline/")) for dep in stage["deps"]), name
        assert runs in STAGES
    for stage in STAGES_OF_DVC_YAML.values():    # the run cache needs outputs DVC may delete
        outs = stage.get("outs", [])
        assert not any(isinstance(o, dict) and any(v.get("persist") for v in o.values()
                                                   if isinstance(v, dict)) for o in outs)


def script_stage(cmd: str) -> str:
    """The stage whose code ``cmd`` runs: ``python pipeline/tokenize_text.py ...`` ->
    ``tokenize``."""
    script = cmd.split()[1]
    assert script.startswith("pipeline/"), cmd
    stem = Path(script).stem
    return next((name for name, file in code.SCRIPTS.items() if file == stem), stem)


STAGES_OF_DVC_YAML = {name: (stage.get("do", stage)) for name, stage in
                      yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].items()}


def test_a_docstring_comment_or_layout_edit_changes_no_record(sources):
    def edit():
        beam = sources / "decoding" / "beam.py"
        text = beam.read_text(encoding="utf-8")
        first = text.index('"""', 3)
        beam.write_text(text[:3] + "Edited. " + text[3:first] + text[first:] + "\n\n# note\n",
                        encoding="utf-8")
        run = sources / "training" / "run.py"
        text = run.read_text(encoding="utf-8").replace(
            '    """Train ``model_name``', '    """Train, edited, ``model_name``', 1)
        run.write_text(text.replace("    return metrics\n", "    return metrics   # done\n"),
                       encoding="utf-8")
    assert changed_after(edit) == set()


def test_a_code_edit_to_beam_search_changes_translate_and_search_error_only(sources):
    changed = changed_after(lambda: append(sources / "decoding" / "beam.py", "\nEDITED = 1\n"))
    assert changed == {"translate", "search_error"}, changed


def test_an_edit_to_the_presets_runner_export_or_report_stales_no_comparison(sources):
    """Was: the comparisons ran ``python -m rnnsearch.presets bootstrap``, so their record held
    the whole presets command (runner, export) and through export the report's writer."""
    def edit():
        for module in ("presets/cli.py", "runs/export.py", "runs/registry.py",
                       "reporting/write.py"):
            append(sources / module, "\nEDITED = 1\n")
    assert changed_after(edit) == {"report"}


def test_a_transformer_edit_changes_its_model_record_only(sources):
    changed = changed_after(lambda: append(sources / "models" / "transformer.py",
                                           "\nEDITED = 1\n"))
    assert changed == {"model:transformer"} | {f"model:{n}" for n, e in ARCHITECTURES.items()
                                               if "transformer" in e.encoder + e.decoder}


def test_a_new_decoder_and_a_new_architecture_retrain_no_model(sources):
    """docs/contributing.md's recipes, as written: the sampling decoder and the
    reversed-encoder architecture, each a module plus a registry entry."""
    from test_registries import doc_blocks

    sampling, _ = doc_blocks("A decoder")
    reversed_encoder, _ = doc_blocks("An architecture")

    def edit():
        (sources / "decoding" / "sampling.py").write_text(sampling, encoding="utf-8")
        (sources / "models" / "reversed.py").write_text(reversed_encoder, encoding="utf-8")
        add_registry_entry(sources / "config" / "methods.py",
                           '    "sample": DecodingMethod("rnnsearch.decoding.sampling:sample", '
                           'one_hypothesis=True),')
        add_registry_entry(sources / "config" / "architectures.py",
                           '    "encdec_reversed": Architecture("rnnsearch.models.decoder:'
                           'BahdanauDecoder", attention=False, encoder="rnnsearch.models.'
                           'reversed:ReversedEncoder"),')
    changed = changed_after(edit)
    assert "train" not in changed and not any(name.startswith("model:") for name in changed)
    assert "translate" in changed


def add_registry_entry(path: Path, entry: str) -> None:
    """Add ``entry`` (a line of a dict literal) as the last entry of the registry's dict."""
    text = path.read_text(encoding="utf-8")
    head, _, tail = text.rpartition("\n}\n")
    path.write_text(f"{head}\n{entry}\n}}\n{tail}", encoding="utf-8")


def test_the_digest_ignores_docstrings_everywhere_but_not_strings_that_run(tmp_path):
    def digest(text: str) -> str:
        path = tmp_path / "m.py"
        path.write_text(text, encoding="utf-8")
        return code_digest(path)
    base = digest('"""Doc."""\nX = 1\n"""X\'s doc."""\ndef f():\n    """F."""\n    return "a"\n')
    assert digest('X = 1\n\n\ndef f():  # c\n    return "a"\n') == base
    assert digest('X = 1\ndef f():\n    return "b"\n') != base
    assert digest('def f():\n    """Only a docstring."""\n') == digest('def f():\n    pass\n')


def test_no_package_init_imports_its_siblings():
    """A package's ``__init__`` holds its docstring only, so that importing one module of it
    does not import (and put in a stage's record) all the others."""
    graph = read_graph(REPO / "src", "rnnsearch")
    inits = {m: deps for m, deps in graph.imports.items()
             if graph.files[m].name == "__init__.py" and deps}
    assert inits == {}


def test_every_module_let_off_exists_and_the_package_holds_no_code():
    graph = read_graph(REPO / "src", "rnnsearch")
    assert set(CANNOT_CHANGE_A_RESULT) <= set(graph.files)
    assert graph.imports["rnnsearch"] == frozenset()


def test_a_change_to_a_models_params_reaches_its_cells_through_its_record(tmp_path):
    """The train cells declare no ``train.base_model`` nor ``train.models.<model>``: the model's
    record carries its resolved settings, so a change to them changes the record its cells
    depend on (and a change to another model's entry does not)."""
    from rnnsearch.stages.runner import StageContext

    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["train"]["base_model"]["hidden_size"] += 1
    params["train"]["models"]["transformer"]["heads"] = 2
    edited = tmp_path / "params.yaml"
    edited.write_text(yaml.safe_dump(params), encoding="utf-8")

    def record(params_file: Path, model: str) -> dict:
        return code.model_record(StageContext("model_code", str(params_file)), model)
    before, after = record(REPO / "params.yaml", "search"), record(edited, "search")
    assert after["settings"]["hidden_size"] == before["settings"]["hidden_size"] + 1
    assert {k for k in before if before[k] != after[k]} == {"settings"}
    params["train"]["base_model"]["hidden_size"] -= 1
    edited.write_text(yaml.safe_dump(params), encoding="utf-8")
    assert record(edited, "search") == before
    train = STAGES_OF_DVC_YAML["train"]
    assert "data/code/models/${item.model}.json" in train["deps"]
    assert "params" not in train and "params" not in STAGES_OF_DVC_YAML["train_seed"]


def test_a_change_to_a_training_setting_reaches_the_cells_through_the_stages_record(tmp_path):
    """The train cells declare no params: the code stage declares the training settings and
    records them in train.json and train_seed.json (train.seed in train's alone), so a change
    to one changes those records only, and a train cell's lock entry lists no params."""
    from rnnsearch.config.base import from_dict
    from rnnsearch.config.train import TrainConfig

    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    graph, records = package_graph(code.SRC), {}
    for lr in (params["train"]["optim"]["lr"], params["train"]["optim"]["lr"] * 2):
        edited = {**params["train"], "optim": {**params["train"]["optim"], "lr": lr}}
        train = from_dict(TrainConfig, edited, "train")
        records[lr] = {name: code.stage_record(name, graph, train) for name in code.STAGES}
    before, after = records.values()
    assert {n for n in code.STAGES if before[n] != after[n]} == {"train", "train_seed"}
    assert "seed" in before["train"]["settings"] and "seed" not in before["train_seed"]["settings"]
    declared = {key.removeprefix("train.") for key in STAGES_OF_DVC_YAML["code"]["params"]}
    assert declared == set(code.TRAINING_SETTINGS["train"])


def test_senses_declares_every_embed_setting_its_word2vec_reads(monkeypatch):
    """senses trains word2vec again with embed's settings; it declares those keys one by one
    (not the whole section: the probe words and the plot size retrain nothing)."""
    from rnnsearch.config.embed import EmbedConfig
    from rnnsearch.embeddings import word2vec

    read: set[str] = set()

    class Recording(EmbedConfig):
        def __getattribute__(self, name: str):
            if not name.startswith("_"):
                read.add(name)
            return super().__getattribute__(name)

    monkeypatch.setattr(word2vec, "Word2Vec", lambda **kwargs: type("Model", (), {})())
    word2vec.train_word2vec([["a", "b"]], Recording())
    read |= {"min_count"}                                   # the sense sizes' floor (senses.py)
    declared = {key.partition(".")[2] for key in STAGES_OF_DVC_YAML["senses"]["params"]
                if key.startswith("embed.")}
    assert read - {"sg_flag"} == declared
