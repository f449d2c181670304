"""DVC stage ``align``: IBM Model 1 and fast_align (``fast_align_vb``: with its Dirichlet prior,
``align.alpha``) trained by EM both ways, symmetrised and scored (AER) against the Hansard gold
set, whose 447 pairs are mapped onto the pipeline's tokens and join the EM corpus unannotated.
Aligners work on words (subword pieces joined back). Writes

* ``data/align/gold.json``: the gold sentences, their tokens and the gold words each covers;
* ``data/align/<model>.<links>.wa``: predicted gold links (``id e f``, 1-based);
* ``data/align_links/``: ``{train,dev}.links`` (Pharaoh ``i-j``, 0-based) of ``align.train_links``
  for supervised attention, and ``meta.json``; empty when it is null (no train cell goes stale);
* ``metrics/align.json``: EM log-likelihood per iteration, AER / precision / recall, the diagonal
  baseline, mapping statistics, times (no AER without gold: the metrics say why)."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rnnsearch.alignment import Link
from rnnsearch.alignment.corpus import EMJob, GoldCorpus, run_jobs, symmetrised
from rnnsearch.alignment.gold import GOLD_LANGS, GoldPair, locate_gold, read_gold
from rnnsearch.alignment.ibm1 import DiagonalPrior
from rnnsearch.alignment.mapping import NgramCounts, map_corpus
from rnnsearch.config.align import AlignConfig
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.config.tokenize import TokenizeConfig
from rnnsearch.data.meta import read_languages
from rnnsearch.data.subword import word_lines
from rnnsearch.data.textio import read_lines, write_json
from rnnsearch.stages.runner import Stage, StageContext

Sentences = list[list[str]]   # tokenised sentences of one language


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"),
                        help="train.{src,tgt}: the tokenised training pairs (and dev.{src,tgt}, "
                             "linked with align.train_links)")
    parser.add_argument("--meta", type=Path, default=Path("data/prepared/meta.json"))
    parser.add_argument("--out", type=Path, default=Path("data/align"))
    parser.add_argument("--links-out", type=Path, default=Path("data/align_links"),
                        help="{train,dev}.links and meta.json: align.train_links for the train "
                             "stage")
    parser.add_argument("--metrics", type=Path, default=Path("metrics/align.json"))
    parser.add_argument("--processes", type=int, default=2, help="EM runs in parallel")


def load_gold(ctx: StageContext, langs: dict[str, str], lines: dict[str, list[str]]
              ) -> GoldCorpus | None:
    """The gold set mapped to pipeline tokens, or None when the pair is not English-French."""
    if sorted(langs.values()) != sorted(GOLD_LANGS):
        return None
    prepare = ctx.section(PrepareConfig, "prepare")
    lowercase = ctx.section(TokenizeConfig, "tokenize").lowercase
    paths = locate_gold(ctx.project_path(prepare.mirror), ctx.project_path(prepare.cache_dir),
                        prepare.download)
    pairs: list[GoldPair] = read_gold(paths)
    side = {lang: s for s, lang in langs.items()}
    mapped = {lang: map_corpus([getattr(p, lang) for p in pairs], lang, lowercase,
                               NgramCounts(lines[side[lang]])) for lang in GOLD_LANGS}
    return GoldCorpus(pairs, mapped["en"], mapped["fr"])


def directions(names: tuple[str, str]) -> tuple[str, str]:
    """The direction names (f given e, e given f) of ``names`` (e, f): ``("fr|en", "en|fr")``."""
    e, f = names
    return f"{f}|{e}", f"{e}|{f}"


def em_jobs(cfg: AlignConfig, e: Sentences, f: Sentences, names: tuple[str, str], keep: int,
            dev: tuple[Sentences, Sentences] = ([], [])) -> list[EMJob]:
    """Every aligner of ``cfg.models`` both ways (``names``: e, f languages), keeping Viterbi links
    of the first ``keep`` sentences; ``align.train_links``' of all, with ``dev`` (e, f) added."""
    f_given_e, e_given_f = directions(names)
    linker = (cfg.train_links_choice or (None,))[0]
    jobs = []
    for model in cfg.models:
        prior = DiagonalPrior(cfg.p_null, cfg.tension) if model.startswith("fast_align") else None
        alpha = cfg.alpha if model == "fast_align_vb" else None
        src, tgt, kept = (e + dev[0], f + dev[1], len(e) + len(dev[0])) if model == linker \
            else (e, f, keep)
        jobs.append(EMJob(model, f_given_e, src, tgt, cfg.iterations, prior, kept, alpha))
        jobs.append(EMJob(model, e_given_f, tgt, src, cfg.iterations, prior, kept, alpha))
    return jobs


def read_words(data: Path, split: str, subwords: bool) -> dict[str, list[str]]:
    """``<split>.src``/``.tgt`` of ``data`` as lines of words (``subwords``: pieces joined)."""
    lines = {side: read_lines(data / f"{split}.{side}") for side in ("src", "tgt")}
    return {side: word_lines(text) for side, text in lines.items()} if subwords else lines


def dev_text(data: Path, cfg: AlignConfig, langs: dict[str, str], subwords: bool
             ) -> tuple[Sentences, Sentences]:
    """The dev pairs as (e, f) sentences, for ``align.train_links``; none when it is null."""
    if cfg.train_links is None:
        return [], []
    e, f, _ = training_text(read_words(data, "dev", subwords), langs, 0)
    return e, f


def training_text(lines: dict[str, list[str]], langs: dict[str, str], max_pairs: int
                  ) -> tuple[Sentences, Sentences, tuple[str, str]]:
    """(e sentences, f sentences, (e lang, f lang)): English first when the pair has it."""
    first, second = ("src", "tgt") if langs["tgt"] == "fr" or langs["src"] == "en" else ("tgt", "src")
    n = len(lines[first]) if max_pairs == 0 else min(max_pairs, len(lines[first]))
    e = [line.split() for line in lines[first][:n]]
    f = [line.split() for line in lines[second][:n]]
    return e, f, (langs[first], langs[second])


def write_links(path: Path, gold: GoldCorpus, links: list[set[Link]]) -> None:
    """Links in the gold file format: ``id e f`` per line, 1-based gold positions."""
    rows = [f"{p.ident} {e + 1} {f + 1}" for p, sentence in zip(gold.pairs, gold.to_gold(links))
            for e, f in sorted(sentence)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def score_results(results: list[dict[str, Any]], gold: GoldCorpus | None, cfg: AlignConfig,
                  out: Path | None, names: tuple[str, str]) -> dict[str, Any]:
    """Per aligner: curves, times and (with gold) every link set's scores; ``names``: e, f langs."""
    models: dict[str, Any] = {}
    for result in results:
        entry = models.setdefault(result["model"], {"log_likelihood": {}, "seconds": {},
                                                    "parameters": {}})
        for key in ("log_likelihood", "seconds", "parameters"):
            entry[key][result["direction"]] = result[key]
    if gold is None:
        return models
    for name, entry in models.items():
        by_direction = {r["direction"]: r["choices"][: len(gold.pairs)] for r in results
                        if r["model"] == name}
        link_sets = symmetrised([by_direction[d] for d in directions(names)], directions(names),
                                cfg.symmetrize)
        entry["scores"] = {key: gold.score(links) for key, links in link_sets.items()}
        if out is not None:
            for key, links in link_sets.items():
                write_links(out / f"{name}.{key.replace('|', '-given-')}.wa", gold, links)
    return models


def training_links(results: list[dict[str, Any]], cfg: AlignConfig, names: tuple[str, str],
                   skip: int, train: int) -> dict[str, list[set[Link]]]:
    """``align.train_links``' (e, f) links per split: after the first ``skip`` sentences (the
    gold ones), ``train`` training sentences, then the dev ones; {} when it is null."""
    choice = cfg.train_links_choice
    if choice is None:
        return {}
    model, name = choice
    both = directions(names)
    by_direction = {r["direction"]: r["choices"][skip:] for r in results if r["model"] == model}
    links = symmetrised([by_direction[d] for d in both], both, (name,))[name]
    return {"train": links[:train], "dev": links[train:]}


def pharaoh_lines(links: list[set[Link]], e_is_src: bool) -> list[str]:
    """One line per sentence: ``i-j`` links (0-based source, target positions), sorted."""
    def ordered(link: Link) -> Link:
        return link if e_is_src else (link[1], link[0])

    return [" ".join(f"{i}-{j}" for i, j in sorted(map(ordered, sentence)))
            for sentence in links]


LINKED_SPLITS = ("train", "dev")


def write_train_links(out: Path, cfg: AlignConfig, links: dict[str, list[set[Link]]],
                      e_is_src: bool) -> None:
    """``<split>.links`` (Pharaoh, empty without links) and ``meta.json`` into ``out``."""
    pairs = {}
    for split in LINKED_SPLITS:
        lines = pharaoh_lines(links.get(split, []), e_is_src)
        (out / f"{split}.links").write_text("".join(f"{line}\n" for line in lines),
                                            encoding="utf-8")
        pairs[split] = len(lines)
    write_json(out / "meta.json", {"train_links": cfg.train_links, "pairs": pairs})


def mapping_stats(gold: GoldCorpus) -> dict[str, Any]:
    """How the gold tokens map onto the pipeline's (tokens on each side, tokens merged)."""
    stats: dict[str, Any] = {"sentences": len(gold.pairs)}
    for lang, mapped in (("en", gold.en), ("fr", gold.fr)):
        stats[lang] = {"gold_tokens": sum(len(getattr(p, lang)) for p in gold.pairs),
                       "pipeline_tokens": sum(len(m.tokens) for m in mapped),
                       "tokens_covering_several": sum(len(c) > 1 for m in mapped for c in m.cover)}
    stats["sure_links"] = sum(len(p.sure) for p in gold.pairs)
    stats["possible_links"] = sum(len(p.possible) for p in gold.pairs)
    return stats


def log_metrics(ctx: StageContext, cfg: AlignConfig, metrics: dict[str, Any]) -> None:
    """The EM curves (step = iteration) and every AER as MLflow metrics."""
    import mlflow

    with ctx.mlflow_run(cfg):
        for model, entry in metrics["models"].items():
            for direction, curve in entry["log_likelihood"].items():
                for step, value in enumerate(curve):
                    mlflow.log_metric(f"{model}/{direction.replace('|', '_given_')}/log_likelihood",
                                      value, step=step)
            for links, scores in entry.get("scores", {}).items():
                for score in ("aer", "precision", "recall"):
                    mlflow.log_metric(f"{model}/{links.replace('|', '_given_')}/{score}",
                                      scores[score])
        if "diagonal" in metrics:
            mlflow.log_metric("diagonal/aer", metrics["diagonal"]["aer"])


def body(args: argparse.Namespace, ctx: StageContext) -> None:
    """Map the gold set, train the aligners, score them; then write outputs and metrics."""
    cfg = ctx.section(AlignConfig)
    started = time.perf_counter()
    langs = read_languages(args.meta)
    subwords = ctx.section(TokenizeConfig, "tokenize").subwords
    lines = read_words(args.data, "train", subwords)
    gold = load_gold(ctx, langs, lines)
    e, f, names = training_text(lines, langs, cfg.max_pairs)
    if gold is not None:
        e = [list(m.tokens) for m in gold.en] + e
        f = [list(m.tokens) for m in gold.fr] + f
    keep = len(gold.pairs) if gold is not None else 0
    dev = dev_text(args.data, cfg, langs, subwords)
    results = run_jobs(em_jobs(cfg, e, f, names, keep, dev), args.processes)
    metrics: dict[str, Any] = {"languages": {"e": names[0], "f": names[1]},
                               "training_pairs": len(e) - keep, "gold_pairs_added": keep}
    with ctx.output_dir(args.out) as tmp:
        metrics["models"] = score_results(results, gold, cfg, tmp, names)
        ctx.write_json(tmp / "gold.json", gold.records() if gold is not None else [])
    with ctx.output_dir(args.links_out) as tmp:
        write_train_links(tmp, cfg, training_links(results, cfg, names, keep, len(e) - keep),
                          e_is_src=names[0] == langs["src"])
    if gold is None:
        metrics["gold"] = f"no gold alignments for {names[0]}-{names[1]} (only English-French)"
    else:
        metrics["gold"] = mapping_stats(gold)
        metrics["diagonal"] = gold.diagonal()
    metrics["seconds"] = round(time.perf_counter() - started, 1)
    ctx.write_metrics(args.metrics, metrics)
    for model, entry in metrics["models"].items():
        for links, scores in entry.get("scores", {}).items():
            print(f"align {model} {links}: AER {scores['aer']:.3f} precision "
                  f"{scores['precision']:.3f} recall {scores['recall']:.3f}")
    print(f"align: {metrics['seconds']} s")
    log_metrics(ctx, cfg, metrics)


STAGE = Stage("align", __doc__, add_arguments, lambda a: [a.out, a.links_out, a.metrics], body)
