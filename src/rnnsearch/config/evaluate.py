"""The ``evaluate`` section of params.yaml: scores, subsets and significance tests."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rnnsearch.config.base import MAX_SEED, check_non_negative, check_positive, from_dict, require
from rnnsearch.errors import ConfigError
from rnnsearch.config.search import SearchOptions
from rnnsearch.config.train import GridConfig
from rnnsearch.data.vocab import SPECIALS


def bleu_tokenizers() -> tuple[str, ...]:
    """The tokenizer names sacrebleu's BLEU accepts (its own registry)."""
    try:
        from sacrebleu.metrics.bleu import _TOKENIZERS
    except ImportError:         # sacrebleu moved it: the names of sacrebleu 2.x
        return ("none", "zh", "13a", "intl", "char", "ja-mecab", "ko-mecab", "spm",
                "flores101", "flores200")
    return tuple(_TOKENIZERS)


BLEU_TOKENIZERS = bleu_tokenizers()


def check_tokenizer_installed(name: str, key: str) -> None:
    """Build sacrebleu's tokenizer ``name``; one whose extra packages are missing (ja-mecab,
    ko-mecab, flores*) fails naming ``key`` and the pip command that installs them."""
    from sacrebleu.metrics import BLEU

    try:
        BLEU(tokenize=name)
    except (ImportError, RuntimeError) as err:
        command = re.search(r"pip install [^\n]+", str(err))
        how = command.group(0).strip() if command else "see sacrebleu's README"
        raise ConfigError(f"{key}: sacrebleu's {name!r} tokenizer needs packages that are not "
                          f"installed: {how} (or pick another tokenizer, e.g. 13a)") from err


def check_baseline(cfg: "EvaluateConfig", grid: GridConfig, key: str = "evaluate") -> None:
    """``cfg.baseline`` must be a model of ``train.grid.models``, else the significance tests
    silently vanish; a one-model grid or ``bootstrap_samples: 0`` passes regardless."""
    if cfg.bootstrap_samples == 0 or len(grid.models) <= 1:
        return
    require(cfg.baseline in grid.models, f"{key}.baseline",
            f"{cfg.baseline!r} is not a model of train.grid.models ({', '.join(grid.models)}), "
            "so no significance test could run; name one of those, add it to the grid, or set "
            f"{key}.bootstrap_samples: 0 to run no tests")


def check_wide_beam(cfg: "EvaluateConfig", search: SearchOptions, key: str = "evaluate") -> None:
    """``cfg.search_error_wide_beam`` must be wider than ``translate.search.beam_size``: a beam
    no wider finds nothing the beam misses, and the search_error stage would measure nothing."""
    require(cfg.search_error_wide_beam > search.beam_size, f"{key}.search_error_wide_beam",
            f"must be > translate.search.beam_size ({search.beam_size}), got "
            f"{cfg.search_error_wide_beam} (the wide beam is set beside the beam)")


MIN_BUCKET_SENTENCES = 30   # evaluate.min_bucket_sentences' default
# the search_error stage's shares of sentences (rnnsearch.decoding.search_error)
SEARCH_ERROR_SHARES = ("reference_above_beam", "wide_beam_above_beam", "model_error")


@dataclass(frozen=True)
class EvaluateConfig:
    """sacrebleu BLEU/chrF overall, on the no-UNK subset and by source length."""

    baseline: str = "encdec"                      # grid model the others are tested against
    # bucket upper edges; last is open (derived from the test set when they leave fewer than 3
    # buckets of min_bucket_sentences: rnnsearch.evaluation.subsets.derived_edges)
    buckets: tuple[int, ...] = (10, 20, 30, 40, 50, 60)
    bootstrap_samples: int = 1000                 # paired bootstrap resamples (0: no test)
    bootstrap_seed: int = 12345
    bleu_tokenize: str = "13a"
    # unigram F1 by training frequency: the word-level vocabulary's entries (None: tokenize's)
    word_vocab_size: int | None = None
    # a length bucket of fewer test sentences gets no p-value and no point in Figure 2
    min_bucket_sentences: int = MIN_BUCKET_SENTENCES
    search_error_sentences: int = 200             # the search_error stage's first N test sentences
    search_error_wide_beam: int = 50              # ... and the wide beam it sets beside the beam

    def check(self, key: str) -> None:
        require(len(self.buckets) > 0, f"{key}.buckets", "needs at least one edge")
        require(all(b > 0 for b in self.buckets), f"{key}.buckets", "edges must be > 0")
        require(list(self.buckets) == sorted(set(self.buckets)), f"{key}.buckets",
                f"edges must be strictly increasing, got {list(self.buckets)}")
        check_non_negative(self, key, "bootstrap_samples")
        check_positive(self, key, "min_bucket_sentences", "search_error_sentences",
                       "search_error_wide_beam")
        require(self.bootstrap_seed != 0, f"{key}.bootstrap_seed",
                "must not be 0: sacrebleu takes seed 0 as 'no seed' and the p-values would "
                "change from run to run; use any other number, e.g. 12345")
        require(0 < self.bootstrap_seed <= MAX_SEED, f"{key}.bootstrap_seed",
                f"a seed must be in [1, {MAX_SEED}], got {self.bootstrap_seed}")
        require(self.bleu_tokenize in BLEU_TOKENIZERS, f"{key}.bleu_tokenize",
                f"must be one of {list(BLEU_TOKENIZERS)}, got {self.bleu_tokenize!r}")
        require(self.word_vocab_size is None or self.word_vocab_size > len(SPECIALS),
                f"{key}.word_vocab_size", f"must be null or > {len(SPECIALS)} (the special "
                f"tokens), got {self.word_vocab_size}")

    def check_params(self, key: str, params: dict[str, Any]) -> None:
        """The baseline must be trained: a model of ``train.grid`` (see :func:`check_baseline`);
        the wide beam wider than ``translate.search``'s (see :func:`check_wide_beam`)."""
        train = params.get("train") or {}
        grid = train.get("grid", {}) if isinstance(train, dict) else {}
        check_baseline(self, from_dict(GridConfig, grid, "train.grid"), key)
        translate = params.get("translate") or {}
        search = translate.get("search", {}) if isinstance(translate, dict) else {}
        check_wide_beam(self, from_dict(SearchOptions, search, "translate.search"), key)

    def check_runtime(self, key: str) -> None:
        """The BLEU tokenizer's extra packages must be installed here."""
        check_tokenizer_installed(self.bleu_tokenize, f"{key}.bleu_tokenize")
