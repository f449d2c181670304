"""The human word alignments of the Canadian Hansards (HLT-NAACL 2003 shared task, 447 pairs),
found like the corpora (mirror, download cache, upstream at a fixed commit), sha256-checked."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from rnnsearch.alignment import Link
from rnnsearch.data.corpora import download, mirror_dir, verify
from rnnsearch.errors import DataError

GOLD_NAME = "hansard_align"
UPSTREAM = ("https://raw.githubusercontent.com/ldmt-muri/alignment-with-openfst/"
            "465f8dbcd51a513430845a90c82f3f51f3a4b58e/example/aer/wpt03-05/English-French/")
GOLD_FILES = {  # file -> (path under UPSTREAM, sha256)
    "test.e": ("test/test.e",
               "09ee004f121663363f5a50f556350c078fedd3a166e878d3303082eeb7af3816"),
    "test.f": ("test/test.f",
               "51e2ae6a960776c7405a645e4afddb2f94b0fda61a2fb7b00d3c1cb20c3f1585"),
    "test.wa.nonullalign": ("answers/test.wa.nonullalign",
                            "eedb9a219cb672a79130557fd4a4bc698565078c6a64abe8d9b18c3bb3ec0651"),
}
GOLD_LANGS = ("en", "fr")     # the gold set's source (e) and target (f) languages
SENTENCE = re.compile(r"^<s snum=(\S+)>(.*)</s>\s*$")


@dataclass(frozen=True)
class GoldPair:
    """One annotated sentence pair: its tokens and its Sure and Possible links (S within P)."""

    ident: str
    en: tuple[str, ...]
    fr: tuple[str, ...]
    sure: frozenset[Link]
    possible: frozenset[Link]


def locate_gold(mirror: str | None, cache_dir: str | Path, allow_download: bool = True
                ) -> dict[str, Path]:
    """The verified path of every gold file (mirror, cache or a download into the cache)."""
    root = mirror_dir(mirror)
    paths = {}
    for name, (upstream, sha256) in GOLD_FILES.items():
        candidates = ([root / GOLD_NAME / name] if root else []) + [Path(cache_dir) / GOLD_NAME / name]
        found = next((p for p in candidates if p.is_file()), None)
        if found is None and not allow_download:
            raise DataError(f"{name} of the gold alignments not found in "
                            f"{' or '.join(str(c.parent) for c in candidates)} and downloads are off")
        if found is None:
            found = download(UPSTREAM + upstream, candidates[-1], sha256, source="the gold set")
        verify(found, sha256)
        paths[name] = found
    return paths


def read_sentences(path: Path, encoding: str = "latin-1") -> dict[str, tuple[str, ...]]:
    """``{sentence id: tokens}`` of a ``<s snum=ID> ... </s>`` file; errors name the line."""
    sentences: dict[str, tuple[str, ...]] = {}
    with open(path, encoding=encoding, newline="\n") as handle:
        for number, line in enumerate(handle, 1):
            match = SENTENCE.match(line.rstrip("\r\n"))
            if match is None:
                raise DataError(f"{path}:{number}: expected '<s snum=ID> tokens </s>'")
            ident, text = int_id(match.group(1), path, number), match.group(2).split()
            if ident in sentences:
                raise DataError(f"{path}:{number}: sentence {ident} appears twice")
            sentences[ident] = tuple(text)
    return sentences


def int_id(raw: str, path: Path, number: int) -> str:
    """A sentence id without its zero padding (``0001`` -> ``1``)."""
    if not raw.isdigit():
        raise DataError(f"{path}:{number}: sentence id {raw!r} is not a number")
    return str(int(raw))


def read_links(path: Path, en: dict[str, tuple[str, ...]], fr: dict[str, tuple[str, ...]]
               ) -> dict[str, tuple[set[Link], set[Link]]]:
    """``{sentence id: (sure, possible)}``: 0-based, Sure also in Possible, NULL (0) links skipped.
    DataError naming the line: a link outside its sentence, to an unknown sentence, not S/P."""
    links: dict[str, tuple[set[Link], set[Link]]] = {ident: (set(), set()) for ident in en}
    with open(path, encoding="ascii", newline="\n") as handle:
        for number, line in enumerate(handle, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 3 or not fields[1].isdigit() or not fields[2].isdigit():
                raise DataError(f"{path}:{number}: expected 'sentence e f [S|P]', got {line.strip()!r}")
            ident, e, f = int_id(fields[0], path, number), int(fields[1]), int(fields[2])
            kind = fields[3] if len(fields) > 3 else "S"
            if ident not in links or ident not in fr:
                raise DataError(f"{path}:{number}: sentence {ident} is not in the gold text")
            if kind not in ("S", "P"):
                raise DataError(f"{path}:{number}: link type {kind!r} is neither S nor P")
            if e > len(en[ident]) or f > len(fr[ident]):
                raise DataError(f"{path}:{number}: link {e}-{f} is outside sentence {ident} "
                                f"({len(en[ident])} English, {len(fr[ident])} French words)")
            if e == 0 or f == 0:
                continue
            sure, possible = links[ident]
            possible.add((e - 1, f - 1))
            if kind == "S":
                sure.add((e - 1, f - 1))
    return links


def read_gold(paths: dict[str, Path]) -> list[GoldPair]:
    """The gold pairs in file order from :func:`locate_gold`'s paths."""
    en = read_sentences(paths["test.e"])
    fr = read_sentences(paths["test.f"])
    if en.keys() != fr.keys():
        missing = sorted(en.keys() ^ fr.keys(), key=int)[0]
        raise DataError(f"{paths['test.e']} and {paths['test.f']}: sentence {missing} is in only one")
    links = read_links(paths["test.wa.nonullalign"], en, fr)
    return [GoldPair(i, en[i], fr[i], frozenset(links[i][0]), frozenset(links[i][1])) for i in en]
