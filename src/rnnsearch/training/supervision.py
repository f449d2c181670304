"""Supervised attention (Liu, Utiyama, Finch & Sumita 2016): attention pulled to aligner links.

The align stage's ``train.links``/``dev.links`` hold Pharaoh ``i-j`` links (0-based source i,
target j) per pair. A linked target word j gets ``ã_{j,i} = 1 / |links of j|``; the loss is
``-sum_i ã_{j,i} log a_{j,i}``, averaged over the batch's linked target words (others add 0)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

from rnnsearch.data.textio import read_json, read_lines
from rnnsearch.errors import DataError

Links = tuple[tuple[int, int], ...]   # (source position, target position) pairs of one pair

META_FILE = "meta.json"
FLOOR = 1e-6   # attention weights below this count as this (local attention gives exact zeros)


def parse_links(line: str, where: str) -> Links:
    """``"0-0 1-2"`` -> ((0, 0), (1, 2)); a malformed link raises naming ``where``."""
    links = []
    for link in line.split():
        source, dash, target = link.partition("-")
        if not (dash and source.isdigit() and target.isdigit()):
            raise DataError(f"{where}: {link!r} is not a link 'i-j' (0-based source and target "
                            f"positions)")
        links.append((int(source), int(target)))
    return tuple(links)


def links_file(folder: str | Path, split: str) -> Path:
    """The links of ``split`` (``train``, ``dev``) in the align stage's ``folder``."""
    return Path(folder) / f"{split}.links"


def read_links(folder: str | Path, split: str, lines: int) -> tuple[list[Links], dict]:
    """``folder``'s ``<split>.links`` (one entry per line of the split; ``lines`` expected) and
    its ``meta.json``; refuses links that the align stage wrote without ``align.train_links``."""
    meta_path, links_path = Path(folder) / META_FILE, links_file(folder, split)
    for path in (meta_path, links_path):
        if not path.is_file():
            raise DataError(f"{path}: missing (run the align stage first)")
    meta = read_json(meta_path)
    if not isinstance(meta, dict) or meta.get("train_links") is None:
        raise DataError(f"{meta_path}: the align stage wrote no training links "
                        f"(align.train_links was null when it ran); rerun it with "
                        f"align.train_links set")
    text = read_lines(links_path)
    if len(text) != lines:
        raise DataError(f"{links_path} has {len(text)} lines but {split}.src has {lines}; "
                        f"rerun the align stage")
    return [parse_links(line, f"{links_path}:{n + 1}") for n, line in enumerate(text)], meta


def check_positions(links: Links, src_len: int, tgt_len: int, where: str) -> None:
    """Every link inside a pair of ``src_len`` x ``tgt_len`` words."""
    for i, j in links:
        if i >= src_len or j >= tgt_len:
            raise DataError(f"{where}: link {i}-{j} is outside the pair's {src_len} source and "
                            f"{tgt_len} target words; rerun the align stage")


def link_distribution(links: Sequence[Links], src_len: int, tgt_len: int) -> torch.Tensor:
    """Per pair, per target position, its links normalised over the source:
    batch x ``tgt_len`` x ``src_len`` (rows of unlinked positions are zero)."""
    counts = torch.zeros(len(links), tgt_len, src_len)
    for row, pair in enumerate(links):
        for i, j in pair:
            counts[row, j, i] = 1.0
    return counts / counts.sum(-1, keepdim=True).clamp(min=1.0)


def supervision_loss(attention: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor,
                                                                                torch.Tensor]:
    """Summed cross-entropy ``-sum ã log a`` of ``attention`` (batch x T x S, row t the weights
    computed while predicting word t) against ``target`` (:func:`link_distribution`, the same
    shape), and the number of linked target positions."""
    log_weights = attention.float().clamp(min=FLOOR).log()            # batch x T x S
    total = -(target * log_weights).sum()
    linked = (target.sum(-1) > 0).sum()
    return total, linked


def supervision_weight(weight: float, decay: float, epoch: int, step: int = 0,
                       decay_steps: int = 0) -> float:
    """The supervision loss' weight ``weight * decay**k`` at 0-based ``epoch`` and optimizer
    ``step``: k is ``step // decay_steps``, or the epoch when ``decay_steps`` is 0."""
    period = step // decay_steps if decay_steps else epoch
    return weight * decay ** period
