"""Two runs compared: paired bootstraps of committed translations (replicates too; attention AER
where both attend) into ``significance*.json`` (:func:`significance`), then the beside page
(:func:`compare`); both run by the ``compare`` stage (:mod:`rnnsearch.stages.compare`), export."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from rnnsearch.config.base import parse_params, read_params
from rnnsearch.config.repository import check_name, repo_root
from rnnsearch.runs.branches import (branch, export_folder, exported_run, fetch_cell, file_at,
                                     git, report_method, require_branch, section)

if TYPE_CHECKING:
    from rnnsearch.reporting.beside import Outcome, Run



def tested_comparison(name: str, folder: Path, against: str | None = None,
                      strict: bool = False) -> Outcome:
    """:func:`significance` then :func:`compare` against ``against`` (None: the default run),
    printing each outcome; ``strict``: a bootstrap that cannot be made raises."""
    print(f"preset '{name}': {significance(name, folder, against, strict)}")
    outcome = compare(name, folder, against)
    print(f"preset '{name}': {outcome.message}")
    return outcome


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

    from rnnsearch.alignment.attention import attention_counts
    from rnnsearch.alignment.corpus import GoldCorpus
    from rnnsearch.config.align import AlignConfig
    from rnnsearch.config.prepare import PrepareConfig
    from rnnsearch.data.subword import TextUnits
    from rnnsearch.data.vocab import Vocabulary
    from rnnsearch.errors import DataError
    from rnnsearch.runs.cache import TOKENIZED, model_path
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
    """Write ``beside_default.{md,tex,png}`` (``beside_<against>``) in the exported folder, with
    :func:`significance`'s p-values where present; reads metrics files only."""
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
