"""The bench's Hansard parts on the split's first lines: Moses tokenisation, then learning and
applying the subword preset's models (bpe, unigram), their numbers and the report's table."""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import yaml

from conftest import REPO
from rnnsearch.bench.__main__ import hansard
from rnnsearch.bench.subwords import subword_settings
from rnnsearch.bench.table import tokenization_section

LINES, PIECES = 300, 300     # 300 pieces: what 300 Hansard pairs can fill, both kinds


def test_settings_are_the_subword_presets_with_the_units_asked():
    preset = yaml.safe_load((REPO / "presets" / "subword.yaml").read_text(encoding="utf-8"))
    for units in ("bpe", "unigram"):
        cfg = subword_settings(units)
        assert cfg.units == units and cfg.subword.joint == preset["tokenize"]["subword"]["joint"]
        assert cfg.vocab_size_src == preset["tokenize"]["vocab_size_src"]
    assert subword_settings("bpe", vocab_size=PIECES).vocab_size_tgt == PIECES


def test_hansard_parts_write_their_numbers_and_the_report_shows_them(tmp_path, mirror):
    seconds: dict[str, float] = {}

    def part(name: str, function: Callable[..., dict[str, Any]], *args: Any,
             **kwargs: Any) -> dict[str, Any]:
        start = time.perf_counter()
        result = function(*args, **kwargs)
        seconds[name] = time.perf_counter() - start
        return result

    results = hansard(part, str(mirror), tmp_path / "hansard", lines=LINES, vocab_size=PIECES)
    assert len(seconds) == 3
    assert results["tokenize"]["pairs"] == LINES
    for lang in ("en", "fr"):
        assert len((tmp_path / "hansard" / f"train.{lang}").read_text().splitlines()) == LINES
    assert set(results["subwords"]) == {"bpe", "unigram"}
    for units, sub in results["subwords"].items():
        assert sub["units"] == units and sub["joint"] and sub["vocab_size"] == PIECES
        assert sub["sentences"] == 2 * LINES and sub["pieces"] > sub["words"] > LINES
        assert sub["seconds_learning"] > 0 and sub["seconds_applying"] > 0
        assert sub["input_sentence_size"] == 0 and sub["learning_threads"] == 1
        assert 0 < sub["peak_rss_mb_learning"] <= sub["peak_rss_mb"] < 200   # no torch in it
    assert json.loads(json.dumps(results)) == results         # bench.json can hold it

    report = "\n".join(tokenization_section(results))
    assert f"Hansard train split, {LINES} pairs" in report
    assert "| Moses tokenisation, en and fr" in report
    for units, sub in results["subwords"].items():
        assert f"| {units}: learning ({PIECES} pieces, joint" in report
        assert f"{sub['seconds_learning']:.1f} |" in report
        assert f"| {units}: applying to both sides" in report
        assert f"{units} {sub['pieces_per_word']:.2f}" in report


def test_no_hansard_no_section():
    assert tokenization_section({"models": {}}) == []
