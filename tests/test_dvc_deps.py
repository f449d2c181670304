"""dvc.yaml's code deps are generated from the imports, and DVC reruns what an edit can change.

``scripts/stage_deps.py`` (``make deps``) writes each stage's code deps: its
``pipeline/<script>.py``, ``pipeline/_entry.py`` and the static import closure of
``rnnsearch.stages.<stage>`` (:mod:`rnnsearch.code_graph`), less the modules of
:data:`~rnnsearch.code_graph.CANNOT_CHANGE_A_RESULT`. A model's train and translate cells depend
on the record of its own architecture's code (the ``model_code`` stage) instead of every
architecture's modules. The tests below check the committed dvc.yaml against the generator, and
DVC itself against the promises: a new decoder or architecture, or an edit to the Transformer,
leaves the default grid's train cells clean; an edit to beam search reaches translate only.
"""
from __future__ import annotations

import importlib.util
import json
import sys

from conftest import REPO, make_project, run_in
from rnnsearch.code_graph import CANNOT_CHANGE_A_RESULT, read_graph

GENERATOR = REPO / "scripts" / "stage_deps.py"


def generator():
    """``scripts/stage_deps.py`` as a module."""
    spec = importlib.util.spec_from_file_location("stage_deps", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dvc_yaml_code_deps_are_what_the_generator_writes():
    assert generator().main(["--check"]) == 0, "dvc.yaml: run `make deps`"


def test_the_generator_puts_back_a_missing_dep_and_drops_an_extra_one(tmp_path, capsys):
    committed = (REPO / "dvc.yaml").read_text(encoding="utf-8")
    assert "      - src/rnnsearch/decoding/beam.py\n" in committed
    edited = committed.replace("      - src/rnnsearch/decoding/beam.py\n", "", 1).replace(
        "      - src/rnnsearch/stages/train.py\n",
        "      - src/rnnsearch/stages/train.py\n      - src/rnnsearch/models/transformer.py\n", 1)
    copy = tmp_path / "dvc.yaml"
    copy.write_text(edited, encoding="utf-8")
    assert generator().main(["--check", "--file", str(copy)]) == 1
    shown = capsys.readouterr().out
    assert "+      - src/rnnsearch/decoding/beam.py" in shown
    assert "-      - src/rnnsearch/models/transformer.py" in shown
    assert copy.read_text(encoding="utf-8") == edited            # --check writes nothing
    assert generator().main(["--file", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == committed


def changed_code(status: dict, prefix: str) -> dict[str, set[str]]:
    """``{stage: changed code deps}`` of the stages named ``prefix...`` in ``dvc status``."""
    return {stage: {path for entry in entries if isinstance(entry, dict)
                    for path in entry.get("changed deps", {})
                    if path.startswith(("src/", "pipeline/"))}
            for stage, entries in status.items() if stage.startswith(prefix)}


def add_registry_entry(project, registry: str, entry: str) -> None:
    """Add ``entry`` (a line of a dict literal) as the last entry of ``registry``'s dict."""
    path = project / registry
    text = path.read_text(encoding="utf-8")
    head, _, tail = text.rpartition("\n}\n")
    path.write_text(f"{head}\n{entry}\n}}\n{tail}", encoding="utf-8")


def test_a_new_decoder_a_new_architecture_and_a_transformer_edit_retrain_no_default_cell(
        tmp_path):
    """docs/contributing.md's recipe, as written, in a copy of the project: the sampling decoder
    and the reversed-encoder architecture (module plus registry entry), an edit to the
    Transformer, then ``make deps``' generator. The default grid's train cells (encdec and
    search) stay clean; the model_code records and translate see the change."""
    from test_registries import doc_blocks

    project = make_project(tmp_path / "project", {})
    sampling, _ = doc_blocks("A decoder")
    reversed_encoder, _ = doc_blocks("An architecture")
    (project / "src/rnnsearch/decoding/sampling.py").write_text(sampling, encoding="utf-8")
    (project / "src/rnnsearch/models/reversed.py").write_text(reversed_encoder, encoding="utf-8")
    add_registry_entry(project, "src/rnnsearch/config/methods.py",
                       '    "sample": DecodingMethod("rnnsearch.decoding.sampling:sample", '
                       'one_hypothesis=True),')
    add_registry_entry(project, "src/rnnsearch/config/architectures.py",
                       '    "encdec_reversed": Architecture("rnnsearch.models.decoder:'
                       'BahdanauDecoder", attention=False, encoder="rnnsearch.models.reversed:'
                       'ReversedEncoder"),')
    transformer = project / "src/rnnsearch/models/transformer.py"
    transformer.write_text(transformer.read_text() + "# an edit\n", encoding="utf-8")
    run_in([sys.executable, "scripts/stage_deps.py"], project)
    status = json.loads(run_in(["dvc", "status", "--json"], project).stdout)
    trains = changed_code(status, "train@")
    assert set(trains) >= {"train@encdec-30", "train@search-50"}
    assert not any(trains.values()), trains
    records = changed_code(status, "model_code@")
    assert all({"src/rnnsearch/config/architectures.py", "src/rnnsearch/models/transformer.py"}
               <= changed for changed in records.values()), records
    translates = changed_code(status, "translate@")
    assert all({"src/rnnsearch/config/methods.py", "src/rnnsearch/decoding/sampling.py"}
               <= changed for changed in translates.values()), translates


def test_an_edit_to_beam_search_reruns_translate_and_what_follows_it_only(tmp_path):
    """DVC itself, in a copy of the project: after an edit to decoding/beam.py, the stages whose
    changed deps name it are the translate and search_error cells (evaluate and report follow
    from their new outputs: tests/test_pipeline_e2e.py runs it); prepare .. train are not
    touched."""
    project = make_project(tmp_path / "project", {})
    beam = project / "src/rnnsearch/decoding/beam.py"
    beam.write_text(beam.read_text() + "# an edit\n")
    status = json.loads(run_in(["dvc", "status", "--json"], project).stdout)
    touched = {stage for stage, entries in status.items() for entry in entries
               if isinstance(entry, dict)
               and "src/rnnsearch/decoding/beam.py" in entry.get("changed deps", {})}
    assert touched and all(stage.startswith(("translate@", "search_error@"))
                           for stage in touched), touched
    assert any(stage.startswith("search_error@") for stage in touched), touched


def test_no_package_init_imports_its_siblings():
    """A package's ``__init__`` holds its docstring only, so that importing one module of it
    does not import (and make a stage depend on) all the others."""
    graph = read_graph(REPO / "src", "rnnsearch")
    inits = {m: deps for m, deps in graph.imports.items()
             if graph.files[m].name == "__init__.py" and deps}
    assert inits == {}


def test_every_module_let_off_exists_and_the_package_holds_no_code():
    graph = read_graph(REPO / "src", "rnnsearch")
    assert set(CANNOT_CHANGE_A_RESULT) <= set(graph.files)
    assert graph.imports["rnnsearch"] == frozenset()


def test_bytecode_caches_beside_the_sources_change_no_stage(tmp_path):
    """Python writes ``__pycache__/*.pyc`` beside every module it imports (the tests, a stage,
    ``make ui``), inside the code folders that are the stages' deps: ``.dvcignore`` leaves
    them out, so that the committed dvc.lock still matches and ``dvc repro`` retrains nothing
    because a module was imported."""
    project = make_project(tmp_path / "project", {})
    before = run_in(["dvc", "status", "--json"], project).stdout
    for folder in sorted({p.parent for p in (project / "src").rglob("*.py")}):
        cache = folder / "__pycache__"
        cache.mkdir(exist_ok=True)
        (cache / "module.cpython-311.pyc").write_bytes(b"\xa7\r\r\n" + bytes(range(64)))
    assert run_in(["dvc", "status", "--json"], project).stdout == before
    changed = {path for stage in json.loads(before).values() for entry in stage
               if isinstance(entry, dict) for path in entry.get("changed deps", {})}
    assert not any(path.startswith("src/") for path in changed), changed
