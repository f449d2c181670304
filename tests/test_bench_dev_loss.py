"""``python -m rnnsearch.bench.dev_loss``: dev-loss curves of train-stage runs side by side,
read from real MLflow stores."""
from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest

from rnnsearch.bench import dev_loss

FP32 = {500: 3.80, 1000: 3.20, 1500: 2.90}


def logged_run(folder: Path, store: Path, curve: dict[int, float],
               params: dict[str, str] | None = None) -> Path:
    """A train-stage output folder whose run.json names a run of ``store`` with ``curve`` as
    its val/loss history and ``params`` (default: fp32's precision)."""
    client = mlflow.MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("cells")
    run = client.create_run(experiment.experiment_id if experiment
                            else client.create_experiment("cells"))
    for step, loss in curve.items():
        client.log_metric(run.info.run_id, "val/loss", loss, step=step)
        client.log_metric(run.info.run_id, "train/loss", loss + 1, step=step)
    for name, value in (params or {"trainer.precision": "32-true", "optim.lr": "0.001"}).items():
        client.log_param(run.info.run_id, name, value)
    client.set_terminated(run.info.run_id)
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"mlflow_run_id": run.info.run_id}))
    return folder


def test_two_stores_compared_step_by_step(tmp_path, capsys):
    fp32 = logged_run(tmp_path / "fp32", tmp_path / "a.db", FP32)
    bf16 = logged_run(tmp_path / "bf16", tmp_path / "b.db",
                      {500: 3.85, 1000: 3.21, 1500: 2.95, 2000: 2.80},
                      {"trainer.precision": "bf16-mixed", "optim.lr": "0.001",
                       "trainer.bf16_cross_entropy": "True"})
    out = tmp_path / "reports" / "bf16_dev_loss"
    status = dev_loss.main(["--run", "fp32", str(fp32), str(tmp_path / "a.db"),
                            "--run", "bf16", str(bf16), str(tmp_path / "b.db"), "--out", str(out)])
    assert status == 0
    result = json.loads(out.with_suffix(".json").read_text())
    bf16_run = result["runs"]["bf16"]
    assert result["reference"] == "fp32" and bf16_run["last_step"] == 1500   # the last common step
    assert bf16_run["relative_difference"]["1500"] == pytest.approx(2.95 / 2.90 - 1)
    assert bf16_run["within_tolerance"] is False                             # 1.7% > 1%
    report = out.with_suffix(".md").read_text()
    assert "| 1,500 | 2.9000 | 2.9500 | +1.72% |" in report
    assert "| `trainer.bf16_cross_entropy` | (not set) | `True` |" in report
    assert "| `trainer.precision` | `32-true` | `bf16-mixed` |" in report
    assert "optim.lr" not in report                                          # the same in both
    assert "at step 1,500, +1.72% against fp32's dev loss: **outside** 1%" in report
    assert out.with_suffix(".png").read_bytes().startswith(b"\x89PNG")
    assert report in capsys.readouterr().out


def test_a_closer_run_is_within_the_tolerance(tmp_path):
    store = tmp_path / "mlflow.db"
    runs = [logged_run(tmp_path / name, store, {s: v * (1 + shift) for s, v in FP32.items()})
            for name, shift in (("fp32", 0.0), ("bf16", -0.004))]
    curves = {name: dev_loss.read_run(folder, str(store)).dev_loss
              for name, folder in zip(("fp32", "bf16"), runs)}
    assert curves["fp32"] == FP32
    assert dev_loss.compare(curves, 0.01)["runs"]["bf16"]["within_tolerance"] is True


def test_a_folder_without_a_run_is_named_and_nothing_is_written(tmp_path, capsys):
    fp32 = logged_run(tmp_path / "fp32", tmp_path / "a.db", FP32)
    (tmp_path / "empty").mkdir()
    out = tmp_path / "reports" / "dev_loss"
    status = dev_loss.main(["--run", "fp32", str(fp32), str(tmp_path / "a.db"),
                            "--run", "bf16", str(tmp_path / "empty"), "--out", str(out)])
    assert status == 2
    assert f"{tmp_path / 'empty' / 'run.json'}: no MLflow run id" in capsys.readouterr().err
    assert not out.parent.exists()


def test_a_store_that_does_not_exist_is_named_not_created(tmp_path):
    with pytest.raises(dev_loss.StageError, match="no MLflow store"):
        dev_loss.store_uri(str(tmp_path / "missing.db"))
    assert not (tmp_path / "missing.db").exists()
