"""End-to-end: the real DVC pipeline in a throw-away copy of the repository, on tiny params."""
from __future__ import annotations

import json
import re
import shlex
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import yaml

from conftest import make_project, run_in, run_script
from rnnsearch.reporting.write import REGENERATE, regenerate_line
from test_own_corpus import mirror_lines, sha256, write_text
from test_replicates import resampled_p

pytestmark = pytest.mark.slow

# Tiny values for every stage, merged over the repository's params.yaml.
TINY = {
    "prepare": {"corpus": "multi30k", "src_lang": "en", "tgt_lang": "fr", "download": False,
                "sizes": {"train": 800, "dev": 60, "test": 60}, "test_buckets": [],
                "test_per_bucket": 0},
    "tokenize": {"vocab_size_src": 400, "vocab_size_tgt": 400},
    "embed": {"vector_size": 24, "epochs": 2, "plot_words": 40},
    "pretrain_lm": {"embedding_size": 24, "hidden_size": 24, "batch_size": 8, "max_steps": 20,
                    "max_minutes": 2.0, "val_every": 10, "checkpoint_every": 10,
                    "gradient_flow": {"max_k": 8, "samples": 2}},
    "train": {"grid": {"models": ["encdec", "search", "transformer"], "max_lens": [20]},
              "base_model": {"embedding_size": 24, "hidden_size": 24, "attention_size": 24,
                             "output_size": 24},
              "models": {"transformer": {"model": "transformer", "encoder_layers": 1,
                                         "decoder_layers": 1, "heads": 2, "feedforward_size": 48}},
              "data": {"batch_size": 16, "dev_bleu_sentences": 20},
              "budget": {"max_steps": 24, "max_minutes": 3.0, "val_every_steps": 12},
              "init": {"embeddings": True}},
    "translate": {"search": {"beam_size": 3, "nbest": 2}, "speed_sentences": 4},
    "evaluate": {"bootstrap_samples": 50, "search_error_sentences": 20,
                 "search_error_wide_beam": 6},
    "align": {"iterations": 3},
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A git copy of the tracked project files (no data, no outputs), with tiny params."""
    return make_project(tmp_path_factory.mktemp("project"), TINY)


@pytest.fixture(scope="module")
def default_run(project) -> Path:
    """The project after ``dvc repro``, its run committed (what a user has after a full run)."""
    run_in(["dvc", "repro"], project)
    run_in(["git", "add", "metrics", "plots", "reports", "dvc.lock", "data/code"], project)
    run_in(["git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", "commit", "-qm",
            "default run"], project)
    return project


def test_repro_whole_pipeline_then_up_to_date(default_run):
    project = default_run
    metrics = json.loads((project / "metrics/tokenize.json").read_text())
    assert metrics["pairs"]["train"] == 800
    for cell in ("encdec-20", "search-20", "transformer-20"):
        assert (project / f"data/models/{cell}/model.pt").is_file()
        assert json.loads((project / f"metrics/eval/{cell}.json").read_text())
    report = (project / "reports/README.md").read_text()
    assert "| Transformer-20 |" in report                   # a Table 1 row of its own
    assert "Search errors and model errors" in report       # the search_error cells' table
    errors = json.loads((project / "metrics/search_error/transformer-20.json").read_text())
    assert errors["sentences"] == 20 and errors["wide_beam"] == 6
    aligned = json.loads((project / "metrics/align_attention.json").read_text())["cells"]
    assert aligned["transformer-20"]["attention"] and aligned["transformer-20"]["scores"]
    check_alignment_outputs(project)
    again = run_in(["dvc", "repro"], project)
    assert "up to date" in again.stdout
    shown = run_in(["dvc", "metrics", "show", "--json"], project).stdout
    for name in ("metrics/summary/search-20.json", "bleu", "bleu_no_unk", "dev_ppl", "test_ppl"):
        assert name in shown, name      # the headline numbers (metrics/summary/, the report's)
    plots = run_in(["dvc", "plots", "show", "--json"], project).stdout
    assert "bleu_by_length" in plots



@pytest.fixture(scope="module")
def replicated(default_run, tmp_path_factory) -> tuple[Path, str]:
    """A copy of the committed tiny run (its DVC cache and MLflow store too) given two
    replicates per system (``replicates.seeds: [2]``) for the two recurrent cells, after
    ``dvc repro report``: the copy and what the repro printed. Taken before the tests below
    train anything else."""
    project = tmp_path_factory.mktemp("replicated") / "project"
    shutil.copytree(default_run, project, symlinks=True)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["train"]["grid"]["models"] = ["encdec", "search"]
    params["replicates"] = {"seeds": [2]}
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return project, run_in(["dvc", "repro", "report"], project).stdout


def test_replicates_are_trained_evaluated_and_reported(replicated):
    """Only the replicates are trained (the grid's cells come from the run being extended);
    the summary's spread and replicate-aware p, Table 1's mean ± sd, the per-seed table and
    MLflow's tags are each checked against values computed another way."""
    project, ran = replicated
    trained = sorted(line.split("'")[1] for line in ran.splitlines()
                     if line.startswith("Running stage 'train"))
    assert trained == ["train_seed@encdec-20-2", "train_seed@search-20-2"], ran
    trained = json.loads((project / "metrics/train/search-20-seed2.json").read_text())
    assert (trained["cell"], trained["system"], trained["seed"]) == ("search-20-seed2",
                                                                    "search-20", 2)
    first = json.loads((project / "metrics/eval/search-20.json").read_text())
    second = json.loads((project / "metrics/eval/replicates/search-20-seed2.json").read_text())
    summary = json.loads((project / "metrics/eval/replicates/summary.json").read_text())
    assert summary["seeds"] == [1234, 2]
    system = summary["systems"]["search-20"]
    assert system["cells"] == ["search-20", "search-20-seed2"]
    assert system["baseline"] == "encdec-20"
    values = [first["systems"]["beam"]["all"]["bleu"], second["systems"]["beam"]["all"]["bleu"]]
    beam = system["methods"]["beam"]
    assert beam["all"] == {"mean": round(statistics.fmean(values), 2),
                           "sd": round(statistics.stdev(values), 2), "n": 2, "values": values}
    table = (project / "reports/results/table1.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| RNNsearch-20 |"))
    assert f"| {beam['all']['mean']:.2f} ± {beam['all']['sd']:.2f} |" in row
    seeds_table = (project / "reports/results/table1_seeds.md").read_text()
    assert "| RNNsearch-20 | 2 | search-20-seed2 |" in seeds_table
    check_replicate_p(project, beam["vs_baseline"]["all"])
    check_mlflow_tags(project)


def check_replicate_p(project: Path, test: dict) -> None:
    """The summary's p recomputed the slow way from the translation files."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    refs = (project / "data/prepared/test.tgt").read_text().splitlines()

    def hyps(cell: str) -> list[str]:
        return (project / f"data/translations/{cell}/beam.detok.txt").read_text().splitlines()
    expected = resampled_p([hyps("search-20"), hyps("search-20-seed2")],
                           [hyps("encdec-20"), hyps("encdec-20-seed2")], refs,
                           params["evaluate"]["bootstrap_samples"],
                           params["evaluate"]["bootstrap_seed"])
    assert test["p_value"] == expected and test["replicates"] == 2


def check_mlflow_tags(project: Path) -> None:
    """Each replicate's training run: named after it, tagged with its system and seed."""
    client = mlflow.MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              "tags.system = 'search-20' and tags.stage = 'train'")
    assert sorted((r.data.tags["seed"], r.data.tags["mlflow.runName"]) for r in runs) == \
        [("1234", "search-20"), ("2", "search-20-seed2")]

def test_a_decoding_only_experiment_trains_nothing(default_run):
    """``dvc exp run -S translate.search.beam_size=4`` after the committed run (a temporary
    copy, the workspace left alone): every train cell, the language model and the data stages
    are reused from DVC's cache; translate and what reads it run."""
    done = run_in(["dvc", "exp", "run", "--temp", "-n", "beam3", "-S",
                   "translate.search.beam_size=4"], default_run)
    ran = done.stdout
    # each stage kept its uncached outputs for a later restore, in the experiment's copy
    assert "could not keep a copy" not in done.stdout + done.stderr, done.stderr[-3000:]
    running = {line.split("'")[1] for line in ran.splitlines() if line.startswith("Running")}
    assert {"translate@search-20", "evaluate"} <= running, ran
    assert not {stage for stage in running if stage.startswith(
        ("train@", "pretrain_lm", "prepare", "tokenize", "embed", "align"))
                } - {"align_attention"}, running
    assert "beam3" in run_in(["dvc", "exp", "list", "--name-only"], default_run).stdout
    run_in(["dvc", "exp", "remove", "beam3"], default_run)
    assert run_in(["git", "status", "--porcelain"], default_run).stdout == ""


def test_an_edit_reruns_only_the_cells_whose_code_it_changes(default_run):
    """After the committed tiny run: first a docstring and a comment edit to every module of
    beam search's and training's, for which ``dvc repro`` runs the code records only; then one
    code edit to the Transformer and one to beam search. The records are written again
    (seconds): the Transformer's model record changes, the recurrent models' stay byte for
    byte. DVC would then rerun the Transformer's train cell, every translate cell and what
    follows them (evaluate, report), and no recurrent model's train cell nor the language model.
    (The run is put back as it was afterwards.)"""
    from dvc.repo import Repo
    from networkx import ancestors

    project = default_run
    edited = [project / "src/rnnsearch" / name for name in ("models/transformer.py",
                                                            "decoding/beam.py",
                                                            "training/run.py")]
    records = {model: project / f"data/code/models/{model}.json"
               for model in ("encdec", "search", "transformer")}
    kept = {path: path.read_bytes() for path in [*edited, *records.values(),
                                                 project / "dvc.lock"]}
    try:
        for path in edited:                 # a docstring and a comment: nothing else reruns
            text = path.read_text(encoding="utf-8")
            path.write_text(text.replace('"""', '"""Edited. ', 1) + "# a note\n",
                            encoding="utf-8")
        quiet = run_in(["dvc", "repro"], project).stdout
        ran = {line.split("'")[1] for line in quiet.splitlines() if line.startswith("Running")}
        assert ran and all(stage == "code" or stage.startswith("model_code@") for stage in ran), ran
        for path in edited[:2]:
            path.write_text(path.read_text(encoding="utf-8") + "EDITED = 1\n", encoding="utf-8")
        run_in(["dvc", "repro", "code", "model_code"], project)
        assert [model for model, path in records.items()
                if path.read_bytes() != kept[path]] == ["transformer"]
        stale = set(json.loads(run_in(["dvc", "status", "--json"], project).stdout))
        with Repo(str(project)) as repo:    # edges run from a stage to the stages it reads
            graph = repo.index.graph
            changed = [stage for stage in graph.nodes if stage.name in stale]
            rerun = {stage.name for stage in changed} | {
                after.name for stage in changed for after in ancestors(graph, stage)}
    finally:
        for path, content in kept.items():       # a new file, never one linked to the cache
            path.unlink(missing_ok=True)
            path.write_bytes(content)
        run_in(["dvc", "repro", "code", "model_code"], project)
        run_in(["git", "reset", "-q"], project)  # DVC's autostage staged the edited dvc.lock
    assert {"train@transformer-20", "translate@search-20", "translate@encdec-20", "evaluate",
            "report"} <= rerun, rerun
    assert not {"pretrain_lm", "train@search-20", "train@encdec-20"} & rerun, rerun
    assert "up to date" in run_in(["dvc", "repro", "--dry"], project).stdout
    assert run_in(["git", "status", "--porcelain"], project).stdout == ""


def test_preset_run_leaves_the_committed_default_run_intact(default_run):
    """A report-only preset after the committed default run (the report of the greedy outputs):
    the workspace's params, lock, metrics, plots and report are untouched, only the report stage
    runs in the experiment (every model, translation and score is the default run's, copied into
    its temporary copy), and the preset's results are an experiment (``dvc exp show``) and the
    branch ``preset/<name>``. (Here rather than in test_presets.py, so that the suite runs the
    tiny pipeline once for both.)"""
    root = default_run
    (root / "presets" / "greedy.yaml").write_text("report:\n  method: greedy\n")
    ran = run_in([sys.executable, "-m", "rnnsearch.presets", "run", "greedy"], root)
    assert "Running stage 'report'" in ran.stdout
    assert ran.stdout.count("Running stage") == 1, ran.stdout
    for stage in ("prepare", "pretrain_lm", "train@search-20", "translate@search-20",
                  "evaluate"):                                  # copied into the temp copy
        assert f"Stage '{stage}' didn't change" in ran.stdout, stage
    status = run_in(["git", "status", "--porcelain", "metrics", "plots", "reports", "params.yaml",
                     "dvc.lock"], root).stdout
    assert status == "?? reports/presets/\n"          # the preset's report, exported (below)
    assert "greedy" in run_in(["dvc", "exp", "show", "--json"], root).stdout
    kept = yaml.safe_load(run_in(["git", "show", "preset/greedy:params.yaml"], root).stdout)
    assert kept["report"]["method"] == "greedy"
    report = run_in(["git", "show", "preset/greedy:reports/README.md"], root).stdout
    assert "Table" in report
    check_exported_report(root, "greedy", report)


def test_a_chain_of_presets_decodes_again_with_the_model_the_one_before_trained(default_run):
    """``presets run A B``: A retrains RNNsearch-20 (another seed), B extends A and changes only
    the beam's stopping rule. Each is a temporary experiment of its own, and B trains nothing:
    DVC's run cache gives it A's model, decoded again. The workspace's run is untouched."""
    root = default_run
    (root / "presets/reseeded.yaml").write_text(
        "train:\n  grid: {models: [search], max_lens: [20]}\n  seed: 7\n")
    (root / "presets/reseeded_bound.yaml").write_text(
        "extends: reseeded\ntranslate:\n  search: {stop: bound}\n")
    before = workspace_results(root)
    ran = run_in([sys.executable, "-m", "rnnsearch.presets", "run", "reseeded",
                  "reseeded_bound"], root)
    assert ran.stdout.count("Running stage 'train@search-20'") == 1, ran.stdout
    second = ran.stdout.split("Ran experiment(s): reseeded\n")[1]
    assert "Stage 'train@search-20' is cached - skipping run" in second, second
    assert "Running stage 'translate@search-20'" in second
    locks = [yaml.safe_load(run_in(["git", "show", f"{rev}:dvc.lock"], root).stdout)
             for rev in ("preset/reseeded", "preset/reseeded_bound", "HEAD")]
    models = [[out["md5"] for out in lock["stages"]["train@search-20"]["outs"]
               if out["path"].endswith("model.pt")] for lock in locks]
    assert models[0] == models[1] != models[2]             # A's model, not the default run's
    bound = yaml.safe_load((root / "reports/presets/reseeded_bound/params.yaml").read_text())
    assert bound["translate"]["search"]["stop"] == "bound" and bound["train"]["seed"] == 7
    assert workspace_results(root) == before


def check_exported_report(root: Path, name: str, report: str) -> None:
    """The preset's branch report is in reports/presets/<name>/, figures, metrics and params
    included, under a heading naming its branch commit and the params it changed; exporting a
    preset that never ran names the branch it lacks."""
    exported = (root / "reports/presets" / name / "README.md").read_text(encoding="utf-8")
    heading, _, body = exported.partition("\n\n")
    folder = Path("reports/presets") / name
    assert body == report.replace(REGENERATE, regenerate_line(folder / "params.yaml",
                                                              folder / "metrics", folder))
    commit = run_in(["git", "rev-parse", "--short", f"preset/{name}"], root).stdout.strip()
    assert f"`{commit}`" in heading and "`report.method=greedy`" in heading, heading
    results = root / "reports/presets" / name / "results"
    copied = sorted(f"reports/results/{p.name}" for p in results.iterdir())
    listed = run_in(["git", "ls-tree", "-r", "--name-only", f"preset/{name}", "reports/results"],
                    root).stdout.split()
    assert copied == sorted(listed) and any(p.endswith(".png") for p in copied), copied
    params = yaml.safe_load((root / "reports/presets" / name / "params.yaml").read_text())
    assert params["report"]["method"] == "greedy"
    assert (root / "reports/presets" / name / "metrics/eval/search-20.json").is_file()
    missing = run_in([sys.executable, "-m", "rnnsearch.presets", "export", "nosuch"], root,
                     check=False)
    assert missing.returncode == 2
    assert missing.stderr.strip() == ("presets: error: no git branch 'preset/nosuch': run the "
                                      "preset first (make preset NAME=nosuch)")


def workspace_results(root: Path) -> dict[str, bytes]:
    """Every file of the workspace's run: params.yaml, dvc.lock, metrics, plots and reports
    (but the preset reports' folder, where experiments are exported)."""
    files = [root / "params.yaml", root / "dvc.lock"]
    for folder in ("metrics", "plots", "reports"):
        files += [p for p in (root / folder).rglob("*") if p.is_file()
                  and "presets" not in p.relative_to(root).parts]
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def own_corpus(root: Path, served: Path, url: str, entities: int) -> dict:
    """Multi30k de-en slices laid out as the README's example of a corpus of one's own: train
    as two files served by URL (``url``, the folder ``served``), dev as a gzipped TSV under
    ``root/own`` (a relative path, as a user writes it) whose target has ``entities``
    Moses-escaped apostrophes, and no test file (held out of train). params.yaml's Hansard test
    layout (7 length buckets of 300, up to 80 words) is kept, as a user's run inherits it.
    Returns the params naming them, and one grid cell (RNNsearch-20) to train on them."""
    for lang in ("de", "en"):
        write_text(served / f"train.{lang}", mirror_lines(f"train.{lang}.gz", 600))
    dev = [mirror_lines(f"train.{lang}.gz", 650)[600:] for lang in ("de", "en")]
    dev[1][:entities] = [f"{line} it&apos;s" for line in dev[1][:entities]]
    write_text(root / "own/dev.tsv.gz", [f"{de}\t{en}" for de, en in zip(*dev)])
    custom = {"train": {"src": f"{url}/train.de", "tgt": f"{url}/train.en"},
              "dev": {"tsv": "own/dev.tsv.gz"}, "test": None}
    return {"prepare": {"corpus": "custom", "src_lang": "de", "tgt_lang": "en",
                        "custom": custom, "download": True,
                        "test_buckets": [10, 20, 30, 40, 50, 60, 80], "test_per_bucket": 300},
            "train": {"grid": {"models": ["search"], "max_lens": [20]}}}


def test_own_corpus_experiment_leaves_the_default_run_and_says_what_it_is(default_run, tmp_path,
                                                                          http_root):
    """``make experiment NAME=own PARAMS=my.yaml`` on a corpus of one's own given only in
    params, in the README's layout (train by URL from 127.0.0.1, dev a gzipped TSV with
    entities, no test file), through the real DVC pipeline to Table 1: the committed default
    run is untouched, the inputs are recorded with their checksums, the given dev file is used
    whole, the entities are counted, the test set is a random 5% of this short corpus (not
    Hansard's length buckets, which would take its every long pair out of training), every cut
    is counted and said in one line, and the report names the corpus and the pair and shows no
    paper column."""
    root, (served, url) = default_run, http_root
    mine = tmp_path / "my.yaml"
    mine.write_text(yaml.safe_dump(own_corpus(root, served, url, entities=5)))
    before = workspace_results(root)      # as other tests of this module left them
    ran = run_in([sys.executable, "-m", "rnnsearch.presets", "run", "own", "--from", str(mine)],
                 root)
    assert workspace_results(root) == before
    exported = root / "reports/presets/own"
    prepared = json.loads((exported / "metrics/prepare.json").read_text())
    assert prepared["train"]["inputs"]["src"] == {"file": f"{url}/train.de",
                                                  "sha256": sha256(served / "train.de")}
    dev = root / "own/dev.tsv.gz"     # the experiment's copy reads the project's own files,
    assert prepared["dev"]["inputs"]["tsv"] == {"file": "own/dev.tsv.gz",   # named as given
                                                "sha256": sha256(dev)}
    train, test = prepared["train"], prepared["test"]
    assert (prepared["dev"]["pairs"], test["pairs"], test["held_out_from"]) == (50, 30, "train")
    assert "per_bucket" not in test and not any(train["dropped"].values())
    assert (train["pairs"], train["held_out_for_test"], train["not_sampled"]) == (570, 30, 0)
    assert ("prepare: train: kept 570 of 600 pairs: 30 held out for test by "
            "prepare.custom.test_size (auto: 5%, at most 3,000)") in ran.stdout + ran.stderr
    assert prepared["dev"]["entities"]["tgt"]["occurrences"] == 5
    assert prepared["corpus"]["name"] == "custom"
    report = (exported / "README.md").read_text()
    first_table = report[report.index("### The run"):report.index("### Table 1")]
    assert "de->en" in first_table and "held out of the training files (30 pairs)" in first_table
    assert "Paper All" not in report and "Moses (paper only)" not in report
    assert not (exported / "beside_default.md").exists()       # nothing to compare it with
    assert "not compared with the default run: it translates another corpus (custom de->en; " \
           "the default run: multi30k en->fr)" in ran.stdout
    check_own_files_only(root, exported, ["search-20"])
    check_translate_with_the_experiment(root, tmp_path)
    check_run_names(root, "own")


RUN_NAMES = ("from rnnsearch import tracking; import json, mlflow; tracking.configure(); "
             "runs = mlflow.search_runs(filter_string=\"tags.dvc_exp_name = '{name}'\"); "
             "print(json.dumps(sorted(runs['tags.mlflow.runName'])))")


def check_run_names(root: Path, name: str) -> None:
    """The experiment's MLflow runs are named after it (``own/evaluate-search-20``), so that the
    default run's and two experiments' runs of one stage and cell differ in the runs table."""
    names = json.loads(run_in([sys.executable, "-c", RUN_NAMES.format(name=name)],
                              root).stdout)
    assert f"{name}/evaluate-search-20" in names and f"{name}/prepare" in names, names
    assert all(run.startswith(f"{name}/") for run in names), names


def check_translate_with_the_experiment(root: Path, tmp_path: Path) -> None:
    """``make translate NAME=own CELL=search-20``'s command translates a file with the
    experiment's model, vocabularies and params from the DVC cache, the workspace untouched;
    a cell the experiment did not train is refused naming its cells."""
    source = tmp_path / "in.de"
    source.write_text("Ein Mann fährt Fahrrad.\n\nZwei Hunde spielen im Schnee.\n")
    before = workspace_results(root)
    done = translate_with(root, "own", "search-20", str(source), "--method", "greedy")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and lines[1] == "" and lines[0] and lines[2], done.stdout
    assert workspace_results(root) == before
    fetched = root / ".cache/experiments/own"
    assert (fetched / "data/models/search-20/model.pt").is_file()
    assert yaml.safe_load((fetched / "params.yaml").read_text())["prepare"]["src_lang"] == "de"
    wrong = translate_with(root, "own", "encdec-20", str(source))
    assert wrong.returncode == 2
    assert "trained no cell 'encdec-20' (its cells: search-20)" in wrong.stderr


def translate_with(root: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m rnnsearch.presets translate ARGS`` in the project ``root`` (a process: it
    runs the decoding command line as one of its own)."""
    return run_in([sys.executable, "-m", "rnnsearch.presets", "translate", *args], root,
                  check=False)


def check_exps_view(root: Path) -> None:
    """``make exps``: the experiments (own, greedy) beside the workspace: the params each
    changed, then a row per experiment and cell with its headline numbers, every line narrow
    enough for an 80-column terminal (was: dvc exp show, whose columns an experiment's numbers
    fell off at 200 columns)."""
    shown = run_in(["env", "COLUMNS=80", "make", "--no-print-directory", "exps"], root).stdout
    lines = shown.splitlines()
    own_params = next(line for line in lines if line.startswith("own "))
    assert "prepare.custom" in own_params or "prepare.corpus" in own_params, own_params
    from rnnsearch.runs.exps import number

    summary = json.loads(run_in(["git", "show", "preset/own:metrics/summary/search-20.json"],
                                root).stdout)
    row = next(line.split() for line in lines if line.split()[:2] == ["own", "search-20"])
    assert row[2:] == [number(summary.get(key), 2) for key in ("bleu", "bleu_no_unk", "dev_ppl")]
    assert any(line.split()[:1] == ["greedy"] for line in lines), shown
    cells = [line for line in lines if line.split()[1:2] and line.split()[1].startswith("search")]
    assert max(len(line) for line in cells) <= 80, shown


def test_make_default_brings_the_committed_run_back(default_run):
    """After ``dvc exp apply`` of an experiment (or an edited params.yaml and make repro), ``make
    default`` gives the workspace the committed default run again, the replaced files kept in
    git stash, and dvc status clean (this clone's cache holds the default run's data)."""
    root = default_run
    (root / ".venv/bin").mkdir(parents=True, exist_ok=True)
    (root / ".venv/.installed").touch()           # make's setup, done (the suite's env has dvc)
    python = root / ".venv/bin/python"        # the suite's own interpreter and packages
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    check_exps_view(root)
    before = workspace_results(root)
    run_in(["dvc", "exp", "apply", "own"], root)
    assert workspace_results(root) != before
    done = run_in(["make", "default"], root)
    assert workspace_results(root) == before
    assert "git stash" in done.stdout
    assert "workspace before make default" in run_in(["git", "stash", "list"], root).stdout
    assert json.loads(run_in(["dvc", "status", "--json"], root).stdout) == {}


def check_own_files_only(root: Path, exported: Path, cells: list[str]) -> None:
    """An exported experiment's folder holds the metrics of its own cells only (not the default
    run's others, which its workspace copy started with), names no folder of this machine, and
    its regenerate line rebuilds that folder's index page as it is."""
    named = {p.stem for p in exported.rglob("*.json") if re.fullmatch(r".+-\d+", p.stem)}
    assert named == set(cells), named
    for path in exported.rglob("*"):
        if path.is_file() and path.suffix in (".md", ".json", ".yaml", ".tex"):
            text = path.read_text(encoding="utf-8")
            assert str(root) not in text and str(root.resolve()) not in text, path
    page = (exported / "README.md").read_text(encoding="utf-8")
    command = re.search(r"Regenerate with `PYTHONPATH=src (python [^`]+)`", page).group(1)
    assert f"--reports {exported.relative_to(root)} " in command, command
    script, *args = shlex.split(command)[1:]
    assert script == "pipeline/report.py", command
    done = run_script("report.py", *args, cwd=root)
    assert done.returncode == 0, done.stderr
    assert (exported / "README.md").read_text(encoding="utf-8") == page


def check_alignment_outputs(project: Path) -> None:
    """align and align_attention ran on the gold set: EM curves, scores, the report's table."""
    align = json.loads((project / "metrics/align.json").read_text())
    assert align["gold"]["sentences"] == 447
    for model in ("ibm1", "fast_align"):
        for curve in align["models"][model]["log_likelihood"].values():
            assert all(b >= a - 1e-9 for a, b in zip(curve, curve[1:])), curve
        for scores in align["models"][model]["scores"].values():
            assert 0.0 < scores["aer"] < 1.0
    attention = json.loads((project / "metrics/align_attention.json").read_text())
    assert attention["cells"]["encdec-20"] == {"attention": False}
    assert set(attention["cells"]["search-20"]["scores"]) == {"argmax", "threshold 0.3"}
    table = (project / "reports/results/alignment_quality.md").read_text()
    assert "IBM Model 1" in table and "RNNsearch-20" in table
    assert (project / "reports/results/alignment_gold_search-20.png").is_file()
