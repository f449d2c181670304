"""Presets: named params overrides (``presets/<name>.yaml``) run as DVC experiments.

A preset file holds only the keys it changes, in params.yaml's layout (``extends: <other>``
starts from another preset's). ``run NAME`` (``make preset NAME=...``) validates the merged
params, runs ``dvc exp run --temp -n NAME -S key=value ...`` (stages already made with the same
code, data and params come from DVC's (run) cache), promotes it to the branch ``preset/NAME``
(``dvc exp branch``) and copies its report, metrics and params into ``reports/presets/NAME/``
beside the default run's (``beside_default.md``). ``export`` and ``compare`` redo those steps;
``show`` prints the commands; ``check`` only validates. ``--temp``: a workspace run would
rewrite params.yaml, dvc.lock and the default results. A relative ``prepare.mirror`` reaches
the copy resolved, in ``RNNSEARCH_CORPORA``; the MLflow store stays the repository root's."""
from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any, Sequence

from rnnsearch.command import entry_point
from rnnsearch.config.repository import repo_root
from rnnsearch.runs.branches import branch, has_branch
from rnnsearch.runs.cells import layer_aers, translate
from rnnsearch.presets.definition import adopt, check_adoptable, command, resolve, run_environment
from rnnsearch.runs.export import export, exported
from rnnsearch.runs.registry import dispatch
from rnnsearch.procgroup import run_group

STOP_GRACE = 30.0       # seconds DVC gets to clean up its temporary copy when the chain is stopped
INTERRUPTED = 130



def shell_line(args: Sequence[str]) -> str:
    """``args`` as one line to paste into a shell."""
    return shlex.join(args)


def run(names: Sequence[str], params: Sequence[dict[str, Any]], dry: bool = False) -> int:
    """Run presets ``names`` (merged ``params``) in order, each a temporary experiment promoted
    to :func:`branch` and exported (stages any run made with the same code, data and params come
    from DVC's run cache); ``dry``: only print the commands. Returns an exit status."""
    root = repo_root()
    for name, merged in zip(names, params):
        steps = [command(name), ["git", "branch", "-D", "-q", branch(name)],
                 ["dvc", "exp", "branch", name, branch(name)]]
        for step in steps:
            print(shell_line(step), flush=True)
            if dry or (step[1] == "branch" and not has_branch(root, branch(name))):
                continue
            # own process group, sent SIGINT when this one stops (even by SIGKILL), on which
            # DVC removes its temporary copy: a stopped chain leaves no `dvc exp run` behind
            status = run_group(step, env=run_environment(merged), grace=STOP_GRACE, cwd=root,
                               interrupt=True)
            if status is None:
                print(f"preset '{name}': stopped", file=sys.stderr)
                return INTERRUPTED
            if status:
                return status
        if not dry:
            exported(name)
    return 0


@entry_point("presets")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.presets", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["check", "show", "run", "export", "compare",
                                           "translate", "layers"],
                        help="compare NAME [--against OTHER]: its comparison's DVC stage "
                             "(reports/presets/dvc.yaml, running "
                             "pipeline/compare.py); "
                             "translate NAME CELL [options of python -m rnnsearch.decoding.cli]: "
                             "translate with that cell of the experiment's branch; layers NAME "
                             "CELL: a Transformer cell's attention AER read from each decoder "
                             "layer")
    parser.add_argument("name", nargs="+",
                        help="preset name: a file presets/<name>.yaml; run, show and check take "
                             "several, run in order, each reusing (DVC's run cache) the stages "
                             "an earlier run made with the same code, data and params")
    parser.add_argument("--against", metavar="PRESET",
                        help="compare: beside that exported preset's cells instead of the "
                             "default run's (default: the default run)")
    parser.add_argument("--from", dest="source", metavar="FILE",
                        help="your own params overrides: copied to presets/<name>.yaml first "
                             "(make experiment NAME=... PARAMS=FILE)")
    args, rest = parser.parse_known_args(argv)
    names, args.name = args.name, args.name[0]
    if args.action not in ("run", "show", "check"):
        rest = names[1:] + rest                         # translate's and layers' CELL, ...
    elif args.source and len(names) > 1:
        parser.error("--from FILE takes one experiment name")
    if args.action == "layers":
        if len(rest) != 1:
            parser.error("layers needs one Transformer grid cell after the name, e.g. "
                         "transformer-50")
        for layer, aer in enumerate(layer_aers(args.name, rest[0])):
            print(f"decoder layer {layer}: " + ", ".join(f"AER {variant} {value:.3f}"
                                                         for variant, value in aer.items()))
        return 0
    if args.action == "translate":
        if not rest:
            parser.error("translate needs a grid cell after the name, e.g. search-50")
        return translate(args.name, rest[0], rest[1:])
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.action == "export":
        folder = export(args.name)
        print(f"preset '{args.name}': its report is in {folder.relative_to(repo_root())}/README.md")
        return 0
    against = None if args.against in (None, "default") else args.against
    if args.action == "compare":
        return dispatch(args.name, against)
    if args.source:
        check_adoptable(args.name, args.source)
    resolved = [resolve(name, repo_root() / "params.yaml", runtime=args.action == "run",
                        source=args.source) for name in names]
    if args.action == "check":
        for name, (_, cells) in zip(names, resolved):
            print(f"preset '{name}' is valid; grid cells: {', '.join(cells)}")
        return 0
    if args.source:                 # valid: only now does it become presets/<name>.yaml
        adopt(args.name, args.source)
    return run(names, [merged for merged, _ in resolved], dry=args.action == "show")
