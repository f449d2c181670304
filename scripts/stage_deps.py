"""Write the code deps of every stage of dvc.yaml from the imports: ``make deps``.

A stage's code is its ``pipeline/<script>.py``, ``pipeline/_entry.py`` and every module that
importing ``rnnsearch.stages.<stage>`` can run (:func:`rnnsearch.code_graph.code_modules`: at
any depth, with the ``__init__`` of every package on the way and the modules the registries
name). Two exceptions keep one model's cells apart from another's code:

* a stage that lists a ``data/code`` dep (train, translate, align_attention) does not depend on
  the architectures' registry: its record of the model's own code, written by the
  ``model_code`` stage, stands for the registry entry and the modules of that architecture;
* the ``model_code`` stage depends on the registry and on every architecture's modules.

The other deps (data, comments) are kept as written. ``--check`` writes nothing and exits 1,
listing what differs, when dvc.yaml is not what this would write (``tests/test_dvc_deps.py``).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rnnsearch.code_graph import (ARCHITECTURES_MODULE, code_modules,  # noqa: E402
                                  package_graph)
from rnnsearch.config.architectures import ARCHITECTURES  # noqa: E402

STAGE = re.compile(r"^  ([A-Za-z_]\w*):")
ITEM = re.compile(r"^      - ([^\s#]+)")
CODE = ("pipeline/", "src/")
MODEL_RECORDS = "data/code"


def script_of(block: list[str]) -> str:
    """The ``pipeline/<script>.py`` a stage's command runs."""
    return re.search(r"python (pipeline/\S+\.py)", "".join(block)).group(1)


def code_deps(name: str, script: str, data_deps: list[str]) -> list[str]:
    """The code deps stage ``name`` should list (module docstring)."""
    graph = package_graph(ROOT / "src")
    modules = code_modules(graph, [f"rnnsearch.stages.{name}"])
    if any(dep == MODEL_RECORDS or dep.startswith(f"{MODEL_RECORDS}/") for dep in data_deps):
        modules -= {ARCHITECTURES_MODULE}
    if name == "model_code":
        modules |= code_modules(graph, [reference.partition(":")[0]
                                        for entry in ARCHITECTURES.values()
                                        for reference in (entry.encoder, entry.decoder)])
    files = sorted(graph.files[m].relative_to(ROOT).as_posix() for m in modules)
    return [script, "pipeline/_entry.py", *files]


def rewrite_block(name: str, block: list[str]) -> list[str]:
    """A stage's lines with its code deps replaced by :func:`code_deps`, first in ``deps:``."""
    start = next((i for i, line in enumerate(block) if line.rstrip() == "    deps:"), None)
    if start is None:
        return block
    end = start + 1
    while end < len(block) and (ITEM.match(block[end]) or block[end].startswith("       ")):
        end += 1
    items = block[start + 1:end]
    kept = [line for line in items if not (ITEM.match(line)
                                           and ITEM.match(line).group(1).startswith(CODE))]
    data = [ITEM.match(line).group(1) for line in kept if ITEM.match(line)]
    code = [f"      - {path}\n" for path in code_deps(name, script_of(block), data)]
    return block[:start + 1] + code + kept + block[end:]


def generate(text: str) -> str:
    """dvc.yaml's text with every stage's code deps generated."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i, in_stages = 0, False
    while i < len(lines):
        in_stages = in_stages or lines[i].rstrip() == "stages:"
        match = STAGE.match(lines[i]) if in_stages else None
        if not match:
            out.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not STAGE.match(lines[end]) and not re.match(r"^\S", lines[end]):
            end += 1
        out += rewrite_block(match.group(1), lines[i:end])
        i = end
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if stale")
    parser.add_argument("--file", type=Path, default=ROOT / "dvc.yaml")
    args = parser.parse_args(argv)
    text = args.file.read_text(encoding="utf-8")
    wanted = generate(text)
    if wanted == text:
        print(f"{args.file.name}: the code deps follow the imports")
        return 0
    if args.check:
        import difflib

        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), wanted.splitlines(True),
                                                   str(args.file), "generated"))
        print(f"{args.file.name}: code deps differ from the imports; run `make deps`")
        return 1
    args.file.write_text(wanted, encoding="utf-8")
    print(f"{args.file.name}: code deps rewritten from the imports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
