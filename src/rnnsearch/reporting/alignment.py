"""Table "Alignment quality" (AER, precision, recall against the Hansard gold links) and the
overlay figure (a gold sentence's attention under its Sure/Possible links), from
``metrics/align.json`` and ``metrics/align_attention.json``."""
from __future__ import annotations

from typing import Any, Mapping

from matplotlib.figure import Figure

from rnnsearch.reporting.figures import gold_overlay_figure
from rnnsearch.reporting.paper import ALIGNMENT_ANCHORS, display_name
from rnnsearch.reporting.tables import Table, fmt

ALIGNERS = {"ibm1": "IBM Model 1", "fast_align": "fast_align (diagonal prior)",
            "fast_align_vb": "fast_align -v (diagonal and Dirichlet priors)"}
LINKS = {"fr|en": "one direction: each French word -> an English word (or none)",
         "en|fr": "one direction: each English word -> a French word (or none)"}


def _row(name: str, links: str, scores: Mapping[str, Any], published: str = "–") -> tuple[str, ...]:
    return (name, links, fmt(scores["aer"], 3), fmt(scores["precision"], 3),
            fmt(scores["recall"], 3), published)


def cell_title(cell: str) -> str:
    """``search-50`` -> ``RNNsearch-50``."""
    model, _, max_len = cell.rpartition("-")
    return display_name(model, int(max_len)) if max_len.isdigit() else cell


def alignment_table(align: Mapping[str, Any] | None, attention: Mapping[str, Any] | None
                    ) -> Table | None:
    """Every aligner's and attention model's scores with published anchors (None: none scored)."""
    rows = []
    if align is not None and "diagonal" in align:
        rows.append(_row("Diagonal baseline", "French word j -> English word round(j * e / f)",
                         align["diagonal"],
                         ALIGNMENT_ANCHORS["diagonal"]))
    for model, entry in (align or {}).get("models", {}).items():
        for links, scores in entry.get("scores", {}).items():
            rows.append(_row(ALIGNERS.get(model, model), LINKS.get(links, links), scores))
    for cell, entry in (attention or {}).get("cells", {}).items():
        for variant, scores in entry.get("scores", {}).items():
            rows.append(_row(cell_title(cell), f"attention, {variant}", scores))
    if not rows:
        return None
    rows += [(f"{name} (paper only)", data, "–", "–", "–", value)
             for name, (data, value) in ALIGNMENT_ANCHORS["published"].items()]
    rows = [tuple(cell.replace("|", "/") for cell in row) for row in rows]   # Markdown-safe
    return Table("Alignment quality: AER against the human links of 447 Hansard sentences",
                 ("Aligner", "Links", "AER", "Precision", "Recall", "Published AER"),
                 tuple(rows), _notes(align, attention))


def no_gold_table(align: Mapping[str, Any] | None) -> Table | None:
    """Instead of :func:`alignment_table` when the language pair has no gold links, else None."""
    if align is None or not isinstance(align.get("gold"), str):
        return None
    return Table("Alignment quality: AER against human links", ("Aligner", "AER"),
                 (("every aligner and attention model", "not measured"),),
                 (f"Not measured for this run: {align['gold']}. The aligners were trained "
                  f"all the same (their log-likelihood is in metrics/align.json).",))


def _notes(align: Mapping[str, Any] | None, attention: Mapping[str, Any] | None
           ) -> tuple[str, ...]:
    if attention is not None and "threshold" not in attention:
        attention = None
    notes = ["AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|), precision = |A∩P| / |A|, recall = "
             "|A∩S| / |S|, counted over all gold sentences (Och & Ney 2003); lower AER is better."]
    if align is not None and isinstance(align.get("gold"), Mapping):
        gold = align["gold"]
        notes.append(
            f"Gold: HLT-NAACL 2003 English-French test set, {gold['sentences']} sentences, "
            f"{gold['sure_links']} Sure and {gold['possible_links']} Possible links (Sure included). "
            f"Its tokens are mapped onto the pipeline's (contractions, elisions and hyphenated words "
            f"restored where the training text writes them so; first word capitalised): "
            f"{gold['fr']['gold_tokens']} French gold words became {gold['fr']['pipeline_tokens']} "
            f"tokens ({gold['fr']['tokens_covering_several']} covering several gold words, e.g. "
            f"du = de + le), {gold['en']['gold_tokens']} English words {gold['en']['pipeline_tokens']} "
            f"tokens. A link between two tokens counts as links between all the gold words they cover.")
        notes.append(f"EM aligners: {align['training_pairs']} training pairs plus the "
                     f"{align['gold_pairs_added']} gold sentences (unannotated), "
                     f"{len(next(iter(align['models'].values()))['log_likelihood']['fr|en']) - 1} "
                     f"EM iterations after the co-occurrence start; NULL word on the source side.")
    if attention is not None:
        notes.append("Attention: teacher-forced decoding of the gold target sentence; argmax = "
                     "each target word's most attended source word, threshold = every source "
                     f"word with weight >= {attention['threshold']}.")
    notes.append(ALIGNMENT_ANCHORS["note"])
    return tuple(notes)


def overlay_figures(attention: Mapping[str, Any] | None) -> dict[str, Figure]:
    """Per attention cell, its weights on the figure sentence with the gold links drawn over."""
    figures = {}
    for cell, entry in (attention or {}).get("cells", {}).items():
        record = entry.get("figure")
        if record:
            figures[cell] = gold_overlay_figure(
                record, f"{cell_title(cell)}: attention on gold sentence {record['id']} "
                        f"(□ Sure, · Possible links)")
    return figures
