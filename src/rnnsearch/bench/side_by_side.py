"""``python -m rnnsearch.bench.side_by_side --against REV``: decoding speed of this checkout beside
another commit's, same machine, same moment. Each ``make bench`` model gets random weights once;
both checkouts load them, start together (one thread, one core each), decode the bench's test
sources at batch 64 for a few rounds and report the best round, the share of copies in the
profile and a digest of all outputs (words, scores), which must match. Writes
``reports/bench_side_by_side.{json,md}`` (``--out``)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from rnnsearch.bench.__main__ import shown_command
from rnnsearch.bench.data import stratified_sources
from rnnsearch.bench.measure import PLANS, BenchModel, bench_models
from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least
from rnnsearch.config.repository import repo_root
from rnnsearch.data.textio import atomic_write_text, write_json
from rnnsearch.environment import cpu_model
from rnnsearch.errors import ConfigError

METHODS = {"greedy": 1, "beam5": 5}
COPIES = [f"aten::{op}" for op in "copy_ fill_ zero_ cat index_select index_add_ gather "
          "scatter_ scatter_add_ index_copy_".split()]         # copies, fills, indexing
# runs in the checkout under test, so it uses only what both commits have
WORKER = """
import hashlib, json, sys, time, torch
from rnnsearch.allocator import keep_freed_memory
from rnnsearch.config.model import ModelConfig
from rnnsearch.decoding.corpus import translate_corpus
from rnnsearch.decoding.options import SearchOptions
from rnnsearch.models.seq2seq import build_model
torch.set_num_threads(1)
keep_freed_memory()
setup = json.load(open("setup.json"))
model = build_model(ModelConfig(**setup["config"]), setup["vocab"], setup["vocab"]).eval()
model.load_state_dict(torch.load("weights.pt"))
options = SearchOptions(beam_size=setup["beam"], nbest=1, max_len_a=1.0, max_len_b=1)
name, sources = "greedy" if setup["beam"] == 1 else "beam", setup["sources"]
decode = lambda some: translate_corpus(model, some, name, options, 64, progress=False)
decode(sources[:64])
seconds = []
for _ in range(setup["rounds"]):
    start = time.perf_counter()
    outputs = [(t.best.tokens, t.best.score) for t in decode(sources).translations]
    seconds.append(time.perf_counter() - start)
with torch.profiler.profile() as profiled:
    decode(sources[:64])
own = {e.key: e.self_cpu_time_total for e in profiled.key_averages()}
print(json.dumps({"seconds": min(seconds), "rounds": seconds, "sentences": len(sources),
                  "outputs": hashlib.sha256(json.dumps(outputs).encode()).hexdigest()[:16],
                  "sentences_per_s": len(sources) / min(seconds),
                  "copies_share": sum(own.get(op, 0) for op in setup["copies"])
                                  / sum(own.values())}))
"""


def side_by_side(model: BenchModel, checkouts: dict[str, Path], method: str, rounds: int
                 ) -> dict[str, Any]:
    """Both checkouts decode ``model``'s sources with the same weights, started together."""
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
        torch.save(model.build().state_dict(), Path(tmp) / "weights.pt")
        setup = {"config": model.config.__dict__, "vocab": model.vocab, "rounds": rounds,
                 "sources": stratified_sources(model.vocab, 10), "beam": METHODS[method],
                 "copies": COPIES}
        (Path(tmp) / "setup.json").write_text(json.dumps(setup))
        runs = {name: subprocess.Popen(       # -c: no folder of this file on the import path
            [sys.executable, "-c", WORKER], cwd=tmp, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(checkout / "src"), "OMP_NUM_THREADS": "1"})
            for name, checkout in checkouts.items()}
        return {name: json.loads(run.communicate()[0]) for name, run in runs.items()}


def markdown(results: dict[str, Any]) -> str:
    head = results["machine"]
    lines = [f"# Decoding side by side: {head['this']} against {head['against']}", "",
             f"{head['cpu']}, {head['cores']} cores, one thread each, started together, "
             f"{head['date']}. `{head['command']}`. Best of {head['rounds']} rounds over "
             f"{head['sentences']} test sources at batch 64.", "",
             "| model, method | sentences/s before | now | speed-up | copies' share of the "
             "profile, before | now | outputs |", "|---|---:|---:|---:|---:|---:|---|"]
    for name, row in results["rows"].items():
        before, now = row["against"], row["this"]
        same = "identical" if before["outputs"] == now["outputs"] else "**differ**"
        lines.append(f"| {name} | {before['sentences_per_s']:.1f} | "
                     f"{now['sentences_per_s']:.1f} | {row['speed_up']:.2f}x | "
                     f"{before['copies_share']:.0%} | {now['copies_share']:.0%} | {same} |")
    return "\n".join(lines) + "\n"


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo_root()), *args], capture_output=True, text=True)


@entry_point("python -m rnnsearch.bench.side_by_side")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.bench.side_by_side",
                                     description=__doc__)
    parser.add_argument("--against", required=True, help="a commit of this repository")
    parser.add_argument("--models", nargs="+", default=["transformer", "search"])
    parser.add_argument("--rounds", type=at_least(1), default=3)
    parser.add_argument("--out", type=Path, default=repo_root() / "reports")
    args = parser.parse_args(argv)
    models = [m for m in bench_models(PLANS["quick"], repo_root() / "params.yaml")
              if m.kind in args.models]
    with tempfile.TemporaryDirectory(prefix="against-") as tmp:
        added = git("worktree", "add", "--detach", f"{tmp}/checkout", args.against)
        if added.returncode:
            raise ConfigError(f"--against {args.against}: no such commit in {repo_root()} "
                              f"({added.stderr.strip().splitlines()[-1]})")
        try:
            rows = {f"{m.kind} {method}": side_by_side(m, {"against": Path(tmp) / "checkout",
                                                           "this": repo_root()}, method,
                                                        args.rounds)
                    for m in models for method in METHODS}
        finally:
            git("worktree", "remove", "--force", f"{tmp}/checkout")
    for row in rows.values():
        row["speed_up"] = row["against"]["seconds"] / row["this"]["seconds"]
    results = {"machine": {"this": git("describe", "--always", "--dirty").stdout.strip(),
                           "against": args.against, "cpu": cpu_model(), "cores": os.cpu_count(),
                           "date": time.strftime("%Y-%m-%d"), "rounds": args.rounds,
                           "sentences": next(iter(rows.values()))["this"]["sentences"],
                           "command": shown_command(sys.argv[1:] if argv is None else argv,
                                                    "python -m rnnsearch.bench.side_by_side")},
               "rows": rows}
    write_json(args.out / "bench_side_by_side.json", results)
    atomic_write_text(args.out / "bench_side_by_side.md", markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
