"""DVC stage `embed`: tokenised training text -> word2vec vectors per language (data/embed)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rnnsearch import tracking
from rnnsearch.config import ConfigError, load_section
from rnnsearch.config.embed import EmbedConfig
from rnnsearch.data.textio import DataError, atomic_dir, write_json
from rnnsearch.embeddings.stage import embed_corpus, log_result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--data", type=Path, default=Path("data/tokenized"),
                        help="train.{src,tgt} and vocab.{src,tgt}.txt")
    parser.add_argument("--meta", type=Path, default=Path("data/prepared/meta.json"),
                        help="the prepare stage's meta.json (src_lang, tgt_lang)")
    parser.add_argument("--out", type=Path, default=Path("data/embed"))
    parser.add_argument("--metrics", type=Path, default=Path("metrics/embed.json"))
    args = parser.parse_args(argv)
    try:
        cfg = load_section(EmbedConfig, "embed", args.params)
        meta = json.loads(args.meta.read_text(encoding="utf-8"))
        langs = {"src": meta["src_lang"], "tgt": meta["tgt_lang"]}
        with atomic_dir(args.out) as tmp:
            result = embed_corpus(cfg, args.data, tmp, langs)
    except (ConfigError, DataError, OSError, KeyError, ValueError) as err:
        print(f"embed: error: {err}", file=sys.stderr)
        return 2
    write_json(args.metrics, result.metrics)
    print(json.dumps(result.metrics, indent=2))
    with tracking.start_run("embed", cfg):
        tracking.log_numeric_metrics(result.metrics)
        log_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
