"""The bench's results as one Markdown report (:class:`rnnsearch.reporting.tables.Table`)."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from rnnsearch.reporting.tables import Table

PEAK = ("peak memory MiB", "peak_memory_mib", "{:,.0f}")
# part -> its columns: (heading, key, format); each row's error stands in for its measurements
COLUMNS = {
    "training": [("model", "model", "{}"), ("batch", "batch", "{}"),
                 ("precision", "precision", "{}"),
                 ("tokens/s", "tokens_per_s", "{:,.0f}"), ("ms/step", "ms_per_step", "{:.1f}"),
                 ("achieved GFLOP/s", "gflops", "{:,.1f}"),
                 ("of the GEMM roofline", "roofline_share", "share"), PEAK],
    "arithmetic": [("model", "model", "{}"), ("batch", "batch", "{}"),
                   ("GEMM GFLOP/s fp32 before training", "gemm_gflops_fp32_before", "{:,.0f}"),
                   ("after", "gemm_gflops_fp32", "{:,.0f}"),
                   ("bf16", "gemm_gflops_bf16", "{:,.0f}"),
                   ("MFLOP/token (fwd+bwd)", "mflop_per_token", "{:.1f}"),
                   ("padding", "padding", "{:.1%}"),
                   ("roofline tokens/s fp32", "roofline_tokens_per_s_fp32", "{:,.0f}"),
                   ("bf16", "roofline_tokens_per_s_bf16", "{:,.0f}")],
    "decoding": [("model", "model", "{}"), ("method", "method", "{}"), ("batch", "batch", "{}"),
                 ("sentences/s", "sentences_per_s", "{:,.1f}"),
                 ("output tokens/s", "tokens_per_s", "{:,.0f}"),
                 ("mean output tokens", "mean_output_tokens", "{:.1f}"),
                 ("MFLOP/sentence", "mflop_per_sentence", "{:,.1f}"),
                 ("of the GEMM roofline", "roofline_share", "share"), PEAK]}
NOTES = {
    "arithmetic": "FLOPs counted by torch (FlopCounterMode) on the train stage's step over a "
                  "bucketed batch of median length; padding: of the first 200 batches' tokens. "
                  "The GEMM rate: of an n x n x n product (the plan's `gemm_size`), measured "
                  "before the model's training runs and after them. Roofline: the tokens/s if "
                  "every FLOP ran at the rate after; no step can beat it.",
    "decoding": "FLOPs counted by torch over the whole decoding at the largest batch, the "
                "roofline as for training."}


def table(title: str, header: Sequence[str], rows: Iterable[Sequence[Any]], *notes: str
          ) -> list[str]:
    return ["", Table(title, tuple(header), tuple(tuple(map(str, r)) for r in rows),
                      notes).markdown().rstrip("\n")]


def cell(row: dict[str, Any], key: str, form: str) -> str:
    """``row[key]`` in ``form``; a share of a roofline above 100% (unreachable: a wrong FLOP
    count or rate) is refused, not shown."""
    if key not in row:
        return "-"
    if form != "share":
        return form.format(row[key])
    return f"{row[key]:.0%}" if row[key] <= 1 else f"refused: {row[key]:.0%} is above the roofline"


def part_table(results: dict[str, Any], part: str, title: str) -> list[str]:
    """One part's rows; a failed measurement's error after its first columns, the rows of a
    model a busy machine may have moved marked."""
    columns, rows = COLUMNS[part], []
    for r in results[part]:
        shown = [cell(r, key, form) for _, key, form in columns]
        if "error" in r:
            shown = shown[:3] + [f"failed: {r['error']}"] + ["-"] * (len(columns) - 4)
        if "arithmetic_error" in r:          # a decoding row's FLOPs that could not be counted
            shown[-3] = f"failed: {r['arithmetic_error']}"
        if r["model"] in results.get("noisy", {}):
            shown[3] += " (noisy)"
        rows.append(shown)
    return table(title, [heading for heading, _, _ in columns], rows,
                 *([NOTES[part]] if part in NOTES else []))


def against_lines(results: dict[str, Any]) -> list[str]:
    """Each row beside the same row of the previous report of this machine."""
    previous = results.get("against") or {}
    if not previous.get("rows"):
        return ["", "No previous report of this machine to compare with (the report this run "
                "replaced was made elsewhere, or there was none; `--against FILE` names one)."]
    return table(f"Against the previous report ({previous['file']}, {previous['date']})",
                 ["part", "row", "before", "now", "now / before"],
                 [[r["part"], r["row"], f"{r['before']:,.1f}", f"{r['now']:,.1f}",
                   f"{r['ratio']:.2f}x"] for r in previous["rows"]],
                 "Training in target tokens/s, decoding in sentences/s; the same machine "
                 "(device, CPU, cores, threads), each row as it was measured then.")


def noisy_lines(results: dict[str, Any]) -> list[str]:
    """The models whose rows a busy machine may have moved (marked "noisy" in the tables)."""
    found = results.get("noisy") or {}
    return ["", "**Noisy rows.** " + "; ".join(f"{model}: {why}" for model, why in found.items())
            + ". Their rows are kept and marked; rerun with the machine to itself to confirm."
            ] if found else []


def profile_lines(results: dict[str, Any]) -> list[str]:
    """torch.profiler's tables (``make bench-full``)."""
    lines = []
    for p in results["profile"]:
        lines += ["", f"### Profile: {p['model']}, {p['part']}", ""]
        lines += [f"failed: {p['error']}"] if "error" in p else ["```", p["table"].rstrip(), "```"]
    return lines


def markdown_report(results: dict[str, Any]) -> str:
    """The whole report."""
    m, plan = results["machine"], results["plan"]
    where = (f"{m['gpu']} ({m['gpu_memory_gib']} GiB), CUDA {m['cuda']}" if "gpu" in m else
             f"{m.get('cpu', 'CPU')}, {m.get('cores', '?')} cores ({m.get('cpu_capability', '?')})")
    lines = [f"# Benchmark ({'GPU' if 'gpu' in m else m['device']})", "",
             f"Device: {where}; torch {m['torch']}, Lightning {m['lightning']}, {m['threads']} "
             f"threads. Command: `{m['command']}` ({m['date']}, {m.get('bench_seconds', '?')} s). "
             f"Load average (1, 5, 15 min): {m['load_average_before']} at the start, "
             f"{m.get('load_average_after')} at the end.", "",
             "Training runs the train stage's Trainer on synthetic pairs shaped like the default "
             f"Hansard sample: {plan['warmup_steps']} warm-up steps, then {plan['steps']} timed "
             f"ones, wall clock. Decoding: {7 * plan['per_bucket']:,} synthetic sentences "
             "stratified like the default test set (1-80 words), outputs one token longer than "
             "the source (`rnnsearch/bench/data.py` says why these stand for the real ones)."]
    lines += noisy_lines(results) + against_lines(results)
    lines += part_table(results, "training", "Training (target tokens/s)")
    lines += part_table(results, "arithmetic", "Arithmetic")
    lines += part_table(results, "decoding", "Decoding")
    return "\n".join(lines + profile_lines(results) + ["", "Bench time by part: " + ", ".join(
        f"{name} {s:.0f} s" for name, s in results["seconds"].items()) + "."]) + "\n"
