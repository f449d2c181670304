"""Write the code deps of every stage of the DVC pipelines from the imports: ``make deps``.

A stage's code is its ``pipeline/<script>.py``, ``pipeline/_entry.py`` and every module that
importing ``rnnsearch.stages.<stage>`` can run (for a command ``python -m <module>``: that
module's) (:func:`rnnsearch.code_graph.code_modules`: at
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
import functools
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from rnnsearch.code_graph import (ARCHITECTURES_MODULE, Graph, code_modules,  # noqa: E402
                                  package_graph)
from rnnsearch.config.architectures import ARCHITECTURES  # noqa: E402

STAGE = re.compile(r"^  ([A-Za-z_]\w*):")
DEPS = re.compile(r"^(\s+)deps:\s*$")
CODE = ("pipeline/", "src/")
PIPELINES = ("dvc.yaml", "reports/presets/dvc.yaml")   # the project's and the comparisons'

MODEL_RECORDS = "data/code"


@functools.lru_cache(maxsize=1)
def project_graph() -> Graph:
    """The package's import graph, read once per run."""
    return package_graph(ROOT / "src")


def entry_of(name: str, block: list[str]) -> tuple[list[str], str]:
    """The scripts a stage's command runs and the module it starts from: ``pipeline/<script>.py``
    (with ``pipeline/_entry.py``) runs ``rnnsearch.stages.<stage>``; ``python -m <module>`` runs
    that module."""
    command = "".join(block)
    script = re.search(r"python (pipeline/\S+\.py)", command)
    if script:
        return [script.group(1), "pipeline/_entry.py"], f"rnnsearch.stages.{name}"
    return [], re.search(r"python -m (\S+)", command).group(1)


def code_deps(name: str, block: list[str], data_deps: list[str]) -> list[str]:
    """The code deps stage ``name`` (its lines ``block``) should list (module docstring)."""
    scripts, start = entry_of(name, block)
    graph = project_graph()
    modules = code_modules(graph, [start])
    if any(dep == MODEL_RECORDS or dep.startswith(f"{MODEL_RECORDS}/") for dep in data_deps):
        modules -= {ARCHITECTURES_MODULE}
    if name == "model_code":
        modules |= code_modules(graph, [reference.partition(":")[0]
                                        for entry in ARCHITECTURES.values()
                                        for reference in (entry.encoder, entry.decoder)])
    files = sorted(graph.files[m].relative_to(ROOT).as_posix() for m in modules)
    return [*scripts, *files]


def rewrite_block(name: str, block: list[str]) -> list[str]:
    """A stage's lines with its code deps replaced by :func:`code_deps`, first in ``deps:``."""
    start = next((i for i, line in enumerate(block) if DEPS.match(line)), None)
    if start is None:
        return block
    indent = DEPS.match(block[start]).group(1) + "  "
    item = re.compile(rf"^{indent}- ([^\s#]+)")
    end = start + 1
    while end < len(block) and (item.match(block[end]) or block[end].startswith(indent + " ")):
        end += 1
    kept = [line for line in block[start + 1:end]
            if not (item.match(line) and item.match(line).group(1).startswith(CODE))]
    data = [item.match(line).group(1) for line in kept if item.match(line)]
    code = [f"{indent}- {path}\n" for path in code_deps(name, block, data)]
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
    parser.add_argument("--file", type=Path, action="append",
                        help=f"a dvc.yaml (default: {', '.join(PIPELINES)})")
    args = parser.parse_args(argv)
    files = args.file or [ROOT / p for p in PIPELINES if (ROOT / p).is_file()]
    return max(update(path, args.check) for path in files)


def update(path: Path, check: bool) -> int:
    """Generate ``path``'s code deps: write them (exit status 0), or with ``check`` only say
    whether they differ (1, with the diff)."""
    text = path.read_text(encoding="utf-8")
    wanted = generate(text)
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    if wanted == text:
        print(f"{shown}: the code deps follow the imports")
        return 0
    if check:
        import difflib

        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), wanted.splitlines(True),
                                                   str(shown), "generated"))
        print(f"{shown}: code deps differ from the imports; run `make deps`")
        return 1
    path.write_text(wanted, encoding="utf-8")
    print(f"{shown}: code deps rewritten from the imports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
