"""Alignment link sets from the two directions combined: intersection, union, grow-diag-final
(Koehn, Och & Marcu 2003, as in Moses' ``symal``) and grow-diag-final-and (its final step adds
only links between two unaligned words). Links are ``(e, f)`` 0-based pairs."""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

from rnnsearch.alignment import Link

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def links_from_choices(choices: Sequence[int], target_is_f: bool) -> set[Link]:
    """One direction's Viterbi choices (a source position per target word, -1 = NULL) as
    ``(e, f)`` links; ``target_is_f``: the target side of that direction is French."""
    return {(i, j) if target_is_f else (j, i) for j, i in enumerate(choices) if i >= 0}


def grow_diag(e2f: set[Link], f2e: set[Link]) -> tuple[set[Link], set[int], set[int]]:
    """Grow the intersection into union points next to (also diagonally) an aligned point with
    a word unaligned; returns the links and the aligned English and French positions."""
    union = e2f | f2e
    alignment = e2f & f2e
    aligned_e = {e for e, _ in alignment}
    aligned_f = {f for _, f in alignment}
    grown = True
    while grown:
        grown = False
        for e, f in sorted(alignment):
            for de, df in NEIGHBOURS:
                new = (e + de, f + df)
                if new in union and new not in alignment and \
                        (new[0] not in aligned_e or new[1] not in aligned_f):
                    alignment.add(new)
                    aligned_e.add(new[0])
                    aligned_f.add(new[1])
                    grown = True
    return alignment, aligned_e, aligned_f


def grow_diag_final(e2f: set[Link], f2e: set[Link], both_unaligned: bool = False) -> set[Link]:
    """:func:`grow_diag`, then add each direction's points (``e2f`` first, in (e, f) order) with a
    word still unaligned; with ``both_unaligned``, with both words unaligned (``final-and``)."""
    alignment, aligned_e, aligned_f = grow_diag(e2f, f2e)
    for direction in (e2f, f2e):
        for e, f in sorted(direction):
            free_e, free_f = e not in aligned_e, f not in aligned_f
            if (free_e and free_f if both_unaligned else free_e or free_f) and \
                    (e, f) not in alignment:
                alignment.add((e, f))
                aligned_e.add(e)
                aligned_f.add(f)
    return alignment


def grow_diag_final_and(e2f: set[Link], f2e: set[Link]) -> set[Link]:
    """grow-diag-final-and (Koehn et al. 2005, ``atools``' default): ``both_unaligned`` final."""
    return grow_diag_final(e2f, f2e, both_unaligned=True)


SYMMETRISATIONS: dict[str, Callable[[set[Link], set[Link]], set[Link]]] = {
    "intersection": lambda a, b: a & b,
    "union": lambda a, b: a | b,
    "grow-diag-final": grow_diag_final,
    "grow-diag-final-and": grow_diag_final_and,
}


def symmetrise(name: str, e2f: Iterable[Link], f2e: Iterable[Link]) -> set[Link]:
    """Combine the two directions' links by ``name`` (a key of :data:`SYMMETRISATIONS`)."""
    return SYMMETRISATIONS[name](set(e2f), set(f2e))
