"""clean-corpus-n rules, seeded sampling and length stratification."""
from __future__ import annotations

from rnnsearch.data.clean import (USABLE_ONLY, CleanRules, clean_pairs, count_entities,
                                  normalise_space, sample_indices, strip_control,
                                  stratified_indices, unescape_lines)


def test_each_rule_counts_what_it_drops():
    src = ["a b c", "   ", "x", "one two three four five six", "p q", "ok  fine "]
    tgt = ["d e f", "vide", "y", "un", "r s t u v w x y z", "ok fine"]
    kept_src, kept_tgt, dropped = clean_pairs(src, tgt, CleanRules(min_len=1, max_len=8, max_ratio=3))
    assert dropped == {"empty": 1, "control": 0, "too_short": 0, "too_long": 1, "ratio": 1}
    assert kept_src == ["a b c", "x", "ok fine"]  # white space folded
    assert kept_tgt == ["d e f", "y", "ok fine"]


def test_min_len_rule():
    _, _, dropped = clean_pairs(["a", "a b c"], ["b", "d e f"], CleanRules(min_len=2))
    assert dropped["too_short"] == 1


def test_sampling_is_seeded_and_ordered():
    first = sample_indices(1000, 50, seed=7)
    assert first == sample_indices(1000, 50, seed=7)
    assert first != sample_indices(1000, 50, seed=8)
    assert first == sorted(first) and len(set(first)) == 50
    assert sample_indices(10, 0, seed=1) == list(range(10))
    assert sample_indices(10, 99, seed=1) == list(range(10))


def test_stratified_sampling_per_bucket():
    lengths = [3] * 20 + [15] * 5 + [25] * 20 + [99] * 4
    chosen, counts = stratified_indices(lengths, edges=[10, 20, 30], per_bucket=8, seed=0)
    assert counts == [8, 5, 8]  # the middle bucket has only 5; 99 is beyond the last edge
    assert all(lengths[i] != 99 for i in chosen)
    assert chosen == sorted(chosen)


def test_usable_only_drops_just_pairs_without_words():
    long = " ".join(["w"] * 500)
    src, tgt, dropped = clean_pairs([long, "a", " ", "\x00"], ["b", long, "c", "d"], USABLE_ONLY)
    assert (src, tgt) == ([long, "a"], ["b", long])
    assert {k: v for k, v in dropped.items() if v} == {"empty": 1, "control": 1}


def test_entities_are_counted_as_html_unescape_sees_them():
    lines = ["l&apos;eau &quot;x&quot;", "AT&T; R&D &nosuch;", "&#39;&#x27;&lt;", "plain"]
    assert count_entities(lines) == {"occurrences": 6, "lines": 2}
    assert unescape_lines(lines) == ["l'eau \"x\"", "AT&T; R&D &nosuch;", "''<", "plain"]


def test_cleaning_a_line_in_one_split_gives_what_the_two_passes_give():
    """The fast path (no control character) and the slow one both equal stripping control
    characters from the white-space-normalised line and normalising again."""
    lines = ["plain words", "  tabs\tand  spaces ", "a\x00b c", "\x01\x02", "line\u2028sep",
             "x \x07 y", "nbsp\u00a0here", "\x85next", ""]
    src, tgt, _ = clean_pairs(lines, ["t"] * len(lines), USABLE_ONLY)
    expected = [normalise_space(strip_control(normalise_space(line))) for line in lines]
    assert src == [line for line in expected if line]
