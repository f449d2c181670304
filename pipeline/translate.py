"""DVC stage `translate` (one grid cell): decode the tokenised test set greedily and with beam
search; write hypotheses, n-best lists, attention, decode speed and alignment samples.

    python pipeline/translate.py --cell search-50
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rnnsearch import tracking
from rnnsearch.config import ConfigError, load_section
from rnnsearch.config.prepare import PrepareConfig
from rnnsearch.config.translate import TranslateConfig
from rnnsearch.data.textio import DataError, atomic_dir, read_lines, write_json
from rnnsearch.decoding import stage
from rnnsearch.decoding.translator import Translator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell", required=True, help="grid cell, e.g. search-50")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--models", type=Path, default=Path("data/models"))
    parser.add_argument("--tokenized", type=Path, default=Path("data/tokenized"))
    parser.add_argument("--out", type=Path, default=Path("data/translations"))
    parser.add_argument("--alignments", type=Path, default=Path("metrics/alignments"))
    args = parser.parse_args(argv)
    try:
        cfg = load_section(TranslateConfig, "translate", args.params)
        tgt_lang = load_section(PrepareConfig, "prepare", args.params).tgt_lang
        translator = Translator.load(args.models / args.cell / "model.pt", args.tokenized,
                                     cfg.source_eos)
        lines = read_lines(args.tokenized / "test.src")
    except (ConfigError, DataError, FileNotFoundError, ValueError) as err:
        print(f"translate: error: {err}", file=sys.stderr)
        return 2
    sources = [line.split() for line in lines[: cfg.max_sentences or None]]
    results = stage.decode_all(translator, sources, cfg)
    speed = stage.measure_speed(translator, sources, results, cfg)
    indices = stage.sample_indices(sources, cfg)
    with atomic_dir(args.out / args.cell) as tmp:
        systems = stage.write_systems(tmp, translator, sources, results, cfg, tgt_lang)
        kept = range(len(sources)) if cfg.attention == "all" else indices
        stage.write_attention(tmp / "attention.npz", results,
                              [] if cfg.attention == "none" else kept)
        stage.write_meta(tmp / "meta.json", args.cell, translator, cfg, systems, speed,
                         len(sources))
    write_json(args.alignments / f"{args.cell}.json",
               {"cell": args.cell, "samples": stage.alignment_samples(translator, sources,
                                                                        results, indices)})
    for name, row in speed.items():
        print(f"translate {args.cell}: {name}: {row['sentences_per_s']} sentences/s "
              f"(batch {row['batch_size']}, {row['sentences']} sentences)")
    with tracking.start_run("translate", cfg, run_name=f"translate-{args.cell}",
                            tags={"cell": args.cell}):
        tracking.log_numeric_metrics({"speed": speed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
