"""The preset comparisons are DVC stages (reports/presets/dvc.yaml, one per entry of
comparisons.yaml): ``dvc status`` says when one is stale, and running one where the preset
branches are missing (any clone but the one that ran the presets) fails, naming what is
missing, and leaves every committed file byte for byte as it was."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import REPO, make_project, run_in

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A git copy of the project with the committed metrics and reports (no branches, no
    DVC cache: a fresh clone's). Each test leaves it as it found it."""
    project = make_project(tmp_path_factory.mktemp("clone"), {})
    for folder in ("metrics", "reports"):
        shutil.copytree(REPO / folder, project / folder, dirs_exist_ok=True)
    run_in(["git", "add", "-A"], project)
    run_in(["git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", "commit", "-qm",
            "reports"], project)
    return project


def committed_files(root: Path) -> dict[str, bytes]:
    """Every file of the workspace's results: params, locks, metrics and reports."""
    files = [root / "params.yaml", root / "dvc.lock"]
    for folder in ("metrics", "reports"):
        files += [p for p in (root / folder).rglob("*") if p.is_file()]
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def stale(project: Path) -> set[str]:
    """The comparison stages ``dvc status`` lists."""
    status = json.loads(run_in(["dvc", "status", "--json", "reports/presets/dvc.yaml"],
                               project).stdout)
    return {stage.rpartition(":")[2] for stage in status}


def test_the_committed_comparisons_are_current_and_a_new_export_makes_its_own_stale(project):
    assert stale(project) == set()
    evaluated = project / "reports/presets/conditional/metrics/eval/search-50.json"
    committed = evaluated.read_text()
    evaluated.write_text(committed + "\n")                     # conditional exported again
    try:
        assert stale(project) == {"compare@conditional-vs-default",
                                  "compare@supervised_cond-vs-conditional",
                                  "compare@supervised_cond_decay-vs-conditional",
                                  "compare@supervised_cond_light-vs-conditional"}
    finally:
        evaluated.write_text(committed)


@pytest.mark.parametrize("against, reason", [
    (["--against", "conditional"], "no git branch 'preset/supervised_cond_decay'"),
    ([], "no git branch 'preset/supervised_cond_decay'"),
    (["--against", "supervised_cond_light"], "no git branch 'preset/supervised_cond_decay'"),
    (["--against", "luong"], "metrics/prepare.json has no 'corpus' block")])
def test_compare_without_the_preset_branches_fails_and_changes_nothing(project, against,
                                                                       reason):
    """Was: ``compare X --against Y`` deleted the committed significance_Y.json before it
    looked for the branches, exited 0, and rewrote the page without its p-values. A comparison
    not listed yet (against supervised_cond_light) is taken out of comparisons.yaml again; one
    that could hold no table (against luong, whose test set is not recorded) is refused first."""
    before = committed_files(project)
    done = run_in([sys.executable, "-m", "rnnsearch.presets", "compare", "supervised_cond_decay",
                   *against], project, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert reason in done.stdout + done.stderr
    if "branch" in reason:
        key = f"supervised_cond_decay-vs-{against[-1] if against else 'default'}"
        assert f"compare@{key} was not made" in done.stderr
    assert committed_files(project) == before
    assert not run_in(["git", "status", "--porcelain"], project).stdout
