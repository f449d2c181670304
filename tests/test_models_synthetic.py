"""The synthetic reversal experiment runs end to end (a smoke test: a few steps, tiny sizes)."""
from __future__ import annotations

import json

from rnnsearch.experiments import synthetic


def test_synthetic_experiment_reports_both_models_per_length_bucket(tmp_path, capsys):
    out = tmp_path / "synthetic.json"
    report = synthetic.main(["--steps", "3", "--hidden", "8", "--embedding", "8", "--min-len", "3",
                             "--max-len", "8", "--test-size", "4", "--threads", "1", "--out", str(out)])
    assert set(report["models"]) == {"encdec", "search"}
    for model in report["models"].values():
        assert model["steps"] == 3
        assert list(model["buckets"]) == ["3-7", "8-8"] or list(model["buckets"]) == ["3-8"]
        for scores in model["buckets"].values():
            assert 0 <= scores["token_accuracy"] <= 1 and 0 <= scores["exact_match"] <= 1
    assert json.loads(out.read_text())["models"]["search"]["steps"] == 3
    printed = capsys.readouterr().out
    table = synthetic.table(report)
    assert printed.endswith(table.markdown())
    assert table.header == ("source length", "encdec tok acc", "encdec exact", "search tok acc",
                            "search exact")
    buckets = report["models"]["search"]["buckets"]
    assert [row[0] for row in table.rows] == list(buckets)
    first = next(iter(buckets.values()))
    assert table.rows[0][3:] == (f"{first['token_accuracy']:.3f}", f"{first['exact_match']:.3f}")
    assert printed.startswith("encdec: ") and "### reverse: accuracy by source length" in printed
