"""DVC stages ``code`` and ``model_code``: the code each stage, or one grid model, runs, recorded
as a small file the stage depends on instead of every module it imports.

A record holds each module's digest (:func:`rnnsearch.code_graph.code_digest`: the syntax tree
without docstrings, so a docstring, comment or layout edit reruns nothing). ``code`` writes
``--out/<stage>.json`` per stage of :data:`STAGES`: ``pipeline/<script>.py``,
``pipeline/_entry.py`` and every module ``rnnsearch.stages.<stage>`` imports, transitively (less
those that cannot change a result: :data:`rnnsearch.code_graph.CANNOT_CHANGE_A_RESULT`). Stages
running a grid model (:data:`RUN_A_MODEL`) leave the architectures' registry out and depend on
the record ``--model NAME`` writes (the model's resolved settings, registry entry and the modules
its encoder and decoder import), so a new architecture, or an edit to another, retrains no model,
and a change to the model's params reaches its cells through the record. Training stages' records
carry the settings they read (:data:`TRAINING_SETTINGS`, params ``code`` declares), so a train
cell's lock entry lists no params. Both stages rerun in seconds on every edit below ``src/``
(``code`` also on those settings); the stages behind them only when a record changed."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import rnnsearch
from rnnsearch.code_graph import (ARCHITECTURES_MODULE, Graph, code_digest, code_modules,
                                  package_graph)
from rnnsearch.config.architectures import Architecture
from rnnsearch.config.train import TrainConfig
from rnnsearch.stages.runner import Stage, StageContext

SRC = Path(rnnsearch.__file__).resolve().parent.parent
PIPELINE = SRC.parent / "pipeline"
STAGES = ("prepare", "tokenize", "embed", "senses", "pretrain_lm", "train", "train_seed",
          "translate", "search_error", "evaluate", "align", "align_attention", "report", "compare")
RUN_A_MODEL = ("train", "train_seed", "translate", "search_error", "align_attention")
SCRIPTS = {"tokenize": "tokenize_text"}            # pipeline/<script>.py where it is not the name
# train's sections each training stage reads, recorded with its code (train_seed's seed: --seed)
TRAINING_SETTINGS = {"train": ("data", "optim", "budget", "trainer", "init",
                               "supervised_attention", "seed")}
TRAINING_SETTINGS["train_seed"] = TRAINING_SETTINGS["train"][:-1]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="a name of train.models: its record alone, into the "
                                         "file --out (default: every stage's, into the folder)")
    parser.add_argument("--out", type=Path, required=True, help="the record (JSON), or folder")


def digests(graph: Graph, modules: set[str]) -> dict[str, str]:
    """``{path below src/: code digest}`` of ``modules``."""
    files = sorted(graph.files[module].relative_to(SRC).as_posix() for module in modules)
    return {path: code_digest(SRC / path) for path in files}


def stage_record(name: str, graph: Graph | None = None, train: TrainConfig | None = None
                 ) -> dict[str, object]:
    """Stage ``name``'s code record (``graph``: read once), with settings read from ``train``."""
    graph = graph or package_graph(SRC)
    modules = code_modules(graph, [f"rnnsearch.stages.{name}"])
    if name in RUN_A_MODEL:
        modules -= {ARCHITECTURES_MODULE}
    scripts = [f"{SCRIPTS.get(name, name)}.py", "_entry.py"]
    record: dict[str, object] = {
        "stage": name, "modules": digests(graph, modules),
        "scripts": {script: code_digest(PIPELINE / script) for script in scripts}}
    if name in TRAINING_SETTINGS and train is not None:
        record["settings"] = {key: _plain(getattr(train, key)) for key in TRAINING_SETTINGS[name]}
    return record


def _plain(value: object) -> object:
    return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value


def architecture_modules(architecture: Architecture, graph: Graph | None = None
                         ) -> dict[str, str]:
    """``{path below src/: code digest}`` of every module the architecture's encoder and
    decoder import, the registry itself left out (its entry is recorded instead)."""
    graph = graph or package_graph(SRC)
    start = [reference.partition(":")[0] for reference in (architecture.encoder,
                                                           architecture.decoder)]
    return digests(graph, code_modules(graph, start) - {ARCHITECTURES_MODULE})


def model_record(ctx: StageContext, name: str) -> dict[str, object]:
    """The record of grid model ``name``'s own code."""
    model = ctx.section(TrainConfig, "train").model_config(name)
    return {"model": name, "architecture": model.model, "settings": dataclasses.asdict(model),
            "entry": dataclasses.asdict(model.architecture),
            "modules": architecture_modules(model.architecture)}


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Write the record of ``args.model``'s code, or every stage's."""
    if args.model:
        record = model_record(ctx, args.model)
        ctx.write_json(args.out, record)
        print(f"code {args.model}: {len(record['modules'])} modules")
        return
    graph, train = package_graph(SRC), ctx.section(TrainConfig, "train")
    for name in STAGES:
        ctx.write_json(args.out / f"{name}.json", stage_record(name, graph, train))
    print(f"code: {len(STAGES)} stage records in {args.out}")


# A bad training setting fails the stage; the runner then puts the previous records back.
STAGE = Stage("code", __doc__, add_arguments, lambda a: [a.out], body)
