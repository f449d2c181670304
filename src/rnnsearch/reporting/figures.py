"""Matplotlib figures from plain data (Agg backend: no display): BLEU against source length
(Figure 2), unigram F1 against training frequency rank (Sennrich et al. 2016), alignment
heatmaps (Figure 3) and attention over gold links."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from rnnsearch.reporting.tables import bucket_words  # noqa: E402

Curve = Sequence[tuple[int, str, float | None]]   # (x = bucket upper edge, label, BLEU or None)
# (x = bucket upper edge, label, BLEU or None, sentences in the bucket)
LengthCurve = Sequence[tuple[int, str, float | None, int]]


def length_curve(by_length: Mapping[str, Any], min_sentences: int = 1) -> LengthCurve:
    """Figure 2's points of one system's ``by_length`` scores; a bucket of fewer than
    ``min_sentences`` sentences keeps its count but gets no BLEU point."""
    return [(row["step"], label, row["bleu"] if row["n"] >= min_sentences else None, row["n"])
            for label, row in by_length.items() if label != "signature"]


def length_plot_rows(systems: Mapping[str, Any], min_sentences: int = 1) -> list[dict[str, Any]]:
    """The DVC plot table of one cell's ``systems`` (metrics/eval/<cell>.json): a row per length
    bucket of ``min_sentences`` sentences or more (Figure 2's points), one BLEU column each."""
    curves = {name: length_curve(system["by_length"], min_sentences)
              for name, system in systems.items()}
    first = next(iter(curves.values()))
    return [{"length": x, "bucket": bucket_words(label), "sentences": n,
             **{name: curve[i][2] for name, curve in curves.items()}}
            for i, (x, label, bleu, n) in enumerate(first) if bleu is not None]


def bleu_by_length_figure(curves: Mapping[str, LengthCurve], title: str,
                          min_sentences: int = 1,
                          bands: Mapping[str, Mapping[int, float | None]] | None = None
                          ) -> Figure:
    """One line per curve; x ticks: the bucket (``1-10``), its sentences (``n=269``; ``n=269/270``
    where test sets differ), ``no point`` under ``min_sentences``. ``bands``: per curve,
    ``{x: half-width}`` of a shaded band around its points (a spread across replicates)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    _plot_curves(ax, {name: [(x, label, bleu) for x, label, bleu, _ in points]
                      for name, points in curves.items()})
    for line, (name, points) in zip(ax.get_lines(), curves.items()):
        _shade(ax, line.get_color(), points, (bands or {}).get(name, {}))
    counts: dict[int, list[int]] = {}
    labels: dict[int, str] = {}
    for points in curves.values():
        for x, label, _, n in points:
            labels[x] = label
            counts.setdefault(x, [])
            if n not in counts[x]:
                counts[x].append(n)
    ticks = sorted(labels)
    ax.set_xticks(ticks, [_length_tick(labels[x], counts[x], min_sentences) for x in ticks],
                  fontsize=8)
    ax.set_xlabel("source sentence length (words); n: test sentences in the bucket")
    ax.set_ylabel("BLEU")
    return _finish(fig, ax, title)


def _shade(ax: Any, color: str, points: LengthCurve, half_widths: Mapping[int, float | None]
           ) -> None:
    """A band ``y ± half_widths[x]`` around a curve's points that have both."""
    band = [(x, y, half_widths[x]) for x, _, y, _ in points
            if y is not None and half_widths.get(x) is not None]
    if band:
        xs, ys, widths = zip(*band)
        ax.fill_between(xs, [y - w for y, w in zip(ys, widths)],
                        [y + w for y, w in zip(ys, widths)], color=color, alpha=0.2, linewidth=0)


def _length_tick(label: str, counts: Sequence[int], min_sentences: int) -> str:
    """A Figure 2 tick: the bucket, its sentence count(s), and ``no point`` below the minimum."""
    tick = f"{bucket_words(label)}\nn={'/'.join(str(n) for n in counts)}"
    return tick + "\nno point" if max(counts) < min_sentences else tick


def f1_by_rank_figure(curves: Mapping[str, Curve], vocabulary_words: int, title: str) -> Figure:
    """Unigram F1 against the word's training frequency rank (Sennrich et al. 2016, Figures 2-3),
    one line per curve name: x is the rank bin's highest rank on a log scale (labelled by the
    bin), the last point the unseen words; a dashed line marks the word-level vocabulary's end."""
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    ax.set_xscale("log")
    _plot_curves(ax, curves, rotation=60)
    ax.minorticks_off()
    ax.axvline(vocabulary_words, color="gray", linestyle="--", linewidth=1,
               label=f"vocabulary ({vocabulary_words} words)")
    ax.set_xlabel("training frequency rank of the word (bin)")
    ax.set_ylabel("unigram F1 (%)")
    return _finish(fig, ax, title, legend_size=7)


def _plot_curves(ax: Any, curves: Mapping[str, Curve], rotation: float = 0) -> None:
    """A marked line per curve (points without a value left out); a labelled x tick per point."""
    ticks: dict[int, str] = {}
    for name, points in curves.items():
        xs = [x for x, _, y in points if y is not None]
        ys = [y for _, _, y in points if y is not None]
        ax.plot(xs, ys, marker="o", label=name)
        ticks.update({x: label for x, label, _ in points})
    ax.set_xticks(sorted(ticks), [ticks[x] for x in sorted(ticks)],
                  **({"rotation": rotation, "fontsize": 7} if rotation else {}))


def _finish(fig: Figure, ax: Any, title: str, legend_size: float | None = None) -> Figure:
    """Title, grid, legend and a tight layout."""
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(**({"fontsize": legend_size} if legend_size else {}))
    fig.tight_layout()
    return fig


def alignment_figure(samples: Sequence[Mapping[str, Any]], title: str) -> Figure:
    """Heatmaps of attention weights: target words as rows, source words as columns."""
    count = max(len(samples), 1)
    fig, axes = plt.subplots(1, count, figsize=(4.2 * count, 4.2), squeeze=False)
    for ax, sample in zip(axes[0], samples):
        weights = np.asarray(sample["attention"], dtype=float)     # tgt x src
        ax.imshow(weights, cmap="gray", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(sample["source"])), sample["source"], rotation=90, fontsize=7)
        ax.set_yticks(range(len(sample["target"])), sample["target"], fontsize=7)
        ax.xaxis.tick_top()
        ax.set_xlabel(f"test sentence {sample['index']}", fontsize=8)
    for ax in axes[0][len(samples):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def gold_overlay_figure(record: Mapping[str, Any], title: str) -> Figure:
    """Attention weights (target rows, source columns) of one gold sentence, its Sure links
    drawn as squares and its Possible-only links as dots."""
    weights = np.asarray(record["weights"], dtype=float)                  # tgt x src
    height = max(3.5, 0.28 * len(record["target"]) + 1.5)
    width = max(4.0, 0.28 * len(record["source"]) + 2.0)
    fig, ax = plt.subplots(figsize=(width, height))
    ax.imshow(weights, cmap="gray", vmin=0.0, vmax=1.0, aspect="auto")
    sure = {tuple(link) for link in record["sure"]}
    for j, i in sure:
        ax.add_patch(Rectangle((i - 0.45, j - 0.45), 0.9, 0.9, fill=False,
                               edgecolor="tab:red", linewidth=1.4))
    possible = [link for link in record["possible"] if tuple(link) not in sure]
    if possible:
        ax.scatter([i for _, i in possible], [j for j, _ in possible], s=10, color="tab:orange")
    ax.set_xticks(range(len(record["source"])), record["source"], rotation=90, fontsize=7)
    ax.set_yticks(range(len(record["target"])), record["target"], fontsize=7)
    ax.xaxis.tick_top()
    ax.set_title(title, fontsize=9, pad=40)
    fig.tight_layout()
    return fig
