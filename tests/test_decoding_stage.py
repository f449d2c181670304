"""The translate stage end to end on a tiny untrained model, and the translate command line."""
from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, run_script
from decoding_workspace import SRC, make_workspace
from rnnsearch.decoding import cli
from rnnsearch.decoding.translator import Translator


def test_translate_stage_writes_every_output(tmp_path):
    root = make_workspace(tmp_path)
    done = run_script("translate.py", "--cell", "search-50", cwd=root)
    assert done.returncode == 0, done.stderr
    out = root / "data/translations/search-50"
    for system in ("greedy", "beam", "greedy_unk", "beam_unk"):
        for kind in ("tok", "detok"):
            assert len((out / f"{system}.{kind}.txt").read_text().splitlines()) == len(SRC)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["speed"]["beam"]["sentences_per_s"] > 0
    assert set(meta["speed"]) == {"greedy", "beam", "greedy_unbatched", "beam_unbatched"}
    nbest = (out / "beam.nbest.txt").read_text().splitlines()
    assert all(line.count(" ||| ") == 3 for line in nbest) and len(nbest) <= 2 * len(SRC)
    samples = json.loads((root / "metrics/alignments/search-50.json").read_text())["samples"]
    assert [s["index"] for s in samples] == [0]          # the only line of 5-9 words
    sample = samples[0]
    assert np.array(sample["attention"]).shape == (len(sample["target"]), len(sample["source"]))
    assert sample["source"] == SRC[0].split()             # translate.source_eos: false
    assert set(np.load(out / "attention.npz").files) == {"greedy/0", "beam/0"}


def test_translate_stage_model_without_attention(tmp_path):
    root = make_workspace(tmp_path, model="encdec")
    done = run_script("translate.py", "--cell", "encdec-50", cwd=root)
    assert done.returncode == 0, done.stderr
    meta = json.loads((root / "data/translations/encdec-50/meta.json").read_text())
    assert meta["systems"] == ["greedy", "beam"] and not meta["has_attention"]
    assert json.loads((root / "metrics/alignments/encdec-50.json").read_text())["samples"] == []


def test_translate_stage_names_a_missing_model(tmp_path):
    root = make_workspace(tmp_path)
    done = run_script("translate.py", "--cell", "search-30", cwd=root)
    assert done.returncode == 2 and "search-30" in done.stderr


def test_command_line_translates_stdin_with_alignment(tmp_path):
    root = make_workspace(tmp_path)
    command = [sys.executable, "-m", "rnnsearch.decoding.cli", "--model",
               "data/models/search-50/model.pt", "--align", "--beam-size", "2"]
    done = subprocess.run(command, cwd=root, input="The cat sat.\n\nA dog!\n", text=True,
                          capture_output=True, timeout=120, env={"PYTHONPATH": str(REPO / "src")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("source:") == 2               # the blank line is not translated


def test_command_line_keeps_blank_lines_blank_and_lines_in_step(tmp_path, monkeypatch, capsys):
    """Output line i belongs to input line i: a blank (or white-space) line gives a blank line,
    not a translation of nothing; a carriage return inside a line does not split it; an input
    of blank lines only decodes nothing."""
    root = make_workspace(tmp_path)
    monkeypatch.chdir(root)
    decoded: list[list[str]] = []
    translate = Translator.translate

    def recording(self, sentences, *args, **kwargs):
        decoded.extend(list(words) for words in sentences)
        return translate(self, sentences, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate", recording)

    def run(stdin: bytes) -> list[str]:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        assert cli.main(["--model", "data/models/search-50/model.pt", "--method", "greedy"]) == 0
        return capsys.readouterr().out.split("\n")

    lines = run(b"The cat sat.\n\n   \nA dog\rsat!\r\n")
    assert decoded == [["The", "cat", "sat", "."], ["A", "dog", "sat", "!"]]
    assert len(lines) == 5 and lines[1:3] == ["", ""] and lines[4] == ""   # 4 lines, each + \n
    decoded.clear()
    assert run(b"\n \n") == ["", "", ""] and decoded == []


def test_command_line_prints_one_line_per_input_unless_nbest_asks(tmp_path):
    """The workspace's params ask the translate stage for 2-best lists; the CLI still prints one
    translation per input line, and ``--nbest 2`` two scored ones."""
    root = make_workspace(tmp_path)
    command = [sys.executable, "-m", "rnnsearch.decoding.cli", "--model",
               "data/models/search-50/model.pt"]
    env = {"PYTHONPATH": str(REPO / "src")}
    lines = "The cat sat.\nA dog!\nIt rains.\n"
    one = subprocess.run(command, cwd=root, input=lines, text=True, capture_output=True,
                         timeout=120, env=env)
    assert one.returncode == 0, one.stderr
    assert len(one.stdout.splitlines()) == 3 and "\t" not in one.stdout
    two = subprocess.run(command + ["--nbest", "2"], cwd=root, input=lines, text=True,
                         capture_output=True, timeout=120, env=env)
    assert two.returncode == 0, two.stderr
    assert len(two.stdout.splitlines()) == 6 and all("\t" in l for l in two.stdout.splitlines())


def test_command_line_overrides_the_length_penalty_and_refuses_a_negative_alpha(tmp_path,
                                                                               capsys):
    root = make_workspace(tmp_path)
    base = ["--model", "x", "--params", str(root / "params.yaml")]
    parse = cli.argument_parser().parse_args
    default = cli._settings(parse(base)).search
    changed = cli._settings(parse(base + ["--length-penalty", "gnmt", "--alpha", "1.0"])).search
    assert (default.length_penalty, changed.length_penalty, changed.alpha) == ("mean", "gnmt", 1.0)
    assert changed.beam_size == default.beam_size
    with pytest.raises(SystemExit):
        parse(base + ["--alpha", "-1"])
    assert "--alpha: must be >= 0" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--beam-size", "--nbest"])
def test_command_line_refuses_a_beam_or_nbest_below_one(option, capsys):
    """Was: ``--beam-size 0`` and ``--nbest 0`` silently meant translate.search's value."""
    with pytest.raises(SystemExit) as refused:
        cli.argument_parser().parse_args(["--model", "x", option, "0"])
    assert refused.value.code == 2
    assert f"argument {option}: must be >= 1, got 0" in capsys.readouterr().err
