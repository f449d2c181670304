"""The paper's tables and figures from metrics files: Table 1, Luong's variants table, decode
speed, word-vector and LM tables, Figure 2 (BLEU by length), Figure 3 (alignments)."""
from __future__ import annotations

from typing import Any, Iterable

from matplotlib.figure import Figure

from rnnsearch.config.evaluate import SEARCH_ERROR_SHARES
from rnnsearch.reporting.figures import alignment_figure, bleu_by_length_figure, length_curve
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.reporting.paper import (BAHDANAU_TABLE1, LUONG_INPUT_FEEDING_GAIN, LUONG_VARIANTS,
                                       display_name)
from rnnsearch.reporting.tables import Table, bucket_words, fmt, key_value_table


def _name(metrics: dict[str, Any]) -> str:
    return display_name(metrics["model"]["name"], metrics["model"].get("max_len"))


def _score(metrics: dict[str, Any], system: str, subset: str) -> float | None:
    return metrics["systems"].get(system, {}).get(subset, {}).get("bleu")


def table1(inputs: ReportInputs, method: str = "beam") -> Table:
    """Bahdanau et al.'s Table 1: BLEU on all test sentences and on those with no UNK; the
    paper's columns and rows only when the run is in the paper's setting (En->Fr)."""
    paper = inputs.in_setting_of("bahdanau")
    rows = []
    for cell in inputs.ordered_cells():
        m = inputs.evals[cell]
        vs = m["systems"].get(method, {}).get("vs_baseline")
        ours = (_name(m), fmt(_score(m, "greedy", "all")), fmt(_score(m, "greedy", "no_unk")),
                fmt(_score(m, "beam", "all")), fmt(_score(m, "beam", "no_unk")),
                fmt(_score(m, "beam_unk", "all")),
                *(fmt((vs or {}).get(subset, {}).get("p_value"), 3) for subset in ("all", "no_unk")))
        rows.append(ours + (tuple(fmt(x) for x in BAHDANAU_TABLE1.get(ours[0], (None, None)))
                            if paper else ()))
    columns = ("Model", "Greedy All", "Greedy No UNK", "Beam All", "Beam No UNK",
               "Beam+UNK repl. All", f"p All ({method} vs baseline)", f"p No UNK ({method})")
    if paper:
        named = {row[0] for row in rows}
        rows += [(f"{name} (paper only)",) + (fmt(None),) * 7 + (fmt(all_), fmt(no_unk))
                 for name, (all_, no_unk) in BAHDANAU_TABLE1.items() if name not in named]
        columns += ("Paper All", "Paper No UNK")
    return Table("Table 1: BLEU on the test set (all sentences / no unknown word)", columns,
                 tuple(rows), _table1_notes(inputs, method, paper))


def _table1_notes(inputs: ReportInputs, method: str, paper: bool) -> tuple[str, ...]:
    if not inputs.evals:
        return ("No metrics/eval/*.json found: run the evaluate stage.",)
    first = inputs.evals[inputs.ordered_cells()[0]]
    beam = first["systems"].get(method) or next(iter(first["systems"].values()))
    corpus = inputs.corpus
    named = f" ({corpus.test_set}, {corpus.pair})" if corpus is not None else ""
    notes = (f"Test set{named}: {first['sentences']} sentences, {first['no_unk_sentences']} "
             "with no unknown word in source or reference (the No UNK column)."
             + subword_no_unk_note(first),
             f"BLEU: sacreBLEU `{beam['all'].get('bleu_signature', '?')}` on detokenised output "
             "against the raw references. p: paired bootstrap resampling against the "
             "no-attention model of the same maximum length, on all sentences and within the "
             "No UNK subset.")
    if paper:
        return notes + ("Paper: Bahdanau et al. 2015, WMT'14 En->Fr newstest2014 (3,003 "
                        "sentences), 30k vocabularies, about 5 days of training per model, "
                        "beam search.",)
    return notes + (no_paper_note(inputs, "Bahdanau et al.'s numbers are En->Fr (WMT'14)"),)


def no_paper_note(inputs: ReportInputs, paper: str) -> str:
    """Why a table has no paper column: another setting, or none recorded in prepare.json."""
    if inputs.corpus is None:
        return (f"No paper column: {paper}; this run's metrics/prepare.json does not record its "
                "corpus (written before the prepare stage recorded it).")
    return f"No paper column: {paper}, which this run is not."


def subword_no_unk_note(first: dict[str, Any]) -> str:
    """Subword units put nearly every sentence in No UNK: say so, with the ``no_unk_words``
    count (no word outside word-level vocabularies of the run's sizes); ``""`` for word units."""
    if "no_unk_words_sentences" not in first:
        return ""
    return (f" With subword units a word outside the vocabulary is spelt in pieces, so No UNK "
            f"holds nearly every sentence; {first['no_unk_words_sentences']} have no word "
            f"outside word-level vocabularies of the run's sizes (metrics/eval no_unk_words, "
            f"the subset a word-level run's No UNK is).")


def variants_table(inputs: ReportInputs, method: str = "beam") -> Table | None:
    """Luong et al.'s attention variants: dev perplexity and test BLEU (None: no Luong cell)."""
    rows = []
    for cell in inputs.ordered_cells():
        m = inputs.evals[cell]
        model = m["model"]
        if model.get("kind") != "luong":
            continue
        train = inputs.train.get(cell, {})
        ppl = train.get("val_ppl")
        paper = LUONG_VARIANTS.get((model.get("attention"), model.get("score")))
        rows.append((cell, fmt(model.get("attention")), fmt(model.get("score")),
                     fmt(model.get("input_feeding")), fmt(ppl), fmt(_score(m, method, "all")),
                     f"{paper[0]:.1f} ({paper[1]:.1f})" if paper else fmt(None)))
    if not rows:
        return None
    columns = ("Cell", "Attention", "Score", "Input feeding", "Dev ppl", f"Test BLEU ({method})")
    title = "Attention variants (Luong et al. 2015): dev perplexity and test BLEU"
    if not inputs.in_setting_of("luong"):
        return Table(title, columns, tuple(row[:-1] for row in rows),
                     (no_paper_note(inputs, "Luong et al.'s numbers are En->De (WMT'14)"),))
    return Table(title, columns + ("Paper BLEU (ppl)",), tuple(rows),
                 ("Paper: WMT'14 En->De newstest2014, BLEU before UNK replacement; input feeding "
                  f"adds about +{LUONG_INPUT_FEEDING_GAIN} BLEU there.",))


def speed_table(inputs: ReportInputs) -> Table:
    """Decode speed per cell: batched and one sentence at a time."""
    columns = ("greedy", "greedy_unbatched", "beam", "beam_unbatched")
    rows = []
    for cell in inputs.ordered_cells():
        speed = inputs.evals[cell].get("speed", {})
        rows.append((cell, *(fmt(speed.get(c, {}).get("sentences_per_s"), 1) for c in columns)))
    batch = next((s["greedy"]["batch_size"] for s in (m.get("speed", {}) for m in inputs.evals.values())
                  if "greedy" in s), None)
    return Table("Decode speed (sentences/s)",
                 ("Cell", "Greedy", "Greedy, one at a time", "Beam", "Beam, one at a time"),
                 tuple(rows), (f"Batched runs use batch size {fmt(batch)}.",))


def search_error_table(inputs: ReportInputs) -> Table | None:
    """Search and model errors per cell as shares (Stahlberg & Byrne 2019); None: none measured."""
    cells = [cell for cell in inputs.ordered_cells() if cell in inputs.search_errors]
    if not cells:
        return None
    rows = tuple((_name(inputs.evals[cell]), fmt(inputs.search_errors[cell]["sentences"]),
                  *(fmt(inputs.search_errors[cell][share], 3) for share in SEARCH_ERROR_SHARES))
                 for cell in cells)
    first = inputs.search_errors[cells[0]]
    return Table("Search errors and model errors (Stahlberg & Byrne 2019): shares of sentences",
                 ("Model", "Sentences", "Reference above beam", "Wide beam above beam",
                  "Model error"), rows,
                 (f"The first test sentences, each output ranked as the beam ranks it "
                  f"(beam {first['beam_size']}, stop {first['stop']}, length penalty "
                  f"{first['length_penalty']}). Reference above beam: the force-decoded "
                  f"reference outscores the beam's output, a search error for certain. Wide beam "
                  f"above beam: a beam of {first['wide_beam']} finds a better output, an error a "
                  "wider search repairs. Model error: the beam's output is not the reference, yet "
                  "the model scores it at least as high.",))


def length_table(inputs: ReportInputs, method: str = "beam", min_sentences: int = 1) -> Table:
    """Figure 2 as numbers: BLEU (sentences) per source-length bucket and model; a bucket of
    fewer than ``min_sentences`` sentences marked (it has no point in the figure)."""
    cells = [c for c in inputs.ordered_cells() if method in inputs.evals[c]["systems"]]
    labels = [k for k in inputs.evals[cells[0]]["systems"][method]["by_length"]
              if k != "signature"] if cells else []
    rows, counts = [], []
    for label in labels:
        row = [bucket_words(label)]
        for cell in cells:
            bucket = inputs.evals[cell]["systems"][method]["by_length"][label]
            few = "; too few" if bucket["n"] < min_sentences else ""
            row.append(f"{fmt(bucket['bleu'])} ({bucket['n']}{few})")
            counts.append(bucket["n"])
        rows.append(tuple(row))
    return Table(f"BLEU by source sentence length ({method}; sentences in brackets)",
                 ("Length", *(_name(inputs.evals[c]) for c in cells)), tuple(rows),
                 few_note(min_sentences, counts))


def few_note(min_sentences: int, counts: Iterable[int]) -> tuple[str, ...]:
    """A by-length table's note on buckets (of ``counts`` sentences) under ``min_sentences``."""
    if all(n >= min_sentences for n in counts):
        return ()
    return (f"A bucket of fewer than {min_sentences} test sentences (evaluate.min_bucket_sentences)"
            f" is marked 'too few': no p-value, no point in Figure 2.",)


def gain_table(inputs: ReportInputs, cell: str, method: str = "beam", min_sentences: int = 1
               ) -> Table | None:
    """Figure 2's relative claim for an attention cell per length bucket: BLEU over the baseline's,
    that over the shortest bucket's, p (``too few`` under ``min_sentences``) and both length
    ratios; None without scores or baseline."""
    if cell not in inputs.evals:
        return None
    system = inputs.evals[cell]["systems"].get(method, {})
    vs = system.get("vs_baseline")
    if not vs or vs["baseline"] not in inputs.evals:
        return None
    base = inputs.evals[vs["baseline"]]["systems"][method]["by_length"]
    ours = system["by_length"]
    labels = [label for label in ours if label != "signature"]
    ratios = {label: ours[label]["bleu"] / base[label]["bleu"] if base[label]["bleu"] else None
              for label in labels}
    first = ratios[labels[0]]
    p_values = {label: "too few" if ours[label]["n"] < min_sentences
                else fmt(vs["by_length"].get(label), 3) for label in labels}
    rows = tuple((bucket_words(label), fmt(ours[label]["n"]), fmt(ours[label]["bleu"]),
                  fmt(base[label]["bleu"]), fmt(ratios[label]), fmt(ratios[label] / first if ratios[label] and first else None),
                  p_values[label], fmt(ours[label].get("len_ratio")),
                  fmt(base[label].get("len_ratio")))
                 for label in labels)
    ours_name, base_name = _name(inputs.evals[cell]), _name(inputs.evals[vs["baseline"]])
    return Table(f"Attention's gain by source length: {ours_name} vs {base_name} ({method})",
                 ("Length", "Sentences", f"{ours_name} BLEU", f"{base_name} BLEU", "BLEU ratio",
                  f"Ratio / ratio at {bucket_words(labels[0])}", "p (bootstrap)",
                  f"{ours_name} hyp/ref length", f"{base_name} hyp/ref length"), rows,
                 ("Bahdanau et al.'s Figure 2 claim, relative form: the ratio grows with length. "
                  "A hyp/ref length ratio far above 1 means over-long (looping) output.",
                  *few_note(min_sentences, (ours[label]["n"] for label in labels))))


def gain_tables(inputs: ReportInputs, method: str = "beam", min_sentences: int = 1
                ) -> dict[str, Table]:
    """:func:`gain_table` for every attention cell that has a baseline."""
    tables = {f"gain_{cell}": gain_table(inputs, cell, method, min_sentences)
              for cell in inputs.ordered_cells()}
    return {name: table for name, table in tables.items() if table is not None}


def other_tables(inputs: ReportInputs) -> dict[str, Table]:
    """The word-vector and language-model stages' metrics, when those files exist."""
    tables = {}
    if inputs.embed is not None:
        tables["word_vectors"] = key_value_table("Word vectors (embed stage)", inputs.embed)
    if inputs.lm is not None:
        tables["language_model"] = key_value_table("Language model (pretrain_lm stage)", inputs.lm)
    return tables


def figure2(inputs: ReportInputs, method: str = "beam", min_sentences: int = 1) -> Figure:
    """BLEU against source length, one curve per model (Bahdanau et al.'s Figure 2), with the
    sentences per bucket; no point from a bucket of fewer than ``min_sentences``."""
    curves = {_name(inputs.evals[cell]): length_curve(inputs.evals[cell]["systems"][method]
                                                      ["by_length"], min_sentences)
              for cell in inputs.ordered_cells() if method in inputs.evals[cell]["systems"]}
    return bleu_by_length_figure(curves, f"BLEU by source sentence length ({method})",
                                 min_sentences)


def figure3(inputs: ReportInputs, sentences: int) -> dict[str, Figure]:
    """Alignment heatmaps per attention model (Bahdanau et al.'s Figure 3)."""
    return {cell: alignment_figure(data["samples"][:sentences], f"Alignments: {cell}")
            for cell, data in inputs.alignments.items() if data.get("samples")}
