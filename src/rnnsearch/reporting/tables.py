"""Tables as data (a header and rows of cells) rendered to Markdown and LaTeX; numbers are
formatted here, once, so both forms agree and a rerun gives byte-identical files."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from rnnsearch.config.trees import flatten

MISSING = "–"


def fmt(value: Any, digits: int = 2) -> str:
    """A table cell: numbers rounded, None as a dash, everything else as text."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


@dataclass(frozen=True)
class Table:
    """A titled table; ``notes`` are printed under it."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", markdown_head(self.header)]
        lines += [markdown_row(row) for row in self.rows]
        for note in self.notes:
            lines += ["", note]
        return "\n".join(lines) + "\n"

    def latex(self) -> str:
        spec = "l" + "r" * (len(self.header) - 1)
        body = [" & ".join(_tex(c) for c in row) + r" \\" for row in self.rows]
        lines = [r"\begin{table}[t]", r"\centering", rf"\begin{{tabular}}{{{spec}}}", r"\hline",
                 " & ".join(_tex(h) for h in self.header) + r" \\", r"\hline", *body, r"\hline",
                 r"\end{tabular}", rf"\caption{{{_tex(self.title)}}}", r"\end{table}"]
        return "\n".join(lines) + "\n"


def bucket_words(label: str) -> str:
    """A length bucket's metrics key as the reports show it, in source words: ``0-10`` (above 0,
    up to 10 words) -> ``1-10``, ``4-5`` -> ``5``, ``60+`` -> ``61+``; any other text as is."""
    low, dash, high = label.partition("-")
    if label.endswith("+") and label[:-1].isdigit():
        return f"{int(label[:-1]) + 1}+"
    if not (dash and low.isdigit() and high.isdigit()):
        return label
    first = int(low) + 1
    return high if first == int(high) else f"{first}-{high}"


def markdown_head(header: Sequence[str]) -> str:
    """A Markdown table's header line and the rule under it (two lines, no final newline)."""
    return markdown_row(header) + "\n|" + "|".join("---" for _ in header) + "|"


def markdown_row(cells: Sequence[str]) -> str:
    """One Markdown table row, for a table printed a row at a time."""
    return "| " + " | ".join(cells) + " |"


def _tex(text: str) -> str:
    """Escape LaTeX's special characters."""
    out = text.replace("\\", r"\textbackslash{}")
    for char in "&%$#_{}":
        out = out.replace(char, "\\" + char)
    return out.replace("–", "--").replace("~", r"\textasciitilde{}").replace("^", r"\^{}")


def flat_items(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """``{"a": {"b": 1}}`` -> ``[("a.b", 1)]`` (:func:`~rnnsearch.config.trees.flatten`), a list
    of scalars as one value, a list holding mappings or lists left out."""
    items: list[tuple[str, Any]] = []
    for key, value in flatten(data).items():
        if isinstance(value, list):
            if any(isinstance(v, (dict, list)) for v in value):
                continue
            value = ", ".join(map(str, value))
        items.append((key, value))
    return items


def key_value_table(title: str, data: dict[str, Any], notes: Sequence[str] = ()) -> Table:
    """A metrics file (the embed, LM stages') as a two-column table, without ``environment``."""
    rows = tuple((key, fmt(value, 4)) for key, value in flat_items(data)
                 if not key.startswith("environment."))
    return Table(title, ("metric", "value"), rows, tuple(notes))
