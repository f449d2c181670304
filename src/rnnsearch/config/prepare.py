"""The ``prepare`` section of params.yaml."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Callable, Literal

from rnnsearch.config.base import check_non_negative, check_positive, check_seed, require
from rnnsearch.data.corpora import REGISTRY

CUSTOM = "custom"   # prepare.corpus value that selects the files of prepare.custom
SHA256_PATTERN = re.compile(r"[0-9a-fA-F]{64}")
LANG_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def check_location(value: str, key: str) -> None:
    """A corpus file location: a non-empty local path or an http(s) URL."""
    require(bool(value.strip()), key, "must be a local path or an http(s) URL, got ''")
    scheme = value.split("://", 1)[0].lower() if "://" in value else None
    require(scheme in (None, "http", "https"), key,
            f"only local paths and http(s) URLs are supported, got {value!r}")


def check_sha256(value: str | None, key: str) -> None:
    """An optional sha256: 64 hexadecimal digits (as printed by ``sha256sum``)."""
    require(value is None or SHA256_PATTERN.fullmatch(value) is not None, key,
            f"must be 64 hexadecimal digits (the output of sha256sum), got {value!r}")


@dataclass(frozen=True)
class CustomSplit:
    """One split of one's own corpus: a source and a target file (line N translates line N), or
    one tab-separated file (source<TAB>target per line); each with an optional sha256."""

    src: str | None = None
    tgt: str | None = None
    src_sha256: str | None = None
    tgt_sha256: str | None = None
    tsv: str | None = None
    sha256: str | None = None

    def located(self, resolve: Callable[[str | None], str | None]) -> "CustomSplit":
        """This split with every file location passed through ``resolve``."""
        return dataclasses.replace(self, src=resolve(self.src), tgt=resolve(self.tgt),
                                   tsv=resolve(self.tsv))

    def files(self) -> dict[str, tuple[str, str | None]]:
        """Role (``src``, ``tgt`` or ``tsv``) -> (location, expected sha256 or None)."""
        if self.tsv is not None:
            return {"tsv": (self.tsv, self.sha256)}
        return {"src": (self.src, self.src_sha256), "tgt": (self.tgt, self.tgt_sha256)}

    def check(self, key: str) -> None:
        pair = self.src is not None or self.tgt is not None
        require(pair or self.tsv is not None, key,
                "give either src and tgt (one file per language) or tsv (source<TAB>target)")
        require(not (pair and self.tsv is not None), key,
                "give either src and tgt or tsv, not both")
        for name, needs in (("src_sha256", "src"), ("tgt_sha256", "tgt"), ("sha256", "tsv")):
            require(getattr(self, name) is None or getattr(self, needs) is not None,
                    f"{key}.{name}", f"is set but {key}.{needs} is not")
            check_sha256(getattr(self, name), f"{key}.{name}")
        for name in ("src", "tgt") if pair else ("tsv",):
            value = getattr(self, name)
            require(value is not None, f"{key}.{name}",
                    f"required key is missing (src and tgt go together; or use {key}.tsv)")
            check_location(value, f"{key}.{name}")


GIVEN_SPLITS = ("dev", "test")     # the splits a user's own file is used whole for
AUTO_TEST_SHARE = 0.05             # test_size auto: this share of the clean training pairs,
AUTO_TEST_MAX = 3000               # at most this many (and at least one)


def auto_test_size(clean_pairs: int) -> int:
    """``prepare.custom.test_size: auto``'s held-out test size: 5% of ``clean_pairs``, 1 to 3000."""
    return max(1, min(AUTO_TEST_MAX, round(clean_pairs * AUTO_TEST_SHARE)))


@dataclass(frozen=True)
class CustomCorpus:
    """The files of one's own corpus, per split; ``test`` null: held out from train.

    A given dev or test file is used whole (empty sides dropped), so scores compare with others'
    on it, unless ``cut_given`` lists it. A held-out test split is a seeded sample of ``test_size``
    pairs (``auto``: :func:`auto_test_size`), or with ``test_stratified`` at most half of each
    ``prepare.test_buckets`` bucket, so training keeps every length."""

    train: CustomSplit
    dev: CustomSplit
    test: CustomSplit | None = None
    cut_given: tuple[str, ...] = ()
    test_size: int | Literal["auto"] = "auto"
    test_stratified: bool = False

    def check(self, key: str) -> None:
        require(self.test_size == "auto" or self.test_size > 0, f"{key}.test_size",
                f"must be auto or a number of pairs > 0, got {self.test_size}")
        for split in self.cut_given:
            require(split in GIVEN_SPLITS, f"{key}.cut_given",
                    f"'{split}' is not dev or test (train is always cleaned and sampled)")
        require(self.test is not None or "test" not in self.cut_given, f"{key}.cut_given",
                f"lists test, but {key}.test is null (a test split held out of train is always "
                f"sampled)")

    def is_given(self, split: str) -> bool:
        """True when ``split`` is dev or test read from the user's own file (not held out)."""
        return split in GIVEN_SPLITS and getattr(self, split) is not None

    def is_whole(self, split: str) -> bool:
        """True when ``split`` is a given file used whole (not listed in ``cut_given``)."""
        return self.is_given(split) and split not in self.cut_given


@dataclass(frozen=True)
class CleanConfig:
    """clean-corpus-n bounds (words), and whether HTML/XML entities become characters first."""

    min_len: int = 1
    max_len: int = 80
    max_ratio: float = 9.0
    unescape_entities: bool = False

    def check(self, key: str) -> None:
        check_positive(self, key, "min_len", "max_len", "max_ratio")
        require(self.max_len >= self.min_len, f"{key}.max_len",
                f"must be >= min_len ({self.min_len}), got {self.max_len}")
        require(self.max_ratio >= 1, f"{key}.max_ratio", f"must be >= 1, got {self.max_ratio}")


@dataclass(frozen=True)
class SplitSizes:
    """Pairs to sample per split (0 keeps all)."""

    train: int = 0
    dev: int = 1000
    test: int = 1000

    def check(self, key: str) -> None:
        check_non_negative(self, key, "train", "dev", "test")


@dataclass(frozen=True)
class PrepareConfig:
    """Which corpus and direction, where to find it, how to clean and sample it."""

    corpus: str
    src_lang: str
    tgt_lang: str
    mirror: str | None = "../shared/corpora"
    download: bool = True
    cache_dir: str = ".cache/corpora"
    clean: CleanConfig = field(default_factory=CleanConfig)
    sizes: SplitSizes = field(default_factory=SplitSizes)
    test_buckets: tuple[int, ...] = ()
    test_per_bucket: int = 0
    seed: int = 1234
    custom: CustomCorpus | None = None   # read only when corpus is "custom"

    def check(self, key: str) -> None:
        if self.corpus == CUSTOM:
            self.check_custom(key)
        else:
            self.check_registered(key)
        require(self.src_lang != self.tgt_lang, f"{key}.tgt_lang", "must differ from src_lang")
        edges = self.test_buckets
        require(all(e > 0 for e in edges) and list(edges) == sorted(set(edges)),
                f"{key}.test_buckets", f"must be increasing positive lengths, got {list(edges)}")
        check_non_negative(self, key, "test_per_bucket")
        require(not edges or self.test_per_bucket > 0, f"{key}.test_per_bucket",
                "must be > 0 when test_buckets is set")
        check_seed(self, key, "seed")
        require(self.mirror is None or bool(self.mirror.strip()), f"{key}.mirror",
                "must be a folder, or null for no mirror; got ''")
        require(bool(self.cache_dir.strip()), f"{key}.cache_dir",
                "must be a folder (where downloaded corpora are kept); got ''")

    def check_registered(self, key: str) -> None:
        """A registered corpus that has both languages."""
        known = ", ".join(sorted([*REGISTRY, CUSTOM]))
        require(self.corpus in REGISTRY, f"{key}.corpus",
                f"unknown corpus '{self.corpus}' (known: {known})")
        languages = REGISTRY[self.corpus].languages
        for name in ("src_lang", "tgt_lang"):
            lang = getattr(self, name)
            require(lang in languages, f"{key}.{name}",
                    f"corpus '{self.corpus}' has no language '{lang}' (it has: {', '.join(languages)})")

    def check_custom(self, key: str) -> None:
        """``custom`` given, language codes valid, a stratified held-out test split has buckets."""
        require(self.custom is not None, f"{key}.custom",
                f"required when {key}.corpus is '{CUSTOM}': give the train and dev files (and "
                f"optionally test), see README 'Use your own corpus'")
        for name in ("src_lang", "tgt_lang"):
            lang = getattr(self, name)
            require(LANG_PATTERN.fullmatch(lang) is not None, f"{key}.{name}",
                    f"must be a language code such as 'en' or 'de', got {lang!r}")
        require(not self.custom.test_stratified or self.custom.test is None,
                f"{key}.custom.test_stratified", f"applies to a test split held out of train, "
                f"but {key}.custom.test names test files (list test in cut_given to stratify them)")
        require(not self.custom.test_stratified or bool(self.test_buckets),
                f"{key}.custom.test_stratified", f"needs {key}.test_buckets (the length buckets "
                f"to stratify by), which is empty")
