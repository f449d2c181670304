"""The benchmark (``python -m rnnsearch.bench --device ...``) and the GPU check
(``scripts/gpu_check.sh``, ``make gpu-check``), run here on the CPU at tiny sizes: the same code a
GPU runs.

Both need only torch, Lightning, numpy, sacrebleu and pytest, so they run here with the imports of
mlflow, dvc, gensim and sacremoses blocked (tests/minimal_install.py).
"""
from __future__ import annotations

import copy
import gc
import json
import re
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Sequence

import pytest
import pytorch_lightning as pl
import torch

from conftest import REPO
from minimal_install import minimal_install_env, run_with_minimal_install
from rnnsearch.bench import measure
from rnnsearch.bench.data import (TEST_BUCKETS, stratified_sources, training_batches,
                                  training_lengths, write_synthetic_corpus)
from rnnsearch.bench.measure import bench_models, plan_for, run, train_speed
from rnnsearch.bench.report import markdown_report
from rnnsearch.data.vocab import Vocabulary
from rnnsearch.experiments.tiny import make_tiny

PARAMS = REPO / "params.yaml"


def run_bench(out: Path, device: str) -> subprocess.CompletedProcess:
    """The tiny bench in a subprocess with a minimal install."""
    return run_with_minimal_install(out / "site", "rnnsearch.bench", "--device", device,
                                     "--tiny", "--threads", "1", "--out", str(out))


def check_report(out: Path, name: str) -> dict:
    """The report files are there and hold every part of the bench."""
    results = json.loads((out / f"{name}.json").read_text())
    assert {r["model"] for r in results["training"]} == {"default", "paper"}
    assert all(r["tokens_per_s"] > 0 and r["peak_memory_mib"] > 0 and 0 < r["roofline_share"] < 1
               for r in results["training"])
    assert {(r["model"], r["batch"]) for r in results["training"]} >= {("default", 64),
                                                                       ("paper", 80)}
    for a in results["arithmetic"]:     # counted by torch, the GEMM rate around the training runs
        assert a["mflop_per_token"] > 0 and a["gemm_gflops_fp32_before"] > 0
        assert a["roofline_tokens_per_s_fp32"] > 0 and 0 < a["padding"] < 1
    assert {(d["model"], d["method"]) for d in results["decoding"]} == {
        (m, k) for m in ("default", "paper") for k in ("greedy", "beam5", "beam5_bound")}
    assert [(p["model"], p["part"]) for p in results["profile"]] == [
        (m, part) for m in ("default", "paper")
        for part in ("training step", "decoding, greedy", "decoding, beam5")]
    assert all("Self CPU" in p["table"] for p in results["profile"])    # torch.profiler's own
    report = (out / f"{name}.md").read_text()
    for heading in ("### Training", "### Arithmetic", "### Decoding",
                    "### Profile: default, training step", "### Profile: paper, decoding, beam5",
                    "Load average (1, 5, 15 min)"):
        assert heading in report
    assert "--device" in report and "Joey" not in report and "required" not in report
    largest_batch = max(results["plan"]["decode_batches"])
    largest = [d for d in results["decoding"] if d["batch"] == largest_batch]
    assert all(d["mflop_per_sentence"] > 0 and 0 < d["roofline_share"] < 1 for d in largest)
    return results


def test_synthetic_data_are_shaped_like_the_default_run(tmp_path):
    import random

    rng = random.Random(0)
    src = sorted(training_lengths(rng)[0] for _ in range(20_000))
    assert 13 <= src[len(src) // 2] <= 17 and 15.5 <= sum(src) / len(src) <= 19
    write_synthetic_corpus(tmp_path, 50, 300)
    assert len(Vocabulary.load(tmp_path / "vocab.src.txt")) == 50
    assert len((tmp_path / "train.src").read_text().splitlines()) == 300
    batch, padding = training_batches(tmp_path, 50, 16)
    assert batch.src.size(0) == 16 and 0 < padding < 0.5
    sources = stratified_sources(50, 3)
    assert len(sources) == 3 * len(TEST_BUCKETS) and max(map(len, sources)) <= 80
    assert all(4 <= i < 50 for s in sources for i in s)


def test_plans():
    """make bench: the default run's three kinds and the Transformer, each at its own batch,
    greedy and beam 5 at batch 64, no profiles; make bench-full: the same models, profiles,
    decoding one at a time and with the exact stop; a GPU: the default and the paper's width
    at large batches in fp32 and bf16, decoding up to translate.batch_size_cuda and beyond."""
    quick, full, gpu = plan_for("quick", "cpu"), plan_for("full", "cpu"), plan_for("quick", "cuda")
    assert [m.name for m in bench_models(quick, PARAMS)] == ["default", "encdec", "luong_general",
                                                             "transformer"]
    assert bench_models(full, PARAMS) == bench_models(quick, PARAMS)
    assert quick.methods == ("greedy", "beam5") and quick.decode_batches == (64,)
    assert not quick.profile and full.profile and full.decode_batches == (1, 64)
    assert gpu == plan_for("full", "cuda") and "bf16-mixed" in gpu.precisions
    assert [m.train.data.batch_size for m in bench_models(gpu, PARAMS)] == [64, 80]
    assert 1024 in gpu.batches and 512 in gpu.decode_batches
    tiny = plan_for("tiny", "cpu")
    assert plan_for("tiny", "cuda") == tiny and tiny.tiny_width


CHECK_STEPS = ["environment", "cuda-tests", "bench", "tiny-model", "compare-tiny", "compare-test"]
CHECK_FILES = ["bench.json", "bench.md", "check.log", "compare_test.json",
               "compare_tiny.json", "pytest-cuda.xml", "summary.md"]


@pytest.mark.slow
@pytest.mark.timeout(7200)       # the script's own step limits stop a hang; a slow CPU is no fault
def test_gpu_check_dry_run_on_the_cpu(tmp_path):
    """``scripts/gpu_check.sh --cpu``: every step at tiny sizes with a minimal install, a tiny
    model standing for the default run's search-50, and a summary with a verdict. Its bench
    step is the bench (``python -m rnnsearch.bench --device cpu --tiny``) with a minimal
    install, whose report holds every part, the CPU's own included."""
    out = tmp_path / "gpu-check"
    make_tiny(tmp_path / "model", steps=2, sentences=12)
    done = run_check(tmp_path, out, COMPARE_MODEL=str(tmp_path / "model/model.pt"),
                     COMPARE_DATA=str(tmp_path / "model"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == CHECK_FILES
    bench = check_report(out, "bench")
    assert bench["machine"]["device"] == "cpu"
    log = (out / "check.log").read_text()
    for name in CHECK_STEPS:
        assert f"== {name}: exit 0" in log, log[-3000:]
    compare = json.loads((out / "compare_tiny.json").read_text())
    assert compare["devices"] == ["cpu", "cpu"] and compare["sentences"] == 20
    assert json.loads((out / "compare_test.json").read_text())["sentences"] == 12
    summary = (out / "summary.md").read_text()
    assert "- bench: exit 0" in summary and "CUDA tests: " in summary
    assert "compare_test.json: greedy: 0 of 12 best hypotheses differ (cpu vs cpu)" in summary
    assert summary.rstrip().endswith("Verdict: every step ran (a dry run on the CPU, at tiny sizes).")


def test_gpu_check_without_a_gpu_stops_at_once_saying_why(tmp_path):
    """On a machine where torch sees no GPU the check fails in its first step, naming the
    cause, and runs nothing else."""
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "gpu-check"
    done = run_check(tmp_path, out, flags=[])
    assert done.returncode == 1
    assert "sees no CUDA GPU" in done.stdout + done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["check.log", "summary.md"]
    summary = (out / "summary.md").read_text()
    assert "- environment: exit 1" in summary and "Verdict: a step failed (exit 1)" in summary


def test_make_gpu_check_runs_the_script_into_the_named_folder():
    done = subprocess.run(["make", "--no-print-directory", "-n", "-o", ".venv/.installed", "-C",
                           str(REPO), "gpu-check", "OUT=/tmp/somewhere"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "OUT=/tmp/somewhere bash scripts/gpu_check.sh" in done.stdout


def test_the_check_runs_every_file_that_holds_cuda_tests():
    """A test marked ``cuda`` in a file the check's pytest call does not name would never
    run anywhere."""
    script = (REPO / "scripts/gpu_check.sh").read_text()
    named = set(re.findall(r"tests/test_\w+\.py", script[script.index("cuda_tests() {"):]))
    holding = {f"tests/{path.name}" for path in (REPO / "tests").glob("test_*.py")
               if "@pytest.mark.cuda" in path.read_text()}
    assert named == holding


def test_the_checks_test_files_run_with_a_minimal_install(tmp_path):
    """The files whose ``cuda`` tests the check runs set up with a minimal install (no MLflow
    there for the test fixtures to make a store with): one CPU test of each file, since on a
    machine without a GPU the ``cuda`` ones skip before any fixture is set up."""
    cpu_tests = ["tests/test_cuda_graphs.py::test_round_up_and_pad_to_shape",
                 "tests/test_decoding_device.py::test_batch_size_follows_the_device",
                 "tests/test_bench_device.py::test_make_gpu_check_runs_the_script_into_the_named_folder"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-n", "0", *cpu_tests], cwd=REPO, capture_output=True, text=True,
                          env=minimal_install_env(tmp_path / "site"), timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "3 passed" in done.stdout


def run_check(tmp_path: Path, out: Path, flags: Sequence[str] = ("--cpu",), **env: str
              ) -> subprocess.CompletedProcess:
    """``scripts/gpu_check.sh FLAGS`` with its results in ``out``, whatever data/models holds in
    this checkout ignored (CELL names no cell) unless ``env`` names a model, and the packages
    a minimal install lacks missing for every python it starts."""
    return subprocess.run(["bash", str(REPO / "scripts/gpu_check.sh"), *flags],
                          capture_output=True, text=True,
                          env=dict(minimal_install_env(tmp_path / "site"), OUT=str(out),
                                   PYTHON=sys.executable, CELL="no-such-cell", **env))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_device_bench_runs_tiny_on_the_gpu(tmp_path):
    done = run_bench(tmp_path, "cuda")
    assert done.returncode == 0, done.stderr[-3000:]
    results = check_report(tmp_path, "bench_gpu")
    assert "gpu" in results["machine"]


def live_tensors() -> int:
    """How many tensors the garbage collector sees alive in this process."""
    return sum(1 for obj in gc.get_objects() if isinstance(obj, torch.Tensor))


def test_a_failed_training_run_is_a_row_and_its_model_is_gone(tmp_path, monkeypatch):
    """Out of memory at a large batch costs that row only; and each run's model is freed before
    the next one starts (on the GPU, memory kept alive past its run left the next
    configurations out of memory)."""
    built = []
    real_build = measure.build_model

    def build(*args, **kwargs):
        net = real_build(*args, **kwargs)
        built.append(weakref.ref(net))
        return net

    monkeypatch.setattr(measure, "build_model", build)
    plan = plan_for("tiny", "cpu")
    model = bench_models(plan, PARAMS)[0]
    write_synthetic_corpus(tmp_path / "data", model.vocab, 50)
    gc.collect()
    tensors_before = live_tensors()
    row = train_speed(model, tmp_path / "data", "cpu", 16, "32-true", plan, tmp_path)
    assert row["tokens_per_s"] > 0 and row["ms_per_step"] > 0 and len(built) == 1
    assert built[0]() is None
    gc.collect()
    assert live_tensors() <= tensors_before      # no weight, gradient or Adam moment left

    def fail(self, *args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(pl.Trainer, "fit", fail)
    row = train_speed(model, tmp_path / "data", "cpu", 16, "32-true", plan, tmp_path)
    assert row["error"] == "out of memory: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert "tokens_per_s" not in row and row["peak_memory_mib"] > 0


def test_a_failed_measurement_costs_its_row_and_every_partial_save_is_a_report(monkeypatch):
    """Out of memory decoding at the largest batch, a profiler that fails, FLOPs that cannot be
    counted: each is a row with its error in the results and the report, and the bench goes
    on. A bench cut by its time limit leaves its last save: one after each training run and
    each later part, every one of them a complete report of what was measured so far."""
    oom = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.00 GiB")
    real_decode = measure.decode

    def decode(net, sources, beam, batch, device, warmup=True, stop="first_k"):
        if beam > 1 and batch == 16 and stop == "first_k":
            raise oom
        return real_decode(net, sources, beam, batch, device, warmup, stop)

    def fail(*args, **kwargs):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(measure, "decode", decode)
    monkeypatch.setattr(measure, "profiled", fail)
    monkeypatch.setattr(measure, "flops", fail)
    snapshots: list[dict] = []
    results = run("cpu", "tiny", PARAMS, {"device": "cpu"},
                  save=lambda r: snapshots.append(copy.deepcopy(r)))
    plan = plan_for("tiny", "cpu")
    per_model = len(plan.batches) + 1 + 2      # each training run, then after each part
    assert len(snapshots) == 2 * per_model and snapshots[-1] == results
    assert [len(s["training"]) for s in snapshots[:2]] == [1, 2]      # one row at a time
    about = {"device": "cpu", "torch": "t", "lightning": "l", "threads": 1, "command": "c",
             "date": "d", "load_average_before": None}
    assert all("### Training" in markdown_report({**s, "machine": about}) for s in snapshots)
    failed = {(d["model"], d["method"], d["batch"]) for d in results["decoding"] if "error" in d}
    assert failed == {("default", "beam5", 16), ("paper", "beam5", 16)}
    assert {p["error"] for p in results["profile"] + results["arithmetic"]} == {
        "CUPTI_ERROR_NOT_INITIALIZED"}
    assert {r["model"] for r in results["training"] if "tokens_per_s" in r} == {"default",
                                                                                  "paper"}
    report = markdown_report({**results, "machine": about})
    assert "| default | beam5 | 16 | failed: out of memory: CUDA out of memory." in report
    # models x (the arithmetic row, 3 profiles, the decoding rows at the largest batch that
    # decoded: greedy and beam5_bound)
    assert report.count("failed: CUPTI_ERROR_NOT_INITIALIZED") == 2 * (1 + 3 + 2)
