"""Subword units (Sennrich, Haddow & Birch 2016): SentencePiece models learnt on Moses tokens.

Pieces never cross whitespace, so they join back into exactly the Moses tokens. :func:`train_model`
uses identity normalisation (NFKC would rewrite tokens), no byte fallback (an unseen character is
``<unk>``), a hard vocabulary limit, one thread, no sampling or shuffling, a fixed seed (same lines,
same file byte for byte) and the project's special ids (``vocab.<side>.txt`` lists pieces in id
order). Files: ``data/tokenized/subword.json`` and ``subword.{src,tgt,joint}.model``."""
from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from tqdm import tqdm

from rnnsearch.data.textio import read_json, write_json
from rnnsearch.data.tokenize import count_words, detokenize
from rnnsearch.data.vocab import (BOS, BOS_ID, EOS, EOS_ID, PAD, PAD_ID, SPECIALS, UNK, UNK_ID,
                                  Vocabulary)
from rnnsearch.errors import DataError

if TYPE_CHECKING:   # imported where a model is learnt or loaded: word units run without it
    import sentencepiece as spm

BOUNDARY = "\u2581"
MANIFEST = "subword.json"
SUBWORD_UNITS = ("bpe", "unigram")
SIDES = ("src", "tgt")
SEGMENT_CHUNK = 10000    # sentences per progress-bar step
SPM_MAX_SENTENCE = 4192  # SentencePiece's default longest training sentence, in bytes


class VocabularyUnfit(DataError):
    """SentencePiece refused to learn the model, saying why: a vocabulary size the training text
    cannot fill, or one below its alphabet (the specials included)."""


@dataclass(frozen=True)
class SubwordSpec:
    """One SentencePiece model to learn: its kind, size (specials included), alphabet and seed."""

    model_type: str          # bpe | unigram
    vocab_size: int
    character_coverage: float
    seed: int


def train_model(lines: Sequence[str], spec: SubwordSpec) -> bytes:
    """A SentencePiece model (serialised bytes) learnt on the Moses-tokenised ``lines`` in order;
    :class:`VocabularyUnfit` when ``spec.vocab_size`` does not fit the text."""
    import sentencepiece as spm

    longest = max((len(line.encode("utf-8")) for line in lines), default=0)
    spm.set_random_generator_seed(spec.seed)
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=model, model_type=spec.model_type,
            vocab_size=spec.vocab_size, character_coverage=spec.character_coverage,
            normalization_rule_name="identity", split_by_whitespace=True, byte_fallback=False,
            hard_vocab_limit=True, num_threads=1, input_sentence_size=0,
            shuffle_input_sentence=False, max_sentence_length=max(SPM_MAX_SENTENCE, longest + 1),
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            pad_piece=PAD, unk_piece=UNK, bos_piece=BOS, eos_piece=EOS, minloglevel=2)
    except RuntimeError as err:
        # "INTERNAL: src/trainer_interface.cc(744) [check] Vocabulary size too high (50000).
        # Please set it to a value <= 6491." -> the sentence after the check.
        raise VocabularyUnfit(str(err).rsplit("] ", 1)[-1].strip()) from err
    return model.getvalue()


def load_model(data: bytes, name: str | Path) -> spm.SentencePieceProcessor:
    """The processor of a serialised model; not a model: a :class:`DataError` naming ``name``."""
    import sentencepiece as spm

    try:
        return spm.SentencePieceProcessor(model_proto=data)
    except RuntimeError as err:
        raise DataError(f"{name}: not a SentencePiece model ({err}); rerun the tokenize "
                        f"stage") from err


def model_pieces(model: spm.SentencePieceProcessor) -> tuple[str, ...]:
    """The model's pieces in id order."""
    return tuple(model.id_to_piece(i) for i in range(model.get_piece_size()))


def segment(model: spm.SentencePieceProcessor, lines: Sequence[str], workers: int = 1,
            desc: str = "segment") -> list[str]:
    """Each Moses-tokenised line as its space-joined pieces (a character the model never saw
    stays itself, a piece outside the vocabulary), with a progress bar."""
    out: list[str] = []
    with tqdm(total=len(lines), unit="sent", desc=desc) as bar:
        for start in range(0, len(lines), SEGMENT_CHUNK):
            chunk = list(lines[start:start + SEGMENT_CHUNK])
            pieces = model.encode(chunk, out_type=str, num_threads=workers)
            out.extend(" ".join(p) for p in pieces)
            bar.update(len(chunk))
    return out


def piece_vocabulary(model: spm.SentencePieceProcessor, piece_lines: Iterable[str]) -> Vocabulary:
    """The model's pieces in id order (its ids are the vocabulary's), with their counts in the
    segmented ``piece_lines`` (0 for the specials and for pieces the segmentation never uses)."""
    counts = count_words(piece_lines)
    pieces = model_pieces(model)
    return Vocabulary(pieces, tuple(counts[p] if i >= len(SPECIALS) else 0
                                   for i, p in enumerate(pieces)))


def pieces_to_words(pieces: Sequence[str]) -> list[str]:
    """The Moses tokens that ``pieces`` spell: joined, and split again where a piece starts a
    word (``▁``). A lone ``▁`` a model emits before another word start spells nothing."""
    return "".join(pieces).replace(BOUNDARY, " ").split()


def word_lines(piece_lines: Iterable[str]) -> list[str]:
    """Segmented lines back in Moses tokens (space-joined): what word-level measures read."""
    return [" ".join(pieces_to_words(line.split())) for line in piece_lines]


def word_lengths(pieces: Sequence[str]) -> list[int]:
    """Pieces per word of a segmented sentence; a ``▁`` piece (or the first) starts a word."""
    lengths: list[int] = []
    for piece in pieces:
        if piece.startswith(BOUNDARY) or not lengths:
            lengths.append(1)
        else:
            lengths[-1] += 1
    return lengths


def word_split_stats(piece_lines: Iterable[str]) -> dict[str, float]:
    """Pieces per word and the share of words split into more than one piece."""
    words = pieces = split = 0
    for line in piece_lines:
        for length in word_lengths(line.split()):
            words, pieces, split = words + 1, pieces + length, split + (length > 1)
    return {"pieces_per_word": round(pieces / words, 4) if words else 0.0,
            "words_split": round(split / words, 4) if words else 0.0}


def unseen_characters(piece_lines: Iterable[str], vocab: Vocabulary) -> float:
    """The share of characters (word marks aside) that fall in pieces outside ``vocab``: the
    characters the model never saw, or left out by its character coverage."""
    total = unseen = 0
    for line in piece_lines:
        for piece in line.split():
            chars = len(piece.replace(BOUNDARY, ""))
            total += chars
            unseen += chars if piece not in vocab else 0
    return unseen / total if total else 0.0


def letter_counts(lines: Iterable[str]) -> Counter:
    """How often each letter (``str.isalpha``) occurs in ``lines``."""
    counts: Counter = Counter()
    for line in lines:
        counts.update(line)
    return Counter({c: n for c, n in counts.items() if c.isalpha()})


def shared_letters(a: Counter, b: Counter) -> float:
    """Script overlap: the smaller of each text's share of letter occurrences whose letter the other
    has (English/German: about 1; English/Russian: near 0, Cyrillic and a few Latin names)."""
    def covered(x: Counter, y: Counter) -> float:
        total = sum(x.values())
        return sum(n for c, n in x.items() if c in y) / total if total else 1.0
    return min(covered(a, b), covered(b, a))


def model_file(side: str, joint: bool) -> str:
    """The file name of a side's model in ``data/tokenized``."""
    return "subword.joint.model" if joint else f"subword.{side}.model"


def write_models(directory: Path, units: str, models: Mapping[str, bytes], joint: bool) -> None:
    """Each side's model file (one file for a joint model) and ``subword.json`` naming them."""
    files = {side: model_file(side, joint) for side in SIDES}
    for side in SIDES:
        (directory / files[side]).write_bytes(models[side])
    write_json(directory / MANIFEST, {"units": units, "joint": joint, "models": files})


@dataclass(frozen=True)
class TextUnits:
    """The units the models of a ``data/tokenized`` folder read and write: Moses tokens (word
    units, ``models`` empty) or the pieces of a SentencePiece model per side."""

    units: str
    models: Mapping[str, spm.SentencePieceProcessor]

    @classmethod
    def read(cls, directory: str | Path) -> "TextUnits":
        """Word units without ``subword.json``, else each side's model, which must exist and list
        ``vocab.<side>.txt``'s pieces (else a :class:`DataError` naming the file)."""
        directory = Path(directory)
        if not (directory / MANIFEST).is_file():
            strays = sorted(p.name for p in directory.glob("subword.*.model"))
            if strays:
                raise DataError(f"{directory / strays[0]}: a subword model without "
                                f"{directory / MANIFEST}; rerun the tokenize stage")
            return cls("word", {})
        units, files = _read_manifest(directory / MANIFEST)
        return cls(units, {side: _matching_model(directory, files[side], side) for side in SIDES})

    @property
    def subwords(self) -> bool:
        """Whether the units are pieces rather than Moses words."""
        return bool(self.models)

    def split(self, tokens: Sequence[str], side: str) -> list[str]:
        """The units of one Moses-tokenised sentence of ``side``."""
        if not self.subwords:
            return list(tokens)
        return self.models[side].encode(" ".join(tokens), out_type=str)

    def text(self, units: Sequence[str], lang: str) -> str:
        """A sentence's text: pieces joined into Moses tokens, then detokenised for ``lang``."""
        return detokenize(pieces_to_words(units) if self.subwords else units, lang)


def _read_manifest(path: Path) -> tuple[str, dict[str, str]]:
    """The units and each side's model file named by ``subword.json``."""
    manifest = read_json(path)
    units = manifest.get("units") if isinstance(manifest, dict) else None
    files = manifest.get("models") if isinstance(manifest, dict) else None
    if (units not in SUBWORD_UNITS or not isinstance(files, dict)
            or not all(isinstance(files.get(side), str) for side in SIDES)):
        raise DataError(f"{path}: expected {{'units': one of {list(SUBWORD_UNITS)}, 'models': "
                        f"{{'src': file, 'tgt': file}}}}; rerun the tokenize stage")
    return units, files


def _matching_model(directory: Path, name: str, side: str) -> spm.SentencePieceProcessor:
    """``directory/name``, loaded, whose pieces must be ``vocab.<side>.txt``'s words."""
    path = directory / name
    if not path.is_file():
        raise DataError(f"{path}: subword model not found (named by {directory / MANIFEST}); "
                        f"rerun the tokenize stage")
    model = load_model(path.read_bytes(), path)
    vocab_path = directory / f"vocab.{side}.txt"
    words, pieces = Vocabulary.load(vocab_path).words, model_pieces(model)
    if words != pieces:
        first = next((i for i, (w, p) in enumerate(zip(words, pieces)) if w != p),
                     min(len(words), len(pieces)))
        raise DataError(f"{path}: does not match {vocab_path} ({len(pieces)} pieces, "
                        f"{len(words)} entries; first difference at id {first}); rerun the "
                        f"tokenize stage")
    return model
