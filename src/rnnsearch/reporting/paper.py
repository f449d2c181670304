"""The numbers the papers report (spec section 7), for the tables' "paper" columns."""
from __future__ import annotations

from typing import Any

# Bahdanau et al. 2015, Table 1: WMT'14 En->Fr newstest2014, beam search, BLEU (All, No UNK).
BAHDANAU_TABLE1: dict[str, tuple[float, float]] = {
    "RNNencdec-30": (13.93, 24.19),
    "RNNsearch-30": (21.50, 31.44),
    "RNNencdec-50": (17.82, 26.71),
    "RNNsearch-50": (26.75, 34.16),
    "RNNsearch-50*": (28.45, 36.15),
    "Moses": (33.30, 35.63),
}

# Luong et al. 2015, WMT'14 En->De newstest2014: (attention, score) -> (BLEU before UNK
# replacement, perplexity). "location" has no counterpart among this project's scores.
LUONG_VARIANTS: dict[tuple[str, str], tuple[float, float]] = {
    ("global", "location"): (18.1, 6.4),
    ("global", "dot"): (18.6, 6.1),
    ("global", "general"): (17.3, 6.1),
    ("local_m", "general"): (18.6, 6.2),
    ("local_p", "dot"): (18.0, 6.6),
    ("local_p", "general"): (19.0, 5.9),
}
LUONG_INPUT_FEEDING_GAIN = 1.3   # "input feeding adds about +1.3 BLEU"

# AERs: the diagonal baseline on this gold set; published anchors as (data set, AER).
ALIGNMENT_ANCHORS: dict[str, Any] = {
    "diagonal": "0.54 (measured when the gold set was added)",
    "published": {
        "Luong et al. 2015, global attention (location)": ("RWTH German-English, 508 sentences", "0.39"),
        "Luong et al. 2015, local-m (general)": ("RWTH German-English, 508 sentences", "0.34"),
        "Luong et al. 2015, local-p (general)": ("RWTH German-English, 508 sentences", "0.36"),
        "Berkeley aligner (in Luong et al. 2015)": ("RWTH German-English, 508 sentences", "0.32"),
    },
    "note": ("Published anchors: Luong et al. 2015 (Table 6) scored their attention models' "
             "alignments on German-English (RWTH gold set), not on these sentences. Och & Ney 2003 "
             "report IBM-1, HMM and Model 4 on the 500 hand-aligned Hansard sentences this set was "
             "drawn from; their numbers are not copied here, because they could not be checked "
             "against the paper where this table was made."),
}

DISPLAY = {"encdec": "RNNencdec", "search": "RNNsearch", "search_cond": "RNNsearch-cond",
           "transformer": "Transformer"}


def display_name(model: str, max_len: int | None) -> str:
    """``search``, 50 -> ``RNNsearch-50`` (the paper's naming); other models keep their name."""
    name = DISPLAY.get(model, model)
    return f"{name}-{max_len}" if max_len is not None else name
