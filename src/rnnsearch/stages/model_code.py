"""DVC stage ``model_code``: the code one grid model runs, recorded as a small file
(``data/code/<model>.json``) that the model's train and translate cells depend on.

The record holds the model's registry entry and the SHA-256 of every module its encoder and
decoder import (:mod:`rnnsearch.code_graph`). The stage reruns on any architecture's change,
but a record changes only with its model's own code, so DVC retrains no other model."""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
from pathlib import Path

import rnnsearch
from rnnsearch.code_graph import ARCHITECTURES_MODULE, code_modules, package_graph
from rnnsearch.config.architectures import Architecture
from rnnsearch.config.train import TrainConfig
from rnnsearch.stages.runner import Stage, StageContext

SRC = Path(rnnsearch.__file__).resolve().parent.parent


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="a name of train.models")
    parser.add_argument("--out", type=Path, required=True, help="the record (JSON)")


def architecture_modules(architecture: Architecture) -> dict[str, str]:
    """``{path below src/: SHA-256}`` of every module the architecture's encoder and decoder
    import, the registry itself left out (its entry is recorded instead)."""
    graph = package_graph(SRC)
    start = [reference.partition(":")[0] for reference in (architecture.encoder,
                                                           architecture.decoder)]
    modules = code_modules(graph, start) - {ARCHITECTURES_MODULE}
    files = sorted(graph.files[module].relative_to(SRC).as_posix() for module in modules)
    return {path: hashlib.sha256((SRC / path).read_bytes()).hexdigest() for path in files}


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Write the record of model ``args.model``'s code."""
    model = ctx.section(TrainConfig, "train").model_config(args.model)
    modules = architecture_modules(model.architecture)
    ctx.write_json(args.out, {"model": args.model, "architecture": model.model,
                              "entry": dataclasses.asdict(model.architecture),
                              "modules": modules})
    print(f"model_code {args.model}: architecture {model.model}, {len(modules)} modules")


STAGE = Stage("model_code", __doc__, add_arguments, lambda a: [a.out], body)
