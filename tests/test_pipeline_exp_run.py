"""``dvc exp run`` switches the corpus and the translation direction of the real DVC pipeline (a
throw-away copy of the repository on tiny params; the stages up to tokenize). A file of its own,
so that it runs beside the long end-to-end run of ``test_pipeline_e2e.py``."""
from __future__ import annotations

import json
import pytest

from conftest import run_in
from test_pipeline_e2e import project  # noqa: F401  (the module-scoped tiny project: this file's own)

pytestmark = pytest.mark.slow


def test_exp_run_switches_corpus_and_direction(project):
    """From the tiny params' Multi30k en->fr to the Hansard, fr->en: one experiment that reads
    the default run's corpus and turns the direction round (the Hansard's files take most of its
    time; the experiments of test_pipeline_e2e.py switch to de->en)."""
    corpus, src, tgt = "hansard36", "fr", "en"
    run_in(["dvc", "exp", "run", "tokenize", "-S", f"prepare.corpus={corpus}",
          "-S", f"prepare.src_lang={src}", "-S", f"prepare.tgt_lang={tgt}"], project)
    meta = json.loads((project / "data/prepared/meta.json").read_text())
    assert (meta["corpus"], meta["src_lang"], meta["tgt_lang"]) == (corpus, src, tgt)
    shown = json.loads(run_in(["dvc", "exp", "show", "--json"], project).stdout)
    assert shown  # the experiment is listed
