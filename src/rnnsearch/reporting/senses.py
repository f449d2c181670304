"""The word-sense table and PCA figure from ``metrics/senses.json`` (also logged by the stage)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from rnnsearch.errors import DataError
from rnnsearch.reporting.tables import Table, fmt  # noqa: E402

SIDES = ("src", "tgt")
WORD_KEYS = ("occurrences", "clustered", "k", "k_chosen_by", "silhouette", "single_neighbours",
             "senses", "pca")                       # every split word's entry
RERUN = "rerun the senses stage"


def check_senses(path: Path, data: dict[str, Any]) -> None:
    """The keys the table and figure read; a missing one raises :class:`DataError` naming it."""
    def need(mapping: Any, key: str, where: str, kind: type = object) -> Any:
        if not isinstance(mapping, Mapping) or key not in mapping or \
                not isinstance(mapping[key], kind):
            raise DataError(f"{path}: missing or malformed key '{where}{key}'; {RERUN}")
        return mapping[key]

    for side in (s for s in SIDES if s in data):
        need(data[side], "lang", f"{side}.", str)
        need(data[side], "skipped", f"{side}.", dict)
        for word, entry in need(data[side], "words", f"{side}.", dict).items():
            for key in WORD_KEYS:
                need(entry, key, f"{side}.words.{word}.")


def _sides(senses: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The per-side parts of the metrics (``src``, ``tgt``; not ``environment``)."""
    return [senses[side] for side in SIDES if side in senses]


def _near(pairs: Sequence[Sequence[Any]]) -> str:
    return ", ".join(f"{word} ({cosine:.2f})" for word, cosine in pairs) or fmt(None)


def _too_rare(data: Mapping[str, Any]) -> str:
    """`` k = 3 not chosen: a sense of 10 occurrences, ...`` per k left out because retrained
    word2vec would drop a sense (``""`` when the metrics record none)."""
    return "".join(f" k = {k} not chosen: a sense of {min(sizes)} occurrences, under "
                   f"embed.min_count {data['min_sense_size']} (word2vec would give it no vector)."
                   for k, sizes in data.get("too_rare", {}).items())


def senses_table(senses: Mapping[str, Any]) -> Table:
    """Each split word's single-vector neighbours, then each sense's size, typical context words
    and retrained-vector neighbours; notes: how k was chosen, which words were not split and why."""
    rows, notes = [], []
    for side in _sides(senses):
        for word, data in side["words"].items():
            rows.append((side["lang"], word, "single vector", fmt(data["occurrences"]), fmt(None),
                         _near(data["single_neighbours"])))
            rows += [("", "", s["label"], fmt(s["size"]), ", ".join(s["contexts"]),
                      _near(s["neighbours"])) for s in data["senses"]]
            scores = ", ".join(f"{k}: {v:.3f}" for k, v in data["silhouette"].items())
            notes.append(f"{side['lang']} '{word}': k = {data['k']} ({data['k_chosen_by']}; "
                         f"silhouette {scores}), {data['clustered']} occurrences clustered."
                         + _too_rare(data))
        notes += [f"{side['lang']} '{word}' not split: {why}."
                  for word, why in side["skipped"].items()]
    notes.append("Senses: k-means of each occurrence's context (mean of the embed stage's unit "
                 "vectors within senses.window words), relabelled word_1 ... word_k (word_1 the "
                 "most frequent), word2vec retrained; a sense's neighbours leave out the word's "
                 "other senses. Typical context: the words most over-represented around that "
                 "sense. The single vector's neighbours are the embed stage's.")
    return Table("Word senses: one vector per sense against the single vector",
                 ("Language", "Word", "Vector", "Occurrences", "Typical context",
                  "Nearest neighbours (cosine)"), tuple(rows), tuple(notes))


def senses_figure(senses: Mapping[str, Any]) -> Figure | None:
    """Split words' sense vectors and neighbours on two principal components (None: no word)."""
    panels = {f"{side['lang']} '{word}'": data["pca"]
              for side in _sides(senses) for word, data in side["words"].items()}
    if not panels:
        return None
    return projection_figure(panels, "Word senses: sense vectors and their neighbours (PCA)")


def projection_figure(panels: Mapping[str, Sequence[Mapping[str, Any]]], title: str) -> Figure:
    """One panel per word: points ``{"word", "sense", "is_sense", "x", "y"}`` coloured by sense,
    the sense vectors themselves as large stars labelled in bold."""
    cols = min(len(panels), 3)
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.0 * cols, 4.4 * rows), squeeze=False)
    colours = plt.get_cmap("tab10")
    for ax, (name, points) in zip(axes.flat, panels.items()):
        for point in points:
            colour, big = colours((point["sense"] - 1) % 10), point["is_sense"]
            ax.scatter(point["x"], point["y"], color=colour, s=80 if big else 12,
                       marker="*" if big else "o")
            ax.annotate(point["word"], (point["x"], point["y"]), fontsize=9 if big else 7,
                        fontweight="bold" if big else "normal", color=colour)
        ax.set_title(name, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
