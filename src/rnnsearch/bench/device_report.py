"""The device benchmark's results (:mod:`rnnsearch.bench.device`) as a Markdown report."""
from __future__ import annotations

from typing import Any

from rnnsearch.bench.table import markdown_table

# The speeds aimed for on one H200-class GPU: (what, model, batch (0: its best), required tokens/s)
TRAINING_TARGETS = (("paper width, batch 80", "paper", 80, 100_000),
                    ("paper width, best batch", "paper", 0, 300_000),
                    ("default h256, batch 64", "default", 64, 100_000))
DECODING_TARGETS = (("beam 5, 2,100 sentences", "beam5", 3_000), ("greedy", "greedy", 10_000))


def _best(rows: list[dict[str, Any]], key: str, **match: Any) -> dict[str, Any] | None:
    """The row of ``rows`` matching ``match`` with the highest ``key``, if any has it."""
    fits = [r for r in rows if key in r and all(r[k] == v for k, v in match.items())]
    return max(fits, key=lambda r: r[key]) if fits else None


def _met(row: dict[str, Any] | None, key: str, required: float) -> list[str]:
    if row is None:
        return ["not measured", "-"]
    return [f"{row[key]:,.0f} (batch {row['batch']}"
            + (f", {row['precision']}" if "precision" in row else "")
            + (", CUDA graphs)" if row.get("cuda_graphs") else ")"),
            "yes" if row[key] >= required else "**no**"]


def target_rows(results: dict[str, Any]) -> list[list[Any]]:
    """Each target: required, measured (the best row that qualifies), met."""
    rows = []
    for what, model, batch, required in TRAINING_TARGETS:
        match = {"model": model, **({"batch": batch} if batch else {})}
        best = _best(results["training"], "tokens_per_s", **match)
        rows.append([f"training tokens/s, {what}", f">= {required:,}",
                     *_met(best, "tokens_per_s", required)])
    for what, method, required in DECODING_TARGETS:
        best = _best(results["decoding"], "sentences_per_s", model="default", method=method)
        rows.append([f"decoding sentences/s, {what}", f">= {required:,}",
                     *_met(best, "sentences_per_s", required)])
    return rows


def training_rows(results: dict[str, Any]) -> list[list[Any]]:
    """One row per training run: speed, achieved rate against the card and the roofline."""
    flops = {a["model"]: a["mflop_per_token"] * 1e6 for a in results["arithmetic"]
             if "error" not in a}
    roofline = {(a["model"], a["batch"]): a for a in results["arithmetic"]}
    card = results["card"]
    rows = []
    for r in results["training"]:
        graphs = "yes" if r.get("cuda_graphs") else "no"
        if "tokens_per_s" not in r:
            rows.append([r["model"], r["batch"], r["precision"], graphs, r.get("error", "failed"),
                         "", "", "", "", "", f"{r['peak_memory_mib']:,.0f}"])
            continue
        kind = "bf16" if r["precision"].startswith("bf16") else "fp32"
        bound = roofline.get((r["model"], r["batch"]), {}).get(f"roofline_tokens_per_s_{kind}")
        captured = (f"{r['cuda_graph_shapes']} in {r['cuda_graph_capture_seconds']:.1f} s"
                    if "cuda_graph_shapes" in r else "-")
        if r.get("cuda_graph_error"):
            captured += f" (capture failed, eager after: {r['cuda_graph_error'][:80]})"
        rate = ["-", "-"]                          # until the model's FLOPs are measured
        if r["model"] in flops:
            achieved = r["tokens_per_s"] * flops[r["model"]] / 1e12        # TFLOP/s
            rate = [f"{achieved:.2f}", f"{achieved / card[f'tflops_{kind}']:.1%}"]
        rows.append([r["model"], r["batch"], r["precision"], graphs, f"{r['tokens_per_s']:,.0f}",
                     f"{r['ms_per_step']:.1f}", captured, *rate,
                     f"{r['tokens_per_s'] / bound:.0%}" if bound else "-",
                     f"{r['peak_memory_mib']:,.0f}"])
    return rows


PROFILE_COLUMNS = ["wall ms", "kernels", "GPU busy ms", "GPU idle", "top kernels (ms)"]


def _profiled(p: dict[str, Any]) -> list[str]:
    """The columns :data:`PROFILE_COLUMNS` of one profile (per step, or per batch), or the
    error that stopped it."""
    if "error" in p:
        return _failed(p, len(PROFILE_COLUMNS))
    return [f"{p['wall_ms_per_step']:,.1f}", f"{p['kernels_per_step']:,.0f}",
            f"{p['gpu_busy_ms_per_step']:,.1f}",
            f"{p['gpu_idle_share']:.0%}" if p["gpu_idle_share"] is not None else "-",
            "; ".join(f"{k['name']} {k['ms']:.2f}" for k in p["top_kernels_ms"][:3])]


def _section(title: str, intro: str, columns: list[str], rows: list[list[Any]]) -> list[str]:
    """A titled table, or nothing when there are no rows."""
    if not rows:
        return []
    return ["", f"## {title}", "", intro, ""] + markdown_table(columns, rows)


def profile_lines(results: dict[str, Any]) -> list[str]:
    """The profiler's accounts of a training step and of a decoding batch (torch.profiler)."""
    training = [[p["model"], p["batch"], f"{p['src_len']} x {p['tgt_len']}",
                 "yes" if p["cuda_graphs"] else "no",
                 *_profiled(p)]
                for p in results.get("profile", [])]
    decoding = [[p["model"], p["method"], p["sentences"], *_profiled(p)]
                for p in results.get("profile_decoding", [])]
    return _section(
        "Where a training step's time goes (torch.profiler)",
        "One bucketed batch of median length, model + Adam as the train stage steps them (fp32), "
        "profiled over several steps after a warm-up; per step. A GPU idle most of the step is "
        "waiting for the host to launch kernels (launch-bound), not computing.",
        ["model", "batch", "padded src x tgt", "CUDA graphs", *PROFILE_COLUMNS], training
    ) + _section(
        "Where a decoding batch's time goes (torch.profiler)",
        "One batch of the largest decode batch size, sentences of every length; for the whole "
        "batch.", ["model", "method", "sentences", *PROFILE_COLUMNS], decoding)


def _failed(row: dict[str, Any], columns: int) -> list[str]:
    """``columns`` cells for a measurement that failed: its error, then blanks."""
    return [f"failed: {row['error']}", *[""] * (columns - 1)]


def arithmetic_rows(results: dict[str, Any]) -> list[list[Any]]:
    return [[a["model"], a["batch"],
             *(_failed(a, 5) if "error" in a else
               [f"{a['mflop_per_token']:.1f}", f"{a['gemm_gflops_fp32']:,.0f}",
                f"{a['roofline_tokens_per_s_fp32']:,.0f}", f"{a['gemm_gflops_bf16']:,.0f}",
                f"{a['roofline_tokens_per_s_bf16']:,.0f}"])]
            for a in results["arithmetic"]]


def decoding_rows(results: dict[str, Any]) -> list[list[Any]]:
    return [[d["model"], d["method"], d["batch"],
             *(_failed(d, 3) if "error" in d else
               [f"{d['sentences_per_s']:,.0f}", f"{d['tokens_per_s']:,.0f}",
                f"{d['mean_output_tokens']:.1f}"]),
             f"{d['peak_memory_mib']:,.0f}"] for d in results["decoding"]]


def agreement_lines(results: dict[str, Any]) -> list[str]:
    """How many best hypotheses the device's decoding changed against the CPU's."""
    if not results["agreement"]:
        return []
    lines = ["", "## Same hypotheses as on the CPU?", "",
             "The default model's seeded weights, every fourth test sentence, decoded on the CPU "
             "and on the device (an untrained model: flat word distributions, so near-ties are "
             "more frequent than in a trained one):", ""]
    for method, d in results["agreement"].items():
        lines.append(f"- {method}: {d['differing']} of {d['sentences']} best hypotheses differ; "
                     f"identical ones agree in score within {d['max_score_diff_identical']:.1e} "
                     f"and in attention within {d['max_attention_diff_identical']:.1e}.")
    return lines


def header_lines(results: dict[str, Any]) -> list[str]:
    m, plan = results["machine"], results["plan"]
    where = (f"{m['gpu']} ({m['gpu_memory_gib']} GiB, {m['multiprocessors']} SMs), CUDA "
             f"{m['cuda']}" if "gpu" in m else f"{m['device']} ({m['threads']} threads)")
    return ["# Device benchmark" + (" (GPU)" if "gpu" in m else f" ({m['device']})"), "",
            f"Device: {where}; torch {m['torch']}, Lightning {m['lightning']}. Command: "
            f"`{m.get('command', 'python -m rnnsearch.bench')}` ({m['date']}, "
            f"{m.get('bench_seconds', '?')} s).", "",
            "Training runs the train stage's Trainer (make_trainer: deterministic, gradient "
            f"clipping) on synthetic pairs shaped like the default Hansard sample: "
            f"{plan['warmup_steps']} warm-up steps, then {plan['steps']} timed ones, wall clock. "
            f"Decoding: {7 * plan['per_bucket']:,} synthetic sentences stratified like the "
            "default test set (1-80 words), outputs one token longer than the source. See "
            "`rnnsearch/bench/device.py` for why these stand for the real ones."]


def markdown_report(results: dict[str, Any]) -> str:
    """The whole report: device, targets, training, arithmetic, decoding, agreement."""
    card = results["card"]
    lines = header_lines(results) + ["", "## Targets", ""]
    lines += markdown_table(["target", "required", "measured", "met"], target_rows(results))
    lines += ["", "## Training (target tokens/s)", ""]
    lines += markdown_table(["model", "batch", "precision", "CUDA graphs", "tokens/s",
                             "ms/step", "shapes captured (time left out)",
                             "achieved TFLOP/s", "of the card's GEMM peak",
                             "of the model's GEMM roofline", "peak memory MiB"],
                            training_rows(results))
    lines += profile_lines(results)
    lines += ["", "## Arithmetic", "",
              f"The card's GEMM rate ({results['plan']['gemm_size']}^3 product): fp32 "
              f"{card['tflops_fp32']:,.1f} TFLOP/s, bf16 {card['tflops_bf16']:,.1f} TFLOP/s. "
              "Roofline: the tokens/s if a step were nothing but the model's own products at "
              "the rates measured for their shapes.", ""]
    lines += markdown_table(["model", "batch", "MFLOP/token (fwd+bwd)", "GEMM GFLOP/s fp32",
                             "roofline tokens/s fp32", "GEMM GFLOP/s bf16",
                             "roofline tokens/s bf16"], arithmetic_rows(results))
    lines += ["", "## Decoding", ""]
    lines += markdown_table(["model", "method", "batch", "sentences/s", "output tokens/s",
                             "mean output tokens", "peak memory MiB"], decoding_rows(results))
    best = [f"{d['model']} {d['method']}: batch {d['batch']}" for d in results["best_decoding"]]
    lines += ["", "Fastest decode batch (the candidate for `translate.batch_size_cuda`): "
              + "; ".join(best) + "."]
    lines += agreement_lines(results)
    lines += ["", "Bench time by model: " + ", ".join(
        f"{name} {seconds:.0f} s" for name, seconds in results["seconds"].items()) + "."]
    return "\n".join(lines) + "\n"
