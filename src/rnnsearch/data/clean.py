"""Corpus cleaning as Moses' ``clean-corpus-n.perl`` does it, and seeded sampling.

Non-white-space control characters (Cc) go first: a line of nothing else would be an empty
source still "translated" (white-space ones, ``\x0b``, ``\x0c``, ``\x1c``-``\x1f``, ``\x85``,
separate words). Rules, a pair counted under the first that drops it: ``empty``, ``control``,
``too_short`` / ``too_long``, ``ratio``, in white-space words of the raw text.
:data:`USABLE_ONLY` keeps every pair with words on both sides (a user's whole test file stays
comparable). :func:`count_entities` counts a Moses-escaped corpus's HTML entities."""
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
# Drops only what cannot be used at all: a side without words (``empty``, ``control``).
USABLE_ONLY = CleanRules(min_len=1, max_len=sys.maxsize, max_ratio=math.inf)
ENTITY = re.compile(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


def is_entity(match: re.Match) -> bool:
    """True when the ``&...;`` of ``match`` is numeric or an HTML5 named entity."""
    name = match.group(1)
    return name.startswith("#") or f"{name};" in html.entities.html5


def count_entities(lines: Sequence[str]) -> dict[str, int]:
    """``{"occurrences": n, "lines": m}``: the HTML/XML entities in ``lines`` and how many
    lines hold at least one."""
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
    """A sentence's length, the one definition the pipeline uses (docs/contracts.md): its words
    separated by white space, as the prepared (cleaned, untokenised) text has them. Cleaning's
    bounds, the test split's length buckets and evaluation's BLEU by length all count this."""
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
    """Whether ``line`` holds a word, and the line without control characters and with its
    white space normalised, with its length: what :func:`normalise_space` after
    :func:`strip_control` gives, in one split where the line has no control character."""
    words = line.split()
    spaced = " ".join(words)
    if spaced.isprintable():        # the common case, fast
        return bool(words), spaced, len(words)
    cleaned = normalise_space(strip_control(spaced))
    return bool(words), cleaned, sentence_length(cleaned)


def clean_pairs(src: Sequence[str], tgt: Sequence[str], rules: CleanRules
                ) -> tuple[list[str], list[str], dict[str, int]]:
    """Remove control characters, normalise white space and drop pairs by the rules; returns
    kept pairs and drop counts."""
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
    """``size`` distinct indices of ``range(n)`` drawn with ``seed``, in corpus order.
    ``size`` 0 (or >= n) keeps everything."""
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
    """Up to ``per_bucket`` indices per length bucket ``(edges[i-1], edges[i]]``, seeded, and
    at most ``max_share`` of a bucket's members (rounded down; a test set held out of training pairs
    takes half, so that training keeps every length). Returns the chosen indices (in corpus order)
    and the count taken from each bucket."""
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
