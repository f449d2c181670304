"""Alignment link sets from the two directions combined: intersection, union, grow-diag-final
(Koehn, Och & Marcu 2003, as in Moses' ``symal``). Links are ``(e, f)`` 0-based pairs."""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

from rnnsearch.alignment import Link

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def links_from_choices(choices: Sequence[int], target_is_f: bool) -> set[Link]:
    """One direction's Viterbi choices (a source position per target word, -1 = NULL) as
    ``(e, f)`` links; ``target_is_f``: the target side of that direction is French."""
    return {(i, j) if target_is_f else (j, i) for j, i in enumerate(choices) if i >= 0}


def grow_diag_final(e2f: set[Link], f2e: set[Link]) -> set[Link]:
    """Start from the intersection, grow into union points next to (also diagonally) an
    alignment point while either word is unaligned, then add union points of each direction
    whose words are not both aligned yet (``final``)."""
    union = e2f | f2e
    alignment = e2f & f2e
    aligned_e = {e for e, _ in alignment}
    aligned_f = {f for _, f in alignment}

    def add(link: Link) -> None:
        alignment.add(link)
        aligned_e.add(link[0])
        aligned_f.add(link[1])

    grown = True
    while grown:
        grown = False
        for e, f in sorted(alignment):
            for de, df in NEIGHBOURS:
                new = (e + de, f + df)
                if new in union and new not in alignment and \
                        (new[0] not in aligned_e or new[1] not in aligned_f):
                    add(new)
                    grown = True
    for direction in (e2f, f2e):
        for e, f in sorted(direction):
            if (e not in aligned_e or f not in aligned_f) and (e, f) not in alignment:
                add((e, f))
    return alignment


SYMMETRISATIONS: dict[str, Callable[[set[Link], set[Link]], set[Link]]] = {
    "intersection": lambda a, b: a & b,
    "union": lambda a, b: a | b,
    "grow-diag-final": grow_diag_final,
}


def symmetrise(name: str, e2f: Iterable[Link], f2e: Iterable[Link]) -> set[Link]:
    """Combine the two directions' links by ``name`` (a key of :data:`SYMMETRISATIONS`)."""
    return SYMMETRISATIONS[name](set(e2f), set(f2e))
