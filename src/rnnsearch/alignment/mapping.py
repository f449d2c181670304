"""Map the gold set's tokens onto the pipeline's, keeping which gold words each token covers.

The annotators expanded contractions and elisions (``du`` -> ``de le``), split hyphenated words
and lower-cased the first word, unlike the Moses tokens models saw; so hyphen chains are joined,
elisions and contractions restored where the training text prefers the restored form before the
same next word (``de le faire`` stays), the capital restored, then Moses-tokenised."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from rnnsearch.alignment import Link
from rnnsearch.data.tokenize import tokenize_line

VOWELS = frozenset("aeiouyàâäéèêëîïôöûùüœæh")
ELISIONS = {"le": "l'", "la": "l'", "de": "d'", "ne": "n'", "se": "s'", "ce": "c'", "que": "qu'",
            "je": "j'", "me": "m'", "te": "t'", "jusque": "jusqu'", "lorsque": "lorsqu'",
            "puisque": "puisqu'", "quoique": "quoiqu'"}
CONTRACTIONS = {("de", "le"): "du", ("de", "les"): "des", ("à", "le"): "au", ("à", "les"): "aux"}
Ngram = tuple[str, ...]
Counts = Callable[[Ngram], int]


@dataclass(frozen=True)
class Word:
    """A surface word and the gold positions (0-based) it stands for."""

    text: str
    cover: tuple[int, ...]
    glued: bool = False          # written without a space before the next word (``l'heure``)


@dataclass(frozen=True)
class Mapped:
    """A gold sentence in pipeline tokens; ``cover[k]``: the gold positions of token ``k``."""

    tokens: tuple[str, ...]
    cover: tuple[tuple[int, ...], ...]


def prefer(rewritten: Ngram, original: Ngram, counts: Counts, default: bool) -> bool:
    """Whether the training text favours ``rewritten`` over ``original`` (ties: ``default``)."""
    new, old = counts(rewritten), counts(original)
    return default if new == old else new > old


def join_hyphens(words: list[Word], counts: Counts) -> list[Word]:
    """Join ``a - b (- c ...)`` into ``a-b-c`` where the training text writes it joined."""
    out: list[Word] = []
    k = 0
    while k < len(words):
        end = k
        while end + 2 < len(words) and words[end + 1].text == "-" and words[end + 2].text != "-":
            end += 2
        chain = words[k:end + 1]
        joined = "".join(w.text for w in chain)
        if end > k and prefer((joined,), tuple(w.text for w in chain), counts, False):
            out.append(Word(joined, tuple(p for w in chain for p in w.cover)))
            k = end + 1
        else:
            out.append(words[k])
            k += 1
    return out


def restore_elisions(words: list[Word], counts: Counts) -> list[Word]:
    """``le accident`` -> ``l' accident`` (French), where the text favours it."""
    out = list(words)
    for k in range(len(out) - 1):
        short = ELISIONS.get(out[k].text.lower())
        nxt = out[k + 1].text
        if short and nxt[:1].lower() in VOWELS:
            short = out[k].text[0] + short[1:] if out[k].text[0].isupper() else short
            if prefer((short, nxt), (out[k].text, nxt), counts, nxt[:1].lower() != "h"):
                out[k] = Word(short, out[k].cover, glued=True)
    return out


def restore_contractions(words: list[Word], counts: Counts) -> list[Word]:
    """``de le`` -> ``du`` etc. (French), unless the text keeps them apart before the next word."""
    out: list[Word] = []
    k = 0
    while k < len(words):
        pair = tuple(w.text for w in words[k:k + 2])
        short = CONTRACTIONS.get(pair) if len(pair) == 2 else None
        after = tuple(w.text for w in words[k + 2:k + 3])
        if short and prefer((short,) + after, pair + after, counts, True):
            out.append(Word(short, words[k].cover + words[k + 1].cover))
            k += 2
        else:
            out.append(words[k])
            k += 1
    return out


def surface_words(tokens: Sequence[str], lang: str, lowercase: bool, counts: Counts) -> list[Word]:
    """Gold tokens -> the words a raw sentence of the pipeline's corpus would have."""
    words = join_hyphens([Word(t, (i,)) for i, t in enumerate(tokens)], counts)
    if lang == "fr":
        words = restore_contractions(restore_elisions(words, counts), counts)
    if lowercase:
        return [Word(w.text.lower(), w.cover, w.glued) for w in words]
    if words:
        first = words[0]
        words[0] = Word(first.text[:1].upper() + first.text[1:], first.cover, first.glued)
    return words


def tokenize_words(words: Sequence[Word], lang: str) -> Mapped:
    """Moses-tokenise the sentence; each token covers the gold positions of the word it is in."""
    text = "".join(w.text + ("" if w.glued else " ") for w in words)
    tokens = tokenize_line(text, lang)
    owner = [w.cover for w in words for _ in w.text]      # per character of the joined words
    if "".join(tokens) != "".join(w.text for w in words):  # Moses changed characters: per word
        pieces = [(tok, w.cover) for w in words for tok in tokenize_line(w.text, lang)]
        return Mapped(tuple(t for t, _ in pieces), tuple(c for _, c in pieces))
    cover, start = [], 0
    for token in tokens:
        cover.append(tuple(sorted({p for c in owner[start:start + len(token)] for p in c})))
        start += len(token)
    return Mapped(tuple(tokens), tuple(cover))


def map_sentence(tokens: Sequence[str], lang: str, lowercase: bool, counts: Counts) -> Mapped:
    """One gold sentence in the pipeline's tokens (see the module doc)."""
    return tokenize_words(surface_words(tokens, lang, lowercase, counts), lang)


class NgramCounts:
    """Counts of given n-grams in tokenised lines, filled on demand (one pass per batch)."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines, self.known, self.missing = lines, {}, set()

    def __call__(self, ngram: Ngram) -> int:
        if ngram not in self.known:
            self.missing.add(ngram)
            return 0
        return self.known[ngram]

    def fill(self) -> None:
        """Count every n-gram asked for since the last call in one pass over the lines."""
        wanted, self.missing = self.missing, set()
        found: Counter[Ngram] = Counter()
        sizes = sorted({len(n) for n in wanted})
        for line in self.lines:
            words = line.split()
            for n in sizes:
                found.update(g for g in zip(*(words[i:] for i in range(n))) if g in wanted)
        self.known.update({n: found[n] for n in wanted})


def map_corpus(sentences: Iterable[Sequence[str]], lang: str, lowercase: bool,
               counts: NgramCounts) -> list[Mapped]:
    """:func:`map_sentence` for every sentence, counting what the decisions need as they ask."""
    sentences = list(sentences)
    while True:
        mapped = [map_sentence(s, lang, lowercase, counts) for s in sentences]
        if not counts.missing:
            return mapped
        counts.fill()


def gold_links(links: Iterable[Link], cover_e: Sequence[tuple[int, ...]],
               cover_f: Sequence[tuple[int, ...]]) -> set[Link]:
    """Links between pipeline tokens -> links between the gold words they cover."""
    return {(e, f) for i, j in links for e in cover_e[i] for f in cover_f[j]}
