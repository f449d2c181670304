"""Corpus cleaning as Moses' ``clean-corpus-n.perl`` does it, and seeded sampling.

Non-white-space control characters (Cc) go first (a line of only those would be an empty source
still "translated"); white-space ones (``\x0b``, ``\x0c``, ``\x1c``-``\x1f``, ``\x85``) separate
words. A pair counts under the first rule that drops it: ``empty``, ``control``, ``too_short`` /
``too_long``, ``ratio``, in white-space words of the raw text."""
from __future__ import annotations

import html
import html.entities
import math
import random
import re
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class CleanRules:
    """Bounds of the clean-corpus-n rules (words)."""

    min_len: int = 1
    max_len: int = 80
    max_ratio: float = 9.0


# The field of CleanRules behind each drop reason that has one (``empty``, ``control``: none).
RULE_FIELDS = {"too_short": "min_len", "too_long": "max_len", "ratio": "max_ratio"}
# Drops only a side without words (``empty``/``control``): a user's test set stays comparable.
USABLE_ONLY = CleanRules(min_len=1, max_len=sys.maxsize, max_ratio=math.inf)
ENTITY = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


def is_entity(match: re.Match) -> bool:
    """True when the ``&...;`` of ``match`` is numeric or an HTML5 named entity."""
    name = match.group(1)
    return name.startswith("#") or f"{name};" in html.entities.html5


def count_entities(lines: Sequence[str]) -> dict[str, int]:
    """``{"occurrences": n, "lines": m}``: HTML/XML entities in ``lines``, lines holding one."""
    occurrences = holding = 0
    for line in lines:
        if "&" not in line:             # the common case, fast
            continue
        found = sum(1 for match in ENTITY.finditer(line) if is_entity(match))
        occurrences += found
        holding += found > 0
    return {"occurrences": occurrences, "lines": holding}


def unescape_lines(lines: Sequence[str]) -> list[str]:
    """``lines`` with HTML/XML entities turned into characters (:func:`html.unescape`)."""
    return [html.unescape(line) if "&" in line else line for line in lines]


def normalise_space(line: str) -> str:
    """Strip and fold runs of white space to one space."""
    return " ".join(line.split())


def strip_control(line: str) -> str:
    """``line`` without its control characters (category Cc) other than white space."""
    if line.isprintable():          # the common case, fast: no control character at all
        return line
    return "".join(c for c in line if c.isspace() or unicodedata.category(c) != "Cc")


def sentence_length(line: str) -> int:
    """The pipeline's one sentence length (docs/contracts.md): white-space words of the prepared
    (cleaned, untokenised) text; cleaning bounds, test length buckets and BLEU by length use it."""
    return len(line.split())


def length_rule(n_src: int, n_tgt: int, rules: CleanRules) -> str | None:
    """The rule that drops a pair of ``n_src`` and ``n_tgt`` words, or None to keep it."""
    if n_src == 0 or n_tgt == 0:
        return "empty"
    if min(n_src, n_tgt) < rules.min_len:
        return "too_short"
    if max(n_src, n_tgt) > rules.max_len:
        return "too_long"
    if max(n_src, n_tgt) / min(n_src, n_tgt) > rules.max_ratio:
        return "ratio"
    return None


def clean_line(line: str) -> tuple[bool, str, int]:
    """``(has a word, cleaned line, its length)``: :func:`strip_control` then
    :func:`normalise_space`, in one split when the line has no control character."""
    words = line.split()
    spaced = " ".join(words)
    if spaced.isprintable():        # the common case, fast
        return bool(words), spaced, len(words)
    cleaned = normalise_space(strip_control(spaced))
    return bool(words), cleaned, sentence_length(cleaned)


def clean_pairs(src: Sequence[str], tgt: Sequence[str], rules: CleanRules
                ) -> tuple[list[str], list[str], dict[str, int]]:
    """Clean both sides and drop pairs by ``rules``; returns the kept sides and drop counts."""
    kept_src, kept_tgt = [], []
    dropped: Counter = Counter({"empty": 0, "control": 0, "too_short": 0, "too_long": 0,
                                "ratio": 0})
    for s, t in zip(src, tgt):
        (had_s, s, n_s), (had_t, t, n_t) = clean_line(s), clean_line(t)
        reason = length_rule(n_s, n_t, rules)
        if reason == "empty" and had_s and had_t:
            reason = "control"
        if reason:
            dropped[reason] += 1
        else:
            kept_src.append(s)
            kept_tgt.append(t)
    return kept_src, kept_tgt, dict(dropped)


def sample_indices(n: int, size: int, seed: int) -> list[int]:
    """``size`` distinct seeded indices of ``range(n)``, sorted; all for ``size`` 0 or >= n."""
    if size <= 0 or size >= n:
        return list(range(n))
    return sorted(random.Random(seed).sample(range(n), size))


def bucket_of(length: int, edges: Sequence[int]) -> int | None:
    """Index of the first bucket whose upper edge is >= ``length`` (None: beyond the last)."""
    for index, edge in enumerate(edges):
        if length <= edge:
            return index
    return None


def stratified_indices(lengths: Sequence[int], edges: Sequence[int], per_bucket: int,
                       seed: int, max_share: float = 1.0) -> tuple[list[int], list[int]]:
    """Up to ``per_bucket`` seeded indices per length bucket ``(edges[i-1], edges[i]]``, at most
    ``max_share`` of its members (rounded down; a test set held out of training takes half, so
    training keeps every length). Returns the indices (corpus order) and the count per bucket."""
    members: list[list[int]] = [[] for _ in edges]
    for index, length in enumerate(lengths):
        bucket = bucket_of(length, edges)
        if bucket is not None:
            members[bucket].append(index)
    rng = random.Random(seed)
    chosen: list[int] = []
    counts = []
    for group in members:
        size = min(per_bucket, int(len(group) * max_share))
        take = group if len(group) <= size else rng.sample(group, size)
        chosen.extend(take)
        counts.append(len(take))
    return sorted(chosen), counts
