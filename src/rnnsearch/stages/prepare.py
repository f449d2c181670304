"""DVC stage ``prepare``: corpus -> cleaned, sampled train/dev/test text (``data/prepared``).

Each split is located (mirror, cache or download), verified, cleaned and sampled (test optionally
stratified by length); ``meta.json`` records the languages, each split's statistics and the
report's ``corpus_info``. ``corpus: custom`` reads ``prepare.custom``'s files; without test files a
seeded test split is held out of the cleaned training pairs. A given dev or test file is used whole
(empty sides dropped) unless ``prepare.custom.cut_given`` lists it: scores on a silently cut test
set compare with nobody's. Whatever drops pairs is said in one line naming its params key and
counted in the metrics; an emptied split is refused. HTML entities are counted and warned about
unless ``prepare.clean.unescape_entities`` is set."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from rnnsearch import tracking
from rnnsearch.config.prepare import CUSTOM, PrepareConfig, auto_test_size
from rnnsearch.data import custom
from rnnsearch.data.clean import (RULE_FIELDS, USABLE_ONLY, CleanRules, clean_pairs,
                                  count_entities, sample_indices, sentence_length,
                                  stratified_indices, unescape_lines)
from rnnsearch.data.corpora import SPLITS, get_corpus, locate
from rnnsearch.data.textio import read_parallel, write_lines
from rnnsearch.errors import DataError
from rnnsearch.stages.runner import Stage, StageContext

# Why a pair with a side without words was dropped (the rules that have a params key: RULE_FIELDS).
UNUSABLE = {"empty": "empty (a side without words)", "control": "control characters only"}
ENTITY_EXAMPLES = "&apos; &quot; &amp; &#39;"
HELD_OUT_BUCKET_SHARE = 0.5   # a stratified held-out test takes at most half of a length bucket


def is_given(cfg: PrepareConfig, split: str) -> bool:
    """True when ``split`` comes from the user's own dev or test file."""
    return cfg.corpus == CUSTOM and cfg.custom.is_given(split)


def is_whole(cfg: PrepareConfig, split: str) -> bool:
    """True when ``split`` is a given file used whole (see the module doc)."""
    return is_given(cfg, split) and cfg.custom.is_whole(split)


def clean_rules(cfg: PrepareConfig) -> CleanRules:
    """The ``prepare.clean`` rules."""
    return CleanRules(cfg.clean.min_len, cfg.clean.max_len, cfg.clean.max_ratio)


def _select(cfg: PrepareConfig, split: str, src: list[str]) -> tuple[list[int], dict[str, Any]]:
    """Indices to keep for ``split`` (seeded; the test split may be stratified by length, and
    is refused when its length buckets take no pair); all of a split used whole."""
    if is_whole(cfg, split):
        return list(range(len(src))), {}
    if split == "test" and cfg.test_buckets:
        return _stratified(cfg, src)
    size = getattr(cfg.sizes, split)
    return sample_indices(len(src), size, cfg.seed), {}


def _stratified(cfg: PrepareConfig, src: list[str], max_share: float = 1.0
                ) -> tuple[list[int], dict[str, Any]]:
    """The test pairs by ``prepare.test_buckets``/``test_per_bucket`` (at most ``max_share``
    of a bucket's pairs) and their count per bucket; refused when the buckets take none."""
    lengths = [sentence_length(s) for s in src]
    chosen, counts = stratified_indices(lengths, cfg.test_buckets, cfg.test_per_bucket, cfg.seed,
                                        max_share)
    if not chosen:
        raise DataError(no_test_pairs_message(cfg, lengths))
    lows = (0,) + cfg.test_buckets[:-1]
    buckets = {f"{lo + 1}-{hi}": n for lo, hi, n in zip(lows, cfg.test_buckets, counts)}
    return chosen, {"per_bucket": buckets}


def no_test_pairs_message(cfg: PrepareConfig, lengths: list[int]) -> str:
    """Why the length buckets took no test pair from clean pairs of source ``lengths``."""
    edges = f"prepare.test_buckets {list(cfg.test_buckets)}"
    where = f"the {len(lengths)} clean pairs the test split is drawn from"
    if min(lengths) > cfg.test_buckets[-1]:
        return (f"{edges}: none of {where} has a source of at most {cfg.test_buckets[-1]} "
                f"words (the shortest has {min(lengths)})")
    return f"{edges}: no length bucket of {where} has two pairs to share between train and test"


def held_out_test(cfg: PrepareConfig, src: list[str]) -> tuple[list[int], dict[str, Any]]:
    """The training pairs held out for test, with ``test_size`` (the number asked) in the stats."""
    if cfg.custom.test_stratified:
        return _stratified(cfg, src, max_share=HELD_OUT_BUCKET_SHARE)
    size = cfg.custom.test_size
    if size == "auto":
        size = auto_test_size(len(src))
    return sample_indices(len(src), size, cfg.seed), {"test_size": size}


def read_split(cfg: PrepareConfig, split: str) -> tuple[list[str], list[str], dict[str, Any]]:
    """The raw pairs of ``split`` and where they came from: ``files`` (the paths read) and, for
    a custom corpus, ``inputs`` (each file as the params give it, a relative path relative, and
    its sha256: the metrics and the report name no folder of this machine)."""
    if cfg.corpus == CUSTOM:
        given = getattr(cfg.custom, split)
        text = custom.read_split(given.located(StageContext.project_path).files(),
                                 f"prepare.custom.{split}", cfg.cache_dir, cfg.download)
        as_given = {role: {**read, "file": given.files()[role][0]}
                    for role, read in text.inputs.items()}
        return text.src, text.tgt, {"files": text.paths, "inputs": as_given}
    corpus = get_corpus(cfg.corpus)
    paths = [locate(corpus, split, lang, cfg.mirror, cfg.cache_dir, cfg.download)
             for lang in (cfg.src_lang, cfg.tgt_lang)]
    return *read_parallel(*paths), {"files": [str(p) for p in paths]}


def read_clean(cfg: PrepareConfig, split: str) -> tuple[list[str], list[str], dict[str, Any]]:
    """The cleaned pairs of ``split`` and their statistics (``pairs`` left to the caller);
    entities counted in the raw text; a split cleaning empties is refused."""
    src, tgt, origin = read_split(cfg, split)
    entities = {"src": count_entities(src), "tgt": count_entities(tgt),
                "unescaped": cfg.clean.unescape_entities}
    if cfg.clean.unescape_entities:
        src, tgt = unescape_lines(src), unescape_lines(tgt)
    rules = USABLE_ONLY if is_whole(cfg, split) else clean_rules(cfg)
    src, tgt, dropped = clean_pairs(src, tgt, rules)
    stats = {"raw_pairs": len(src) + sum(dropped.values()), "dropped": dropped,
             "clean_pairs": len(src), "pairs": 0, "entities": entities, **origin}
    if is_given(cfg, split):
        stats["cut"] = not is_whole(cfg, split)
    if not src:
        raise DataError(emptied_message(split, stats, rules))
    return src, tgt, stats


def emptied_message(split: str, stats: dict[str, Any], rules: CleanRules) -> str:
    """Why cleaning emptied ``split``: its files, the dropping rules, the params keys to loosen."""
    drops = {reason: n for reason, n in stats["dropped"].items() if n}
    keys = [rule_key(field, rules) for reason, field in RULE_FIELDS.items() if reason in drops]
    advice = (f"loosen {', '.join(keys)}" if keys
              else "every pair has a side without words")
    counts = ", ".join(f"{reason} {n}" for reason, n in drops.items())
    return (f"{', '.join(stats['files'])}: cleaning dropped all {stats['raw_pairs']} pairs of "
            f"the {split} split ({counts}): {advice}")


def rule_key(field: str, rules: CleanRules) -> str:
    """``prepare.clean.<field> (<value>)``."""
    return f"prepare.clean.{field} ({getattr(rules, field)})"


def sampling_key(cfg: PrepareConfig, split: str) -> str:
    """The params keys (with their values) that sample ``split``."""
    if split == "test" and cfg.test_buckets:
        return (f"prepare.test_buckets/test_per_bucket "
                f"({list(cfg.test_buckets)}/{cfg.test_per_bucket})")
    return f"prepare.sizes.{split} ({getattr(cfg.sizes, split)})"


def held_out_key(cfg: PrepareConfig) -> str:
    """The params key (with its value) that held the test split out of train."""
    if cfg.custom.test_stratified:
        return (f"prepare.custom.test_stratified, at most half of each of "
                f"{sampling_key(cfg, 'test')}")
    size = cfg.custom.test_size
    return ("prepare.custom.test_size (auto: 5%, at most 3,000)" if size == "auto"
            else f"prepare.custom.test_size ({size})")


def cut_reasons(cfg: PrepareConfig, split: str, stats: dict[str, Any]) -> list[str]:
    """What took pairs out of ``split``: ``<n> dropped by <key> (<value>)``, ``<n> dropped as
    empty (...)``, ``<n> held out for test by <key>``, ``<n> not sampled by <keys> (<values>)``."""
    rules = clean_rules(cfg)
    reasons = [f"{n:,} dropped by {rule_key(RULE_FIELDS[reason], rules)}" if reason in RULE_FIELDS
               else f"{n:,} dropped as {UNUSABLE[reason]}"
               for reason, n in stats["dropped"].items() if n]
    if stats.get("held_out_for_test"):
        reasons.append(f"{stats['held_out_for_test']:,} held out for test by {held_out_key(cfg)}")
    if stats.get("not_sampled"):
        reasons.append(f"{stats['not_sampled']:,} not sampled by {sampling_key(cfg, split)}")
    return reasons


def cut_notice(cfg: PrepareConfig, split: str, stats: dict[str, Any]) -> str | None:
    """The one line saying what was taken out of ``split`` and by which params key, with counts
    (None: nothing was). A held-out test split says where it came from."""
    if "held_out_from" in stats:
        return (f"prepare: {split}: {stats['pairs']:,} of train's {stats['clean_pairs']:,} "
                f"clean pairs held out by {held_out_key(cfg)}")
    if stats["pairs"] == stats["raw_pairs"]:
        return None
    given = " given" if "cut" in stats else ""
    return (f"prepare: {split}: kept {stats['pairs']:,} of {stats['raw_pairs']:,}{given} pairs: "
            f"{', '.join(cut_reasons(cfg, split, stats))}")


def entity_notice(split: str, stats: dict[str, Any]) -> str | None:
    """``split``'s HTML/XML entity line (None: none, or held out of train, whose line says it)."""
    entities = stats["entities"]
    total = entities["src"]["occurrences"] + entities["tgt"]["occurrences"]
    if not total or "held_out_from" in stats:
        return None
    where = (f"in {entities['src']['lines']:,} source and {entities['tgt']['lines']:,} target "
             f"lines")
    if entities["unescaped"]:
        return (f"prepare: {split}: unescaped {total:,} HTML/XML entities {where} "
                f"(prepare.clean.unescape_entities)")
    return (f"prepare: warning: {split}: {total:,} HTML/XML entities (such as {ENTITY_EXAMPLES}) "
            f"{where}, left as they are (the tokenizer splits &apos; into & apos ;): set "
            f"prepare.clean.unescape_entities: true to turn them into characters")


def write_split(out_dir: Path, split: str, src: list[str], tgt: list[str],
                chosen: list[int]) -> int:
    """Write the ``chosen`` pairs as ``<split>.src`` / ``<split>.tgt``; returns how many."""
    write_lines(out_dir / f"{split}.src", [src[i] for i in chosen])
    write_lines(out_dir / f"{split}.tgt", [tgt[i] for i in chosen])
    return len(chosen)


def prepare_split(cfg: PrepareConfig, split: str, out_dir: Path) -> dict[str, Any]:
    """Write ``<split>.src`` / ``<split>.tgt`` under ``out_dir``; return the split's statistics."""
    src, tgt, stats = read_clean(cfg, split)
    chosen, extra = _select(cfg, split, src)
    stats["pairs"] = write_split(out_dir, split, src, tgt, chosen)
    stats["not_sampled"] = stats["clean_pairs"] - stats["pairs"]
    return {**stats, **extra}


def prepare_held_out(cfg: PrepareConfig, out_dir: Path) -> dict[str, dict[str, Any]]:
    """Train and a test split held out of it (see the module doc); their statistics."""
    src, tgt, stats = read_clean(cfg, "train")
    test, extra = held_out_test(cfg, src)
    test_pairs = {(src[i], tgt[i]) for i in test}
    rest = [i for i in range(len(src)) if (src[i], tgt[i]) not in test_pairs]
    if not rest:
        raise DataError(f"{stats['files'][0]}: the test split held out all {len(src)} clean "
                        f"training pairs; lower prepare.custom.test_size, or give test files "
                        f"in prepare.custom.test")
    train = [rest[i] for i in sample_indices(len(rest), cfg.sizes.train, cfg.seed)]
    return {"train": {**stats, "pairs": write_split(out_dir, "train", src, tgt, train),
                      "held_out_for_test": len(src) - len(rest),
                      "not_sampled": len(rest) - len(train)},
            "test": {**stats, "pairs": write_split(out_dir, "test", src, tgt, test),
                     "held_out_from": "train", **extra}}


def prepare_corpus(cfg: PrepareConfig, out_dir: Path) -> dict[str, Any]:
    """Prepare every split into ``out_dir``; return the metadata written to ``meta.json``."""
    held_out = cfg.corpus == CUSTOM and cfg.custom.test is None
    done = prepare_held_out(cfg, out_dir) if held_out else {}
    splits = {split: done.get(split) or prepare_split(cfg, split, out_dir) for split in SPLITS}
    return {"corpus": cfg.corpus, "src_lang": cfg.src_lang, "tgt_lang": cfg.tgt_lang,
            "corpus_info": corpus_block(cfg, splits["test"]), "splits": splits}


def corpus_block(cfg: PrepareConfig, test: dict[str, Any]) -> dict[str, str]:
    """The report's name for the data: corpus, title, languages, test set (``test``: its stats)."""
    title = "your own files" if cfg.corpus == CUSTOM else get_corpus(cfg.corpus).title
    return {"name": cfg.corpus, "title": title, "src_lang": cfg.src_lang,
            "tgt_lang": cfg.tgt_lang, "test_set": describe_test_set(cfg, test)}


def describe_test_set(cfg: PrepareConfig, test: dict[str, Any]) -> str:
    """The test set in one line: its file names (a built-in corpus' behind the corpus name),
    with ``, <kept> of <given> pairs`` when it was cut; or ``held out of the training files``."""
    if "held_out_from" in test:
        return f"held out of the training files ({test['pairs']:,} pairs)"
    if cfg.corpus == CUSTOM:
        line = " / ".join(custom.file_name(given["file"]) for given in test["inputs"].values())
    else:
        corpus = get_corpus(cfg.corpus)
        line = f"{cfg.corpus} " + " / ".join(corpus.file_name("test", lang)
                                             for lang in (cfg.src_lang, cfg.tgt_lang))
    if test["pairs"] < test["raw_pairs"]:
        line += f", {test['pairs']:,} of {test['raw_pairs']:,} pairs"
    return line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("data/prepared"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/prepare.json"))


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Prepare every split into ``args.out`` (atomically), then metrics and the MLflow run."""
    cfg = ctx.section(PrepareConfig)
    cfg = dataclasses.replace(cfg, mirror=ctx.project_path(cfg.mirror),
                              cache_dir=ctx.project_path(cfg.cache_dir))
    with ctx.output_dir(args.out) as tmp:
        meta = prepare_corpus(cfg, tmp)
        ctx.write_json(tmp / "meta.json", meta)
    splits = {split: {k: v for k, v in s.items() if k != "files"}
              for split, s in meta["splits"].items()}
    metrics = {**splits, "corpus": meta["corpus_info"]}
    ctx.write_metrics(args.metrics, metrics)
    for split, stats in splits.items():
        source = f" (held out of {stats['held_out_from']})" if "held_out_from" in stats else ""
        print(f"{split:5s}: {stats['raw_pairs']:>9,} raw, dropped {stats['dropped']}, "
              f"kept {stats['pairs']:,}{source}")
    for split, stats in splits.items():
        for notice in (entity_notice(split, stats), cut_notice(cfg, split, stats)):
            if notice:
                print(notice, file=sys.stderr)
    with ctx.mlflow_run(cfg):
        tracking.log_numeric_metrics(metrics)


STAGE = Stage("prepare", __doc__, add_arguments, lambda a: [a.out, a.metrics], body)
