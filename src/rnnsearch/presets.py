"""Presets: named params overrides (``presets/<name>.yaml``) run as DVC experiments.

A preset file holds only the keys it changes, in params.yaml's layout (``extends: <other>``
starts from another preset's). ``run NAME`` (``make preset NAME=...``) validates the merged
params, runs ``dvc exp run --temp -n NAME -S key=value ...`` (every stage already made with the
same code, data and params comes from DVC's cache or run cache), promotes the experiment to the
branch ``preset/NAME`` (``dvc exp branch``) and copies its report, metrics and params into
``reports/presets/NAME/`` beside the default run's (``beside_default.md``). ``export`` and
``compare`` redo those steps; ``show`` prints the commands; ``check`` only validates.
``--temp``: a workspace run would rewrite params.yaml, dvc.lock and the default results. A
relative ``prepare.mirror`` reaches the copy resolved, in ``RNNSEARCH_CORPORA``; the MLflow
store stays the repository root's."""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Sequence, TypeVar

import yaml

from rnnsearch.command import entry_point
from rnnsearch.config.base import parse_params, read_params
from rnnsearch.errors import ConfigError
from rnnsearch.config.repository import check_name, load_preset, preset_path, repo_root
from rnnsearch.config.sections import grid_cells, validate_params
from rnnsearch.config.trees import flatten, merge

if TYPE_CHECKING:
    from rnnsearch.reporting.beside import Outcome, Run

T = TypeVar("T")
_PLAIN = re.compile(r"[A-Za-z0-9_./-]+")  # strings that need no quoting in an override
EXTENDS = "extends"                       # a preset's key naming the preset it starts from


def preset_overrides(name: str, seen: tuple[str, ...] = (),
                     own: dict[str, Any] | None = None) -> dict[str, Any]:
    """Preset ``name``'s file (or ``own``, the overrides it is about to get) merged over the
    preset its ``extends`` names (recursively); an unknown name or a cycle is a
    :class:`ConfigError` naming the file."""
    own = dict(load_preset(name) if own is None else own)
    base = own.pop(EXTENDS, None)
    if base is None:
        return own
    if not isinstance(base, str) or base in seen + (name,):
        raise ConfigError(f"{preset_path(name)}: {EXTENDS}: must name another preset, not one "
                          f"that leads back to it, got {base!r}")
    return merge(preset_overrides(base, seen + (name,)), own)


def hydra_value(value: Any, in_list: bool = False) -> str:
    """``value`` in DVC's (Hydra's) override syntax: null, true/false, numbers, strings (plain
    when they can be, else quoted; always quoted inside a list), ``[...]`` and ``{key:...}``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if _PLAIN.fullmatch(value) and not in_list else json.dumps(value)
    if isinstance(value, list):
        return f"[{','.join(hydra_value(v, in_list=True) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{hydra_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def override_argument(key: str, value: Any) -> str:
    """One ``dvc exp run -S`` override in DVC's (Hydra's) syntax."""
    return f"{key}={hydra_value(value)}"


def override_arguments(base: dict[str, Any], preset: dict[str, Any],
                       prefix: str = "") -> list[str]:
    """The ``-S`` overrides setting ``preset`` over ``base``: mappings both have are entered key
    by key, anything else set whole (Hydra cannot enter a null); keys ``base`` lacks get ``+``."""
    out = []
    for key, value in preset.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            out += override_arguments(base[key], value, f"{dotted}.")
        else:
            out.append(("" if key in base else "+") + override_argument(dotted, value))
    return out


def resolve(name: str, params_path: str | Path = "params.yaml", runtime: bool = False,
            source: str | Path | None = None) -> tuple[dict[str, Any], list[str]]:
    """The merged, validated params of preset ``name`` (its overrides read from ``source``
    instead of ``presets/<name>.yaml`` when given) and its grid cells; ``runtime``: also check
    that this machine can run it (packages, accelerator)."""
    own = None if source is None else read_params(source)
    merged = merge(read_params(params_path), preset_overrides(name, own=own))
    configs = validate_params(merged, f"{params_path} + {source or f'presets/{name}.yaml'}",
                              runtime)
    return merged, grid_cells(configs["train"])


def command(name: str) -> list[str]:
    """The ``dvc exp run --temp`` command of preset ``name``."""
    args = ["dvc", "exp", "run", "--temp", "-n", name]
    for override in override_arguments(read_params(repo_root() / "params.yaml"),
                                       preset_overrides(name)):
        args += ["-S", override]
    return args


def git(root: Path, *args: str) -> str:
    """The stripped output of ``git <args>`` in ``root`` (fails on a non-zero exit)."""
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


def file_at(root: Path, rev: str, path: str) -> str:
    """The text of ``path`` at git revision ``rev`` (missing: a ``DataError`` naming both)."""
    from rnnsearch.errors import DataError

    try:
        return git(root, "show", f"{rev}:{path}")
    except subprocess.CalledProcessError as err:
        raise DataError(f"{rev} has no {path} ({err.stderr.strip()})") from err


def run_environment(params: dict[str, Any]) -> dict[str, str]:
    """This environment plus a relative ``prepare.mirror``, resolved against the repository
    root, in ``RNNSEARCH_CORPORA`` (unless set): the temporary copy would resolve it wrongly."""
    from rnnsearch.data.corpora import MIRROR_ENV

    env = dict(os.environ)
    from rnnsearch.config.prepare import PrepareConfig

    mirror = section(params, PrepareConfig, "prepare").mirror
    if mirror and not env.get(MIRROR_ENV) and not Path(mirror).expanduser().is_absolute():
        env[MIRROR_ENV] = str((repo_root() / mirror).resolve())
    return env


def branch(name: str) -> str:
    """The git branch that keeps preset ``name``'s results: ``preset/<name>``."""
    return f"preset/{name}"


def require_branch(root: Path, ref: str, advice: str) -> None:
    """Refuse, with ``advice``, a git branch ``ref`` that ``root`` does not have."""
    if not has_branch(root, ref):
        raise ConfigError(f"no git branch '{ref}': {advice}")


def trained_cell(name: str, cell: str) -> tuple[Path, str]:
    """The repository root and branch of preset ``name``, refused unless it trained ``cell``."""
    root, ref = repo_root(), branch(check_name(name))
    require_branch(root, ref, f"run it first (make experiment NAME={name} PARAMS=..., or make "
                              f"preset NAME={name})")
    cells = branch_cells(root, ref)
    if cell not in cells:
        raise ConfigError(f"{ref} trained no cell '{cell}' (its cells: {', '.join(cells)})")
    return root, ref


def fetch_cell(root: Path, rev: str, cell: str, label: str) -> Path:
    """Fetch ``cell``'s model, vocabularies and params of revision ``rev`` from the DVC cache
    into ``.cache/experiments/<label>/`` (:func:`rnnsearch.experiment_files.fetch`)."""
    from rnnsearch.experiment_files import fetch

    return fetch(root, yaml.safe_load(file_at(root, rev, "dvc.lock")),
                 file_at(root, rev, "params.yaml") + "\n", cell, label)


def shell_line(args: Sequence[str]) -> str:
    """``args`` as one line to paste into a shell."""
    return shlex.join(args)


def run(names: Sequence[str], params: Sequence[dict[str, Any]], dry: bool = False) -> int:
    """Run presets ``names`` (merged ``params``) in order, each as a temporary experiment
    promoted to the branch :func:`branch` (``dvc exp branch``) and exported; ``dry``: only
    print the commands. A stage that an earlier run made with the same code, data and params
    (this chain's, or any other) is restored from DVC's run cache, not run again. Returns an
    exit status."""
    root = repo_root()
    for name, merged in zip(names, params):
        steps = [command(name), ["git", "branch", "-D", "-q", branch(name)],
                 ["dvc", "exp", "branch", name, branch(name)]]
        for step in steps:
            print(shell_line(step), flush=True)
            if dry or (step[1] == "branch" and not has_branch(root, branch(name))):
                continue
            status = subprocess.call(step, cwd=root, env=run_environment(merged))
            if status:
                return status
        if not dry:
            exported(name)
    return 0


def has_branch(root: Path, ref: str) -> bool:
    """True when ``root`` has the git branch ``ref``."""
    return subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                          cwd=root, capture_output=True).returncode == 0


def exported(name: str) -> None:
    """:func:`export` preset ``name`` and say where its report is."""
    folder = export(name).relative_to(repo_root())
    print(f"preset '{name}': its report (from the branch {branch(name)}) is in {folder}/"
          f"README.md; 'dvc exp show' lists it; its test translations: dvc get . "
          f"data/translations --rev {branch(name)}")


# What export copies from a preset's branch: its report, and the metrics and params it came from.
REPORT_PATHS = ("reports/README.md", "reports/results", "metrics", "params.yaml")


def export_folder(name: str) -> Path:
    """Where :func:`export` puts preset ``name``'s report: ``reports/presets/<name>/``."""
    return repo_root() / "reports" / "presets" / name


def changed_params(root: Path, ref: str) -> list[str]:
    """``key=value`` for every params leaf the commit ``ref`` changed against its parent."""
    def params_at(rev: str) -> dict[str, Any]:
        where = f"{rev}:params.yaml"
        return flatten(parse_params(git(root, "show", where), where))

    before, after = params_at(f"{ref}^"), params_at(ref)
    return [override_argument(key, value) for key, value in after.items()
            if before.get(key, object()) != value]


def provenance(name: str, root: Path, ref: str, beside: bool = False) -> str:
    """The paragraph heading an exported report: which run made it, how to rerun it."""
    commit, baseline = (git(root, "rev-parse", "--short", rev) for rev in (ref, f"{ref}^"))
    overrides = ", ".join(f"`{o}`" for o in changed_params(root, ref)) or "none"
    compared = (" Beside the default run: [beside_default.md]"
                "(beside_default.md)." if beside else "")
    return (f"> Preset `{name}`: the report of the git branch `{branch(name)}` (experiment "
            f"commit `{commit}`, run on `{baseline}`), copied here by `python -m rnnsearch.presets "
            f"export {name}`. Params changed against the default run: {overrides}. Run it again "
            f"with `make preset NAME={name}`. Its `metrics/` and `params.yaml` are beside this "
            f"file.{compared}\n\n")


def export(name: str) -> Path:
    """Replace :func:`export_folder` atomically with preset ``name``'s report from its branch,
    headed by :func:`provenance`, and redo its comparisons (default run, earlier presets)."""
    from rnnsearch.data.textio import atomic_dir
    from rnnsearch.reporting.write import REGENERATE, regenerate_line

    root, ref = repo_root(), branch(check_name(name))
    require_branch(root, ref, f"run the preset first (make preset NAME={name})")
    others = compared_presets(export_folder(name))
    files = git(root, "ls-tree", "-r", "--name-only", ref, "--", *REPORT_PATHS).splitlines()
    if git(root, "ls-tree", "--name-only", ref, "--", "dvc.lock"):
        files = own_files(files, yaml.safe_load(git(root, "show", f"{ref}:dvc.lock")),
                          branch_cells(root, ref))
    with atomic_dir(export_folder(name)) as folder:
        for path in files:
            content = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=root,
                                     capture_output=True, check=True).stdout
            inside = PurePosixPath(path)
            target = folder / (inside.relative_to("reports") if inside.parts[0] == "reports"
                               else inside)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        beside, *_ = (exported_comparison(name, folder, against) for against in (None, *others))
        index = folder / PurePosixPath(REPORT_PATHS[0]).name
        if index.is_file():
            shown = export_folder(name).relative_to(root)
            page = index.read_text(encoding="utf-8").replace(
                REGENERATE, regenerate_line(shown / "params.yaml", shown / "metrics", shown), 1)
            index.write_text(provenance(name, root, ref, bool(beside.written)) + page,
                             encoding="utf-8")
    return export_folder(name)


def tested_comparison(name: str, folder: Path, against: str | None = None,
                      strict: bool = False) -> Outcome:
    """:func:`significance` then :func:`compare` against ``against`` (None: the default run),
    printing each outcome; ``strict``: a bootstrap that cannot be made raises."""
    print(f"preset '{name}': {significance(name, folder, against, strict)}")
    outcome = compare(name, folder, against)
    print(f"preset '{name}': {outcome.message}")
    return outcome


def exported_comparison(name: str, folder: Path, against: str | None) -> Outcome:
    """:func:`tested_comparison`, an expected failure turned into an outcome saying why."""
    from rnnsearch.errors import ExpectedError
    from rnnsearch.reporting.beside import Outcome

    try:
        return tested_comparison(name, folder, against)
    except ExpectedError as err:
        outcome = Outcome([], f"no comparison with {against or 'the default run'}: {err}")
        print(f"preset '{name}': {outcome.message}")
        return outcome


def compared_presets(folder: Path) -> list[str]:
    """The presets named by ``beside_<other>.md`` in an exported folder (not the default)."""
    return sorted(path.stem.removeprefix("beside_") for path in folder.glob("beside_*.md")
                  if path.stem != "beside_default")


CELL_FILE = re.compile(r".+-\d+")     # a file named after a grid cell: <model>-<max length>


def branch_cells(root: Path, ref: str) -> list[str]:
    """The grid cells of the params at git revision ``ref``."""
    from rnnsearch.config.base import from_dict
    from rnnsearch.config.train import TrainConfig

    params = parse_params(git(root, "show", f"{ref}:params.yaml"), f"{ref}:params.yaml")
    return grid_cells(from_dict(TrainConfig, params.get("train", {}), "train"))


def own_files(files: list[str], lock: dict[str, Any], cells: Sequence[str]) -> list[str]:
    """The branch's ``files`` its own run wrote: all outside ``metrics/``; inside, the outputs
    in ``lock`` (files named after a cell only for ``cells``). The rest came with the copied
    workspace (DVC keeps lock entries of cells the experiment never ran)."""
    outs = {out["path"] for stage in lock.get("stages", {}).values()
            for out in stage.get("outs", [])}

    def own(path: str) -> bool:
        if not path.startswith("metrics/"):
            return True
        stem = PurePosixPath(path).stem
        written = path in outs or any(path.startswith(f"{out}/") for out in outs)
        return written and (not CELL_FILE.fullmatch(stem) or stem in cells)
    return [path for path in files if own(path)]


def significance(name: str, folder: Path, against: str | None = None,
                 strict: bool = False) -> str:
    """Write ``significance.json`` (``significance_<against>.json``): per differing shared cell,
    the paired bootstrap of the committed ``report.method`` translations against the default
    run's (or preset ``against``'s), and of the attention AER; returns what it did. Nothing to
    test: the file says why. Branches or cache missing: nothing written, and ``strict`` raises."""
    from rnnsearch.config.evaluate import EvaluateConfig
    from rnnsearch.data.textio import write_json
    from rnnsearch.errors import ExpectedError
    from rnnsearch.evaluation.cell import TestSet, compare_systems
    from rnnsearch.reporting.beside import differing_cells, unshared_test_set

    root, ref = repo_root(), branch(name)
    label, base_ref = against or "default", "HEAD" if against is None else branch(against)
    params = read_params(root / "params.yaml")
    cfg = section(params, EvaluateConfig, "evaluate")
    method = report_method(params)
    baseline, preset = exported_run(label, root), exported_run(name, root, folder)
    cells = differing_cells(baseline, preset, method)
    target = folder / baseline.significance_file
    untested = f"no paired bootstrap against {baseline.title}"
    record = {"method": method, "samples": cfg.bootstrap_samples, "seed": cfg.bootstrap_seed,
              "baseline": label}
    reason = ("no cell to test" if not cells or cfg.bootstrap_samples == 0
              else unshared_test_set(baseline, preset))
    if reason is not None:
        write_json(target, {**record, "untested": reason, "cells": {}})
        return f"{untested}: {reason}"
    try:
        for rev, run in ((ref, name), (base_ref, label)):
            require_branch(root, rev, f"run the preset first (make preset NAME={run})")
        test = TestSet.load(root / "data" / "prepared", root / "data" / "tokenized", cfg.buckets)
        runs = committed_translations(root, (base_ref, ref), cells, method, len(test.refs))
    except ExpectedError as err:
        if strict:
            raise
        return f"{untested}: {err}"
    tests = {cell: compare_systems(runs[ref][cell], runs[base_ref][cell], label, test, cfg)
             for cell in cells}
    seeds = shared_seeds(baseline, preset)
    if len(seeds) > 1:
        seeded = replicate_tests(root, (ref, base_ref), cells, seeds, method, test, cfg)
        for cell, result in seeded.items():
            tests[cell]["replicates"] = result
    attention = [cell for cell in cells if has_attention(baseline, cell)
                 and has_attention(preset, cell)]
    try:
        for cell, aer in aer_tests(root, ((ref, name), (base_ref, label)), attention,
                                   cfg.bootstrap_samples, cfg.bootstrap_seed).items():
            tests[cell]["aer"] = aer
        alignments = f"; attention AER of {', '.join(attention)} too" if attention else ""
    except ExpectedError as err:
        alignments = f"; no paired bootstrap of attention AER: {err}"
    write_json(target, {**record, "baseline_commit": git(root, "rev-parse", base_ref),
                        "preset_commit": git(root, "rev-parse", ref), "cells": tests})
    return (f"paired bootstrap against {baseline.title} ({', '.join(cells)}) in {target.name}"
            f"{alignments}")


def shared_seeds(baseline: Run, preset: Run) -> list[int]:
    """The replicates' seeds both runs trained (``replicates.seeds``), ``train.seed`` first;
    empty when either run has none or their first seeds differ."""
    first, second = ((run.inputs.replicates or {}).get("seeds", []) for run in (baseline, preset))
    if not first or not second or first[0] != second[0]:
        return []
    return [seed for seed in first if seed in second]


def replicate_tests(root: Path, revs: tuple[str, str], cells: Sequence[str], seeds: list[int],
                    method: str, test: Any, cfg: Any) -> dict[str, dict[str, Any]]:
    """Per cell, the replicate-aware paired bootstrap (:mod:`rnnsearch.evaluation.replicates`)
    of the first revision's replicates against the second's, on the ``seeds`` both trained."""
    from rnnsearch.evaluation.replicates import system_test
    from rnnsearch.tracking import replicate_cell

    names = {cell: [cell] + [replicate_cell(cell, seed) for seed in seeds[1:]] for cell in cells}
    runs = committed_translations(root, revs, [name for group in names.values()
                                               for name in group], method, len(test.refs))
    return {cell: {**system_test([runs[revs[0]][name] for name in group],
                                 [runs[revs[1]][name] for name in group], test, cfg),
                   "seeds": seeds} for cell, group in names.items()}


def has_attention(run: Run, cell: str) -> bool:
    """Whether ``run``'s align_attention metrics scored ``cell``'s attention."""
    return bool(((run.inputs.align_attention or {}).get("cells", {}).get(cell) or {})
                .get("attention"))


def aer_tests(root: Path, runs: tuple[tuple[str, str], tuple[str, str]], cells: Sequence[str],
              samples: int, seed: int) -> dict[str, dict[str, Any]]:
    """``{cell: {variant: test}}``: the paired bootstrap of attention AER on the gold set, the
    first of ``runs`` (``(revision, label)``) against the second, read from the DVC cache."""
    from rnnsearch.alignment.aer import aer_of_counts, paired_bootstrap_aer
    from rnnsearch.errors import DataError

    system, baseline = (attention_counts_at(root, rev, label, cells) for rev, label in runs)
    tests: dict[str, dict[str, Any]] = {}
    for cell in cells:
        for variant in [v for v in system[cell] if v in baseline[cell]]:
            ours, theirs = system[cell][variant], baseline[cell][variant]
            if ours.shape != theirs.shape:
                raise DataError(f"the two runs' gold sets differ ({len(ours)} and {len(theirs)} "
                                f"sentences)")
            tests.setdefault(cell, {})[variant] = {
                "n": len(ours), "p_value": paired_bootstrap_aer(ours, theirs, samples, seed),
                "aer": float(aer_of_counts(ours.sum(0))),
                "baseline_aer": float(aer_of_counts(theirs.sum(0)))}
    return tests


def attention_counts_at(root: Path, rev: str, label: str, cells: Sequence[str],
                        layer: int | None = None) -> dict[str, dict[str, Any]]:
    """``{cell: {variant: counts}}``: per-sentence AER counts of the cells' attention as
    revision ``rev`` trained them; ``layer``: read from that decoder layer instead."""
    import dvc.api
    from dvc.exceptions import DvcException
    from dvc_data.index.index import DataIndexError

    from rnnsearch.alignment.attention import attention_counts
    from rnnsearch.alignment.corpus import GoldCorpus
    from rnnsearch.config.align import AlignConfig
    from rnnsearch.config.prepare import PrepareConfig
    from rnnsearch.data.subword import TextUnits
    from rnnsearch.data.vocab import Vocabulary
    from rnnsearch.errors import DataError
    from rnnsearch.experiment_files import TOKENIZED, model_path
    from rnnsearch.models.seq2seq import load_model

    params = parse_params(file_at(root, rev, "params.yaml"), f"{rev}:params.yaml")
    cfg = section(params, AlignConfig, "align")
    source_language = section(params, PrepareConfig, "prepare").src_lang
    gold_path = "data/align/gold.json"
    try:
        with dvc.api.open(gold_path, repo=str(root), rev=rev) as handle:
            gold = GoldCorpus.from_records(json.load(handle))
    except (DvcException, OSError) as err:
        raise DataError(f"{gold_path} at {rev}: not in the DVC cache here "
                        f"({type(err).__name__}: {err})") from err
    counts = {}
    for cell in cells:
        folder = fetch_cell(root, rev, cell, label)
        tokenized = folder / TOKENIZED
        vocabs = {side: Vocabulary.load(tokenized / f"vocab.{side}.txt") for side in ("src", "tgt")}
        model = load_model(folder / model_path(cell))
        if layer is not None:
            model.decoder.read_attention_from(layer)
        counts[cell] = attention_counts(model, gold, vocabs, source_language,
                                        cfg.attention_threshold, TextUnits.read(tokenized),
                                        cfg.batch_size)
    return counts


def layer_aers(name: str, cell: str) -> list[dict[str, float]]:
    """Per decoder layer, first first: the AER of Transformer ``cell``'s cross-attention."""
    from rnnsearch.alignment.aer import aer_of_counts
    from rnnsearch.config.base import from_dict
    from rnnsearch.config.train import TrainConfig

    root, ref = trained_cell(name, cell)
    params = parse_params(file_at(root, ref, "params.yaml"), f"{ref}:params.yaml")
    model = from_dict(TrainConfig, params.get("train", {}), "train").model_config(
        cell.rpartition("-")[0])
    if model.model != "transformer":
        raise ConfigError(f"{cell} of {ref} is a '{model.model}' model: only a Transformer has "
                          f"layers of attention to choose from")
    return [{variant: float(aer_of_counts(counts.sum(0))) for variant, counts in
             attention_counts_at(root, ref, name, [cell], layer)[cell].items()}
            for layer in range(model.decoder_layers)]


def committed_translations(root: Path, revs: Sequence[str], cells: Sequence[str], method: str,
                           sentences: int) -> dict[str, dict[str, list[str]]]:
    """``{rev: {cell: lines}}`` of ``<method>.detok.txt`` from the DVC cache; a missing file or
    a wrong line count raises :class:`~rnnsearch.errors.DataError` naming it."""
    import dvc.api
    from dvc.exceptions import DvcException
    from dvc_data.index.index import DataIndexError

    from rnnsearch.data.textio import decode_lines
    from rnnsearch.errors import DataError

    runs: dict[str, dict[str, list[str]]] = {}
    for rev, cell in ((rev, cell) for rev in revs for cell in cells):
        path = f"data/translations/{cell}/{method}.detok.txt"
        try:
            with dvc.api.open(path, repo=str(root), rev=rev, mode="rb") as handle:
                lines = list(decode_lines(handle, f"{path} at {rev}"))   # as evaluate reads it
        except (DvcException, DataIndexError, OSError) as err:
            raise DataError(f"{path} at {rev}: not in the DVC cache here "
                            f"({type(err).__name__}: {err})") from err
        if len(lines) != sentences:
            raise DataError(f"{path} at {rev}: {len(lines)} lines, the test set {sentences}")
        runs.setdefault(rev, {})[cell] = lines
    return runs


def compare(name: str, folder: Path | None = None, against: str | None = None) -> Outcome:
    """Write ``beside_default.{md,tex,png}`` (``beside_<against>``) in the exported folder: the
    shared cells beside the default run's ``metrics/`` (or preset ``against``'s), with the
    p-values of :func:`significance` where present. Reads metrics files only."""
    from rnnsearch.config.evaluate import EvaluateConfig
    from rnnsearch.data.textio import read_json
    from rnnsearch.reporting.beside import BESIDE, write_beside

    root = repo_root()
    folder = folder or export_folder(check_name(name))
    preset = exported_run(name, root, folder)
    baseline = exported_run(against or "default", root)
    params = read_params(root / "params.yaml")
    method = report_method(params)
    fewest = section(params, EvaluateConfig, "evaluate").min_bucket_sentences
    tests = folder / baseline.significance_file
    tests = read_json(tests)["cells"] if tests.is_file() else None
    return write_beside(baseline, preset, folder, method, fewest, tests,
                        f"beside_{against}" if against else BESIDE)


COMPARISONS = Path("reports/presets/comparisons.yaml")   # the comparisons DVC tracks
PIPELINE = Path("reports/presets/dvc.yaml")              # their stages, compare@<key>


def comparison_entry(name: str, against: str | None) -> tuple[str, dict[str, str]]:
    """The key (``<name>-vs-<against or default>``) and entry of a comparison in
    :data:`COMPARISONS`: what the stage reads and writes."""
    baseline = against or "default"
    return f"{name}-vs-{baseline}", {
        "preset": name, "against": baseline,
        "baseline": "metrics" if against is None else f"reports/presets/{against}/metrics",
        "tests": "significance.json" if against is None else f"significance_{against}.json"}


def track(name: str, against: str | None) -> tuple[str, str | None]:
    """Add the comparison to :data:`COMPARISONS` if missing; returns its key and the file's
    previous text (None when the entry was there)."""
    from rnnsearch.data.textio import atomic_write_text

    path = repo_root() / COMPARISONS
    key, entry = comparison_entry(name, against)
    if (read_params(path).get("comparisons") or {}).get(key) == entry:
        return key, None
    before = path.read_text(encoding="utf-8")
    line = yaml.safe_dump({key: entry}, sort_keys=False, default_flow_style=None, width=200)
    atomic_write_text(path, f"{before}  {line}")
    return key, before


def require_comparable(name: str, against: str | None) -> None:
    """Refuse a comparison with no table: no cell differs, or the test sets may differ."""
    from rnnsearch.reporting.beside import differing_cells, unshared_test_set

    root = repo_root()
    preset = exported_run(check_name(name), root)
    baseline = exported_run(check_name(against) if against else "default", root)
    method = report_method(read_params(root / "params.yaml"))
    reason = ("no cell of the two runs differs" if not differing_cells(baseline, preset, method)
              else unshared_test_set(baseline, preset))
    if reason is not None:
        raise ConfigError(f"preset '{name}' is not compared with {baseline.title}: {reason}")


def dispatch(name: str, against: str | None) -> int:
    """``compare NAME [--against OTHER]``: track the comparison, run its DVC stage
    ``compare@<key>``; on failure a new entry is taken out again."""
    from rnnsearch.data.textio import atomic_write_text
    from rnnsearch.dvc_outputs import restore_outputs

    require_comparable(name, against)
    key, before = track(name, against)
    stage = f"{PIPELINE.as_posix()}:compare@{key}"
    status = subprocess.call(["dvc", "repro", "--force", "--single-item", stage], cwd=repo_root())
    if status:
        if before is not None:
            atomic_write_text(repo_root() / COMPARISONS, before)
        else:                   # DVC deleted the stage's outputs before it ran: put them back
            restore_outputs(stage, repo_root())
        raise ConfigError(f"the comparison compare@{key} was not made (DVC's output above says "
                          f"why); every file under reports/presets/ is as it was")
    return 0


def report_method(params: dict[str, Any]) -> str:
    """The system the report's tables show (``report.method``), as params.yaml sets it."""
    from rnnsearch.config.report import ReportConfig

    return section(params, ReportConfig, "report").method


def section(params: dict[str, Any], cls: type[T], key: str) -> T:
    """Section ``key`` of ``params`` as its validated dataclass (absent: its defaults); a bad
    value is a :class:`ConfigError` naming the key."""
    from rnnsearch.config.base import from_dict

    return from_dict(cls, params.get(key) or {}, key)


def exported_run(label: str, root: Path, folder: Path | None = None) -> Run:
    """The workspace's ``metrics/`` (``label`` "default") or preset ``label``'s exported ones."""
    from rnnsearch.reporting.beside import Run

    if label == "default":
        return Run.load("default", root / "metrics", "metrics/")
    folder = folder or export_folder(check_name(label))
    shown = export_folder(label).relative_to(root).as_posix()
    if not (folder / "metrics").is_dir():
        raise ConfigError(f"{shown}/metrics: not found; export the preset first "
                          f"(python -m rnnsearch.presets export {label})")
    return Run.load(label, folder / "metrics", f"{shown}/metrics/")


def check_adoptable(name: str, source: str | Path) -> None:
    """Refuse an overrides file ``source`` that is missing, not a YAML mapping, or differs from
    an existing preset ``name`` (never overwritten)."""
    source, target = Path(source), preset_path(check_name(name))
    if not source.is_file():
        raise ConfigError(f"{source}: file not found (the params overrides of experiment "
                          f"'{name}')")
    read_params(source)                                  # a YAML mapping, or an error naming it
    if target.is_file() and target.read_bytes() != source.read_bytes():
        raise ConfigError(f"{target}: a different preset '{name}' exists; choose another NAME, "
                          f"or edit {target} itself")


def adopt(name: str, source: str | Path) -> Path:
    """Copy the overrides file ``source`` to ``presets/<name>.yaml`` (your own experiment),
    once :func:`check_adoptable` and the params' validation have passed."""
    check_adoptable(name, source)
    source, target = Path(source), preset_path(name)
    text = source.read_bytes()
    if not target.is_file():
        target.write_bytes(text)
        print(f"experiment '{name}': {source} copied to {target.relative_to(repo_root())} "
              f"(commit it to keep the experiment's definition)")
    return target


def translate(name: str, cell: str, options: list[str]) -> int:
    """Translate with ``cell`` of preset ``name``, fetched from the DVC cache; ``options``: the
    translation command line's (input file, --method, ...). The command line runs as a process
    of its own, so that the comparisons, which share this module, do not depend on decoding."""
    from rnnsearch.experiment_files import TOKENIZED, model_path

    root, ref = trained_cell(name, cell)
    folder = fetch_cell(root, ref, cell, name)
    return subprocess.call([sys.executable, "-m", "rnnsearch.decoding.cli", *options,
                            "--model", str(folder / model_path(cell)),
                            "--vocab-dir", str(folder / TOKENIZED),
                            "--params", str(folder / "params.yaml")])


@entry_point("presets")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.presets", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["check", "show", "run", "export", "compare",
                                           "bootstrap", "translate", "layers"],
                        help="compare NAME [--against OTHER]: its comparison's DVC stage "
                             "(reports/presets/dvc.yaml); bootstrap: what that stage runs; "
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
    if args.action == "bootstrap":
        tested_comparison(args.name, export_folder(check_name(args.name)), against, strict=True)
        return 0
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


if __name__ == "__main__":
    sys.exit(main())
