"""Decoding on a device: ``translate.device`` and the CLI's ``--device``, the batch size per
device, and hypotheses that do not depend on the device beyond floating-point ties.

The tests marked ``cuda`` skip without a GPU; ``make gpu-check`` runs them on one (``pytest -m
cuda``). They need torch and the project only, except the stage's own, which also needs mlflow and
sacremoses (it skips where they are missing, as in a minimal install).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from conftest import REPO, run_script
from decoding_workspace import SRC, make_workspace
from minimal_install import run_with_minimal_install
from rnnsearch.errors import ConfigError
from rnnsearch.config.translate import TranslateConfig, resolve_device
from rnnsearch.decoding.device_agreement import compare_devices, differences, summary
from rnnsearch.decoding.translator import Translator
from rnnsearch.experiments.tiny import make_tiny

HAS_GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")
no_gpu = pytest.mark.skipif(HAS_GPU, reason="checks a machine without a GPU")
STAGE_PACKAGES = all(importlib.util.find_spec(name) for name in ("mlflow", "sacremoses"))
MODEL = "data/models/search-50/model.pt"


def set_translate(root: Path, **changes: object) -> None:
    """Change keys of the workspace's ``translate`` section."""
    path = root / "params.yaml"
    params = yaml.safe_load(path.read_text(encoding="utf-8"))
    params["translate"].update(changes)
    path.write_text(yaml.safe_dump(params), encoding="utf-8")


def translate_cell(root: Path) -> dict[str, str]:
    """Run the translate stage on the workspace; its tokenised outputs and meta.json by name."""
    done = run_script("translate.py", "--cell", "search-50", cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    out = root / "data/translations/search-50"
    return {path.name: path.read_text(encoding="utf-8")
            for path in sorted(out.iterdir()) if path.suffix in (".txt", ".json")}


def stage_runs():
    """The translate runs of this test's MLflow store (conftest gives each test its own),
    newest first, as mlflow.search_runs' data frame."""
    import mlflow

    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
    return mlflow.search_runs(search_all_experiments=True, order_by=["start_time DESC"])


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m rnnsearch.decoding.cli --model <the workspace's model> ARGS`` on two lines."""
    return subprocess.run([sys.executable, "-m", "rnnsearch.decoding.cli", "--model", MODEL,
                           *args], cwd=root, input="the cat sat .\na dog .\n", text=True,
                          capture_output=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src")))


def refusal(result: subprocess.CompletedProcess) -> str:
    """The one-line error of a refused run (exit 2, no traceback)."""
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


# ---- on any machine ------------------------------------------------------------------------------

def test_auto_follows_torch_and_cuda_needs_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"
    with pytest.raises(ConfigError, match=r"^translate\.device: cuda asked for, but .* no CUDA"):
        resolve_device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert [resolve_device(name) for name in ("auto", "cpu", "cuda")] == ["cuda", "cpu", "cuda"]
    with pytest.raises(ConfigError, match=r"^--device: must be one of \['auto', 'cpu', 'cuda'\]"):
        resolve_device("gpu", "--device")


def test_batch_size_follows_the_device():
    config = TranslateConfig(batch_size=64, batch_size_cuda=512)
    assert config.batch_size_for("cpu") == 64 and config.batch_size_for("cuda") == 512
    with pytest.raises(ConfigError, match="translate.batch_size_cuda: must be > 0"):
        TranslateConfig(batch_size_cuda=0).check("translate")


def test_stage_refuses_an_unknown_device(tmp_path):
    root = make_workspace(tmp_path)
    set_translate(root, device="gpu")
    line = refusal(run_script("translate.py", "--cell", "search-50", cwd=root))
    assert "translate.device: must be one of ['auto', 'cpu', 'cuda'], got 'gpu'" in line
    assert not (root / "data/translations/search-50").exists()


@no_gpu
def test_stage_refuses_cuda_without_a_gpu(tmp_path):
    root = make_workspace(tmp_path)
    set_translate(root, device="cuda")
    line = refusal(run_script("translate.py", "--cell", "search-50", cwd=root))
    assert line.startswith("translate: error: translate.device: cuda asked for") and "no CUDA" in line
    assert not (root / "data/translations/search-50").exists()
    assert not (root / "metrics/alignments/search-50.json").exists()


@no_gpu
def test_auto_decodes_on_the_cpu_here_as_before(tmp_path):
    """``device: auto`` picks the CPU on this machine and writes what ``device: cpu`` writes
    (meta.json apart from the timings), and the hypotheses are those of the decoders called
    directly on the CPU, the code path the stage took before it had a device."""
    root = make_workspace(tmp_path)
    assert resolve_device("auto") == "cpu"
    auto = translate_cell(root)
    set_translate(root, device="cpu")
    cpu = translate_cell(root)
    meta = json.loads(auto.pop("meta.json"))
    assert meta["device"] == "cpu" == json.loads(cpu.pop("meta.json"))["device"]
    assert {row["batch_size"] for name, row in meta["speed"].items()
            if not name.endswith("_unbatched")} == {3}       # translate.batch_size, not _cuda
    assert auto == cpu
    assert [(r["params.device_used"], r["params.device"], r["tags.device"])
            for _, r in stage_runs().iterrows()] == [("cpu", "cpu", "cpu"), ("cpu", "auto", "cpu")]
    translator = Translator.load(root / MODEL, root / "data/tokenized")
    config = TranslateConfig()
    for method in ("greedy", "beam"):
        result = translator.translate([s.split() for s in SRC], method,
                                      _search(config, method), 3, progress=False)
        words = [" ".join(translator.target_words(t.best, s.split()))
                 for t, s in zip(result.translations, SRC)]
        assert auto[f"{method}.tok.txt"].splitlines() == words


def _search(config: TranslateConfig, method: str):
    """The workspace's search options (make_workspace: beam 3, n-best 2, at most 12 tokens)."""
    beam = 1 if method == "greedy" else 3
    return dataclasses.replace(config.search, beam_size=beam, nbest=1 if beam == 1 else 2,
                               max_len_cap=12)


@no_gpu
def test_cli_device_option(tmp_path):
    root = make_workspace(tmp_path)
    auto, cpu = run_cli(root), run_cli(root, "--device", "cpu")
    assert auto.returncode == cpu.returncode == 0, auto.stderr + cpu.stderr
    assert auto.stdout == cpu.stdout and len(auto.stdout.splitlines()) == 2
    assert "--device: cuda asked for" in refusal(run_cli(root, "--device", "cuda"))
    set_translate(root, device="cuda")
    assert "translate.device: cuda asked for" in refusal(run_cli(root))
    assert run_cli(root, "--device", "cpu").stdout == cpu.stdout   # the option wins


def test_differences_counts_changed_hypotheses(tmp_path):
    root = make_workspace(tmp_path)
    translator = Translator.load(root / MODEL, root / "data/tokenized")
    sources = [s.split() for s in SRC]
    config = TranslateConfig()
    greedy = translator.translate(sources, "greedy", _search(config, "greedy"), 2, progress=False)
    beam = translator.translate(sources, "beam", _search(config, "beam"), 2, progress=False)
    same = differences(greedy, greedy)
    assert same["differing"] == 0 and same["max_score_diff_identical"] == 0.0
    changed = sum(g.best.tokens != b.best.tokens
                  for g, b in zip(greedy.translations, beam.translations))
    report = differences(greedy, beam, examples=1)
    assert report["differing"] == changed and len(report["examples"]) == min(changed, 1)


def test_compare_command_writes_its_report(tmp_path):
    """``python -m rnnsearch.decoding.device_agreement`` on the tiny model (CPU against CPU here), as
    the GPU check runs it, with a minimal install: without mlflow, dvc, gensim and sacremoses."""
    make_tiny(tmp_path / "tiny", steps=2, sentences=6)
    out = tmp_path / "compare.json"
    done = run_with_minimal_install(
        tmp_path / "site", "rnnsearch.decoding.device_agreement", "--model", str(tmp_path / "tiny/model.pt"),
        "--vocab-dir", str(tmp_path / "tiny"), "--sources", str(tmp_path / "tiny/test.src"),
        "--devices", "cpu", "cpu", "--beam-size", "2", "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["sentences"] == 6 and report["search"]["beam_size"] == 2
    assert {m: d["differing"] for m, d in report["methods"].items()} == {"greedy": 0, "beam": 0}
    assert "greedy: 0 of 6 best hypotheses differ (cpu vs cpu)" in done.stdout


def test_compare_within_seconds_compares_the_leading_chunks(tmp_path):
    """With a time budget the methods compare the sentences that fit, a chunk (the largest
    batch size) at a time, at least one chunk each, and the report says how many."""
    make_tiny(tmp_path, steps=2, sentences=7)
    sources = [line.split() for line in (tmp_path / "test.src").read_text().splitlines()]
    config = TranslateConfig(batch_size=2, batch_size_cuda=3)
    whole = compare_devices(tmp_path / "model.pt", tmp_path, sources, ["cpu", "cpu"], config)
    cut = compare_devices(tmp_path / "model.pt", tmp_path, sources, ["cpu", "cpu"], config,
                          seconds=1e-6)
    assert {m: d["sentences"] for m, d in whole["methods"].items()} == {"greedy": 7, "beam": 7}
    assert {m: d["sentences"] for m, d in cut["methods"].items()} == {"greedy": 2, "beam": 2}
    assert cut["sentences"] == 7 and cut["seconds"] == 1e-6 and whole["seconds"] is None
    assert summary(cut)[0].startswith("greedy: 0 of 2 best hypotheses differ (the first 2 of 7 "
                                      "in --seconds 1e-06) (cpu vs cpu)")
    assert summary(whole)[1].startswith("beam: 0 of 7 best hypotheses differ (cpu vs cpu)")


# ---- on a GPU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("steps", [0, 300], ids=["random", "trained"])
@pytest.mark.cuda
@needs_gpu
def test_gpu_hypotheses_match_the_cpu(tmp_path, steps, record_property):
    """A tiny model, untrained and trained (300 steps), decodes 300 sentences on both devices;
    the differing best hypotheses are counted and reported (junit property ``differing``), and
    must stay float ties: at most 2% of sentences, identical ones within 1e-3 in score."""
    make_tiny(tmp_path, steps=steps, sentences=300)
    report = compare_devices(tmp_path / "model.pt", tmp_path,
                             [line.split() for line in (tmp_path / "test.src").read_text().splitlines()],
                             [resolve_device("cpu"), resolve_device("cuda")])
    for method, d in report["methods"].items():
        record_property(f"{method}_differing", f"{d['differing']} of {d['sentences']}")
        print(f"{steps} steps, {method}: {d['differing']} of {d['sentences']} differ; score "
              f"within {d['max_score_diff_identical']:.1e} on identical ones")
        assert d["differing"] <= 0.02 * d["sentences"], d["examples"]
        assert d["max_score_diff_identical"] < 1e-3


@pytest.mark.cuda
@needs_gpu
def test_auto_picks_the_gpu_and_results_come_back_to_the_cpu(tmp_path):
    assert resolve_device("auto") == "cuda"
    root = make_workspace(tmp_path)
    translator = Translator.load(root / MODEL, root / "data/tokenized", device="cuda")
    assert next(translator.model.parameters()).is_cuda
    result = translator.translate([s.split() for s in SRC], "beam",
                                  _search(TranslateConfig(), "beam"), 512, progress=False)
    best = [t.best for t in result.translations]
    assert all(isinstance(h.score, float) and isinstance(h.tokens[0], int) for h in best)
    assert all(type(h.attention).__module__ == "numpy" for h in best)


@pytest.mark.cuda
@needs_gpu
@pytest.mark.skipif(not STAGE_PACKAGES, reason="the translate stage needs mlflow and sacremoses")
def test_stage_on_the_gpu_writes_what_the_cpu_writes(tmp_path, record_property):
    root = make_workspace(tmp_path)
    set_translate(root, device="cuda")
    gpu = translate_cell(root)
    set_translate(root, device="cpu")
    cpu = translate_cell(root)
    assert json.loads(gpu.pop("meta.json"))["device"] == "cuda"
    assert json.loads(cpu.pop("meta.json"))["device"] == "cpu"
    differing = {name: sum(a != b for a, b in zip(gpu[name].splitlines(), cpu[name].splitlines()))
                 for name in gpu if name.endswith(".tok.txt")}
    record_property("differing_lines", json.dumps(differing))
    assert sum(differing.values()) <= 1, differing
