"""Moses tokenisation (sacremoses) per language, in parallel, and the matching detokeniser.

``escape=False`` keeps apostrophes and ampersands (no ``&apos;``); any lowercasing comes first."""
from __future__ import annotations

import functools
import multiprocessing as mp
import unicodedata
from collections import Counter
from typing import Iterable, Sequence

import numpy as np
from sacremoses import MosesDetokenizer, MosesTokenizer
from tqdm import tqdm

from rnnsearch.data.vocab import UNK_ID, Vocabulary

LENGTH_PERCENTILES = (50, 90, 95, 99)


CJK = ("zh", "ja", "ko")    # codes sacremoses' tokenizer has rules for without prefix lists


def moses_languages() -> set[str]:
    """The language codes sacremoses has nonbreaking prefixes for (and the CJK codes)."""
    from sacremoses.corpus import NonbreakingPrefixes

    return set(NonbreakingPrefixes().available_langs.values()) | set(CJK)


def unknown_language_notice(lang: str, key: str) -> str | None:
    """The warning for a language code Moses has no rules for (None: it has some), naming the rules
    used instead (explaining e.g. ``n'iki -> n ' iki``); ``key``: the params key that set it."""
    if lang in moses_languages():
        return None
    return (f"tokenize: warning: Moses has no rules for language '{lang}' ({key}): its text is "
            f"tokenised with English nonbreaking prefixes (Mr. Dr. ...) and the generic "
            f"apostrophe split (n'iki -> n ' iki); a code it knows (en, fr, de, ...: "
            f"sacremoses' nonbreaking_prefixes) applies that language's rules")


@functools.lru_cache(maxsize=None)
def _tokenizer(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


@functools.lru_cache(maxsize=None)
def _detokenizer(lang: str) -> MosesDetokenizer:
    return MosesDetokenizer(lang=lang)


JOINERS = "\u200c\u200d"     # zero-width non-joiner and joiner: inside words (Indic, Persian)


def _in_word(char: str) -> bool:
    """A letter, a combining mark or a digit: what a joiner joins."""
    return unicodedata.category(char)[0] in "LMN"


def tokenize_line(text: str, lang: str, lowercase: bool = False) -> list[str]:
    """Moses tokens of one sentence (``escape=False``), lowercased first if asked; a zero-width
    (non-)joiner stays inside its word (:func:`keep_joiners`)."""
    if lowercase:
        text = text.lower()
    tokens = _tokenizer(lang).tokenize(text, escape=False)
    return keep_joiners(text, tokens) if any(j in text for j in JOINERS) else tokens


def keep_joiners(text: str, tokens: Sequence[str]) -> list[str]:
    """Moses splits words at U+200D and U+200C in every language (``കാര്\u200dഡ്`` -> three
    tokens), though they sit inside words of Malayalam, Sinhala, Persian and other scripts:
    a joiner is glued back to the token before it, and a word to a joiner it touches in
    ``text`` (no space between them; punctuation stays apart)."""
    out: list[str] = []
    pos = 0
    for token in tokens:
        found = text.find(token, pos)
        joined = token[0] in JOINERS or (out and out[-1][-1] in JOINERS and _in_word(token[0]))
        if found == pos and out and joined:
            out[-1] += token
        else:
            out.append(token)
        pos = found + len(token) if found >= 0 else pos
    return out


def detokenize(tokens: Sequence[str], lang: str) -> str:
    """Moses detokenisation: the raw-text form of ``tokens``."""
    return _detokenizer(lang).detokenize(list(tokens))


def _tokenize_chunk(args: tuple[list[str], str, bool]) -> list[str]:
    lines, lang, lowercase = args
    return [" ".join(tokenize_line(line, lang, lowercase)) for line in lines]


def tokenize_lines(lines: Sequence[str], lang: str, lowercase: bool = False, workers: int = 2,
                   chunk_size: int = 2000, desc: str = "tokenize") -> list[str]:
    """Space-joined Moses tokens of every line, by ``workers`` processes in chunks with a progress
    bar; each distinct line only once (parliamentary text repeats headings and procedural lines)."""
    unique = list(dict.fromkeys(lines))
    tokenized = dict(zip(unique, _tokenize_unique(unique, lang, lowercase, workers, chunk_size, desc)))
    return [tokenized[line] for line in lines]


def _tokenize_unique(lines: Sequence[str], lang: str, lowercase: bool, workers: int,
                     chunk_size: int, desc: str) -> list[str]:
    chunks = [(list(lines[i:i + chunk_size]), lang, lowercase)
              for i in range(0, len(lines), chunk_size)]
    out: list[str] = []
    with tqdm(total=len(lines), unit="sent", desc=desc) as bar:
        if workers <= 1 or len(chunks) <= 1:
            results: Iterable[list[str]] = map(_tokenize_chunk, chunks)
            for result in results:
                out.extend(result)
                bar.update(len(result))
            return out
        with mp.get_context("fork").Pool(workers) as pool:
            for result in pool.imap(_tokenize_chunk, chunks):
                out.extend(result)
                bar.update(len(result))
    return out


def count_words(lines: Iterable[str]) -> Counter:
    """Word frequencies of space-tokenised lines."""
    counter: Counter = Counter()
    for line in lines:
        counter.update(line.split())
    return counter


def oov_rate(lines: Iterable[str], vocab: Vocabulary) -> float:
    """Fraction of tokens that map to ``<unk>``."""
    total = unknown = 0
    for line in lines:
        ids = vocab.encode(line.split())
        total += len(ids)
        unknown += sum(1 for i in ids if i == UNK_ID)
    return unknown / total if total else 0.0


def length_stats(lines: Sequence[str]) -> dict[str, float]:
    """Token-length percentiles, mean and maximum of tokenised lines."""
    lengths = np.array([len(line.split()) for line in lines] or [0])
    stats = {f"p{p}": float(np.percentile(lengths, p)) for p in LENGTH_PERCENTILES}
    stats.update(mean=float(lengths.mean()), max=int(lengths.max()))
    return stats


def length_histogram(lines: Sequence[str]) -> Counter:
    """Number of lines of each token length."""
    return Counter(len(line.split()) for line in lines)
