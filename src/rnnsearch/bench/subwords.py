"""The bench's subword part: learning a SentencePiece model on the Moses-tokenised Hansard train
split and applying it to the whole split, with the tokenize stage's own functions and settings.

The settings are ``params.yaml``'s ``tokenize`` section with the ``subword`` preset's overrides
(joint BPE of 10,000 pieces), and the same with ``units: unigram``. The model is learnt by
:func:`rnnsearch.data.subword.train_model` (every sentence, no sampling, one thread, as in the
stage: ``input_sentence_size=0``), a joint model on the source lines followed by the target lines
as the stage does, and applied by :func:`rnnsearch.data.subword.segment` with
``tokenize.workers`` threads. The module imports no torch, so a part run in its own process
(:func:`rnnsearch.bench.__main__._in_fresh_process`) measures SentencePiece's peak memory, not
torch's.
"""
from __future__ import annotations

import resource
import time
from pathlib import Path
from typing import Any

from rnnsearch.config.base import from_dict, read_params
from rnnsearch.config.repository import load_preset, repo_root
from rnnsearch.config.tokenize import TokenizeConfig
from rnnsearch.config.trees import merge
from rnnsearch.data.subword import SIDES, SubwordSpec, load_model, segment, train_model
from rnnsearch.data.textio import read_lines

PRESET = "subword"   # whose tokenize settings the part measures (presets/subword.yaml)


def own_peak_rss_mb() -> float:
    """Peak resident memory of this process' own memory so far (MiB): Linux's ``VmHWM``, which
    starts anew when a process is spawned (``ru_maxrss`` keeps the parent's peak across the
    fork and exec of a spawn, so a small part would read as the whole bench's size); elsewhere
    ``ru_maxrss``."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text(encoding="utf-8").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024     # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def subword_settings(units: str, vocab_size: int | None = None, preset: str = PRESET
                     ) -> TokenizeConfig:
    """``params.yaml``'s tokenize section with ``preset``'s tokenize overrides and ``units``;
    ``vocab_size`` (both sides), when given, replaces the preset's (a small corpus cannot
    fill 10,000 pieces)."""
    settings = merge(read_params(repo_root() / "params.yaml")["tokenize"],
                     load_preset(preset).get("tokenize", {}))
    settings["units"] = units
    if vocab_size is not None:
        settings.update(vocab_size_src=vocab_size, vocab_size_tgt=vocab_size)
    return from_dict(TokenizeConfig, settings, f"presets/{preset}.yaml: tokenize")


def learn(cfg: TokenizeConfig, lines: dict[str, list[str]]) -> dict[str, bytes]:
    """Each side's model, or one joint model on the source lines followed by the target lines
    (the tokenize stage's order)."""
    def spec(side: str) -> SubwordSpec:
        return SubwordSpec(cfg.units, getattr(cfg, f"vocab_size_{side}"),
                           cfg.subword.character_coverage, cfg.subword.seed)
    if cfg.subword.joint:
        model = train_model(lines["src"] + lines["tgt"], spec("src"))
        return {side: model for side in SIDES}
    return {side: train_model(lines[side], spec(side)) for side in SIDES}


def subword_part(tokenized: str, langs: tuple[str, str], units: str,
                 vocab_size: int | None = None) -> dict[str, Any]:
    """Seconds to learn the ``units`` model on ``tokenized/train.<lang>`` (Moses tokens, source
    then target language) and to split both sides into pieces; words, pieces, speeds and the
    process' peak memory after each step."""
    cfg = subword_settings(units, vocab_size)
    lines = {side: read_lines(Path(tokenized) / f"train.{lang}") for side, lang in zip(SIDES, langs)}
    start = time.perf_counter()
    models = learn(cfg, lines)
    learning = time.perf_counter() - start
    out: dict[str, Any] = {
        "units": units, "joint": cfg.subword.joint, "vocab_size": cfg.vocab_size_src,
        "character_coverage": cfg.subword.character_coverage, "seed": cfg.subword.seed,
        "input_sentence_size": 0, "learning_threads": 1, "applying_threads": cfg.workers,
        "sentences": sum(len(side) for side in lines.values()),
        "seconds_learning": learning, "peak_rss_mb_learning": own_peak_rss_mb()}
    start = time.perf_counter()
    pieces = {side: segment(load_model(models[side], f"{units} model"), lines[side], cfg.workers,
                            desc=f"segment hansard train.{lang}")
              for side, lang in zip(SIDES, langs)}
    applying = time.perf_counter() - start
    words = sum(len(line.split()) for side in lines.values() for line in side)
    count = sum(len(line.split()) for side in pieces.values() for line in side)
    out.update(seconds_applying=applying, words=words, pieces=count,
               pieces_per_word=count / words if words else 0.0,
               words_per_s_applying=words / applying if applying else 0.0,
               peak_rss_mb=own_peak_rss_mb())
    return out
