"""The bench's results as one Markdown report (:class:`rnnsearch.reporting.tables.Table`)."""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from rnnsearch.reporting.tables import Table

def table(title: str, header: Sequence[str], rows: Iterable[Sequence[Any]],
          *notes: str) -> list[str]:
    return ["", Table(title, tuple(header), tuple(tuple(map(str, r)) for r in rows),
                      notes).markdown().rstrip("\n")]


def _best(rows: list[dict[str, Any]], key: str, **match: Any) -> dict[str, Any] | None:
    fits = [r for r in rows if key in r and all(r.get(k) == v for k, v in match.items())]
    return max(fits, key=lambda r: r[key]) if fits else None


def _failed(row: dict[str, Any], columns: int) -> list[str]:
    return [f"failed: {row['error']}", *[""] * (columns - 1)]


def training_rows(results: dict[str, Any]) -> list[list[Any]]:
    """Per run: speed, achieved GFLOP/s, its share of the device's GEMM peak and (CPU) roofline."""
    arithmetic = {(a["model"], a["batch"]): a for a in results["arithmetic"] if "error" not in a}
    flops = {model: a["mflop_per_token"] * 1e6 for (model, _), a in arithmetic.items()}
    rows = []
    for r in results["training"]:
        matmul = f" ({r['matmul_precision']} matmul)" if "matmul_precision" in r else ""
        head = [r["model"], r["batch"], r["precision"] + matmul,
                "yes" if r.get("cuda_graphs") else "no"]
        if "tokens_per_s" not in r:
            rows.append(head + _failed(r, 6) + [f"{r['peak_memory_mib']:,.0f}"])
            continue
        kind = "bf16" if r["precision"].startswith("bf16") else "fp32"
        bound = arithmetic.get((r["model"], r["batch"]), {}).get(f"roofline_tokens_per_s_{kind}")
        captured = (f"{r['cuda_graph_shapes']} in {r['cuda_graph_capture_seconds']:.1f} s"
                    if "cuda_graph_shapes" in r else "-")
        if r.get("cuda_graph_error"):
            captured += f" (capture failed, eager after: {r['cuda_graph_error'][:80]})"
        rate = ["-", "-"]
        if r["model"] in flops:
            achieved = r["tokens_per_s"] * flops[r["model"]] / 1e9
            rate = [f"{achieved:,.1f}", f"{achieved / 1e3 / results['card'][f'tflops_{kind}']:.1%}"]
        mark = " (noisy)" if r["model"] in results.get("noisy", {}) else ""
        rows.append(head + [f"{r['tokens_per_s']:,.0f}{mark}", f"{r['ms_per_step']:.1f}", captured,
                            *rate, roofline_share(r["tokens_per_s"], bound),
                            f"{r['peak_memory_mib']:,.0f}"])
    return rows


def roofline_share(tokens_per_s: float, bound: float | None) -> str:
    """A training row's share of its GEMM roofline; above 100% (unreachable: a wrong FLOP count or
    peak rate) it is refused, not shown, on any device."""
    if not bound:
        return "-"
    share = tokens_per_s / bound
    return f"{share:.0%}" if share <= 1 else f"refused: {share:.0%} is above the roofline"


def _profile_row(p: dict[str, Any], *head: Any) -> list[Any]:
    if "error" in p:
        return [*head, *_failed(p, 6)]
    idle, busy = p["gpu_idle_share"], f"{p['gpu_busy_ms_per_step']:,.1f}"
    top = (p["top_kernels_ms"] and "; ".join(f"{k['name']} {k['ms']:.2f}" for k in
                                              p["top_kernels_ms"][:3])) or "; ".join(
        f"{name} {c['ms']:.1f}" for name, c in list(p["categories"].items())[:3])
    phases = ", ".join(f"{name} {ms:.0f}" for name, ms in p["phases_ms"].items()) or "-"
    return [*head, f"{p['wall_ms_per_step']:,.1f}", phases, f"{p['kernels_per_step']:,.0f}",
            busy, "-" if idle is None else f"{idle:.0%}", top]


def _categories(title: str, p: dict[str, Any] | None) -> list[str]:
    """One profile's host time by operator category, each with its largest operators."""
    if not p or "error" in p:
        return []
    return table(title, ["category", "ms", "share", "largest operators (ms)"],
                 [[name, f"{c['ms']:.1f}", f"{c['share']:.0%}", ", ".join(
                     f"{op.removeprefix('aten::')} {ms:.1f}" for op, ms in c["top"])]
                  for name, c in p["categories"].items()])


PROFILE = ["wall ms", "phases (ms)", "kernels", "GPU busy ms", "GPU idle", "top kernels, or "
           "categories (ms)"]


def profile_lines(results: dict[str, Any]) -> list[str]:
    """The profiler's accounts of training steps and decoding batches (torch.profiler)."""
    training, decoding = results.get("profile", []), results.get("profile_decoding", [])
    lines = table("Where a training step's time goes (torch.profiler)",
                  ["model", "batch", "padded src x tgt", "CUDA graphs", *PROFILE],
                  [_profile_row(p, p["model"], p["batch"], f"{p['src_len']} x {p['tgt_len']}",
                                "yes" if p["cuda_graphs"] else "no") for p in training],
                  "A bucketed batch of median length, the train stage's step, per step after "
                  "one untimed step. A GPU idle most of the step waits for the host to launch "
                  "kernels (launch-bound).") if training else []
    if decoding:
        lines += table("Where a decoding batch's time goes (torch.profiler)",
                       ["model", "method", "sentences", *PROFILE],
                       [_profile_row(p, p["model"], p["method"], p["sentences"])
                        for p in decoding], "One batch of the largest decode batch size.")
    lines += _categories("default: a training step by operator category", _best(
        training, "wall_ms_per_step", model="default", cuda_graphs=False))
    return lines + _categories("default, beam 5: a batch by operator category", _best(
        decoding, "wall_ms_per_step", method="beam5", model="default"))


def _arithmetic_row(a: dict[str, Any]) -> list[Any]:
    if "error" in a:
        return [a["model"], a["batch"], *_failed(a, 5)]
    fp32 = " / ".join(f"{a[k]:,.0f}" for k in ("gemm_gflops_fp32_before", "gemm_gflops_fp32")
                      if k in a)
    roofline = [f"{a[k]:,.0f}" if k in a else "-" for k in ("roofline_tokens_per_s_fp32",
                                                          "roofline_tokens_per_s_bf16")]
    return [a["model"], a["batch"], f"{a['mflop_per_token']:.1f}", fp32, roofline[0],
            f"{a['gemm_gflops_bf16']:,.0f}", roofline[1]]


def _decoding_row(d: dict[str, Any]) -> list[Any]:
    bound = d.get("roofline_sentences_per_s_fp32")
    counted = ([f"{d['mflop_per_sentence']:,.1f}", "-" if not bound else
                f"{d['sentences_per_s'] / bound:.0%}"] if "mflop_per_sentence" in d
               else [f"failed: {d['arithmetic_error']}", "-"] if "arithmetic_error" in d
               else ["-", "-"])
    return [d["model"], d["method"], d["batch"], *(_failed(d, 5) if "error" in d else [
        f"{d['sentences_per_s']:,.0f}", f"{d['tokens_per_s']:,.0f}",
        f"{d['mean_output_tokens']:.1f}", *counted]), f"{d['peak_memory_mib']:,.0f}"]


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


def markdown_report(results: dict[str, Any]) -> str:
    """The whole report."""
    m, plan, card, decoding = (results[k] for k in ("machine", "plan", "card", "decoding"))
    where = (f"{m['gpu']} ({m['gpu_memory_gib']} GiB, {m['multiprocessors']} SMs), CUDA "
             f"{m['cuda']}" if "gpu" in m else
             f"{m.get('cpu', 'CPU')}, {m.get('cores', '?')} cores ({m.get('cpu_capability', '?')})")
    lines = [f"# Benchmark ({'GPU' if 'gpu' in m else m['device']})", "",
             f"Device: {where}; torch {m['torch']}, Lightning {m['lightning']}, {m['threads']} "
             f"threads. Command: `{m.get('command', 'python -m rnnsearch.bench')}` ({m['date']}, "
             f"{m.get('bench_seconds', '?')} s). Load average (1, 5, 15 min): "
             f"{m.get('load_average_before')} at the start, {m.get('load_average_after')} at the "
             "end.", "", "Training runs the train stage's Trainer on synthetic pairs shaped like "
             f"the default Hansard sample: {plan['warmup_steps']} warm-up steps, then "
             f"{plan['steps']} timed ones, wall clock. Decoding: {7 * plan['per_bucket']:,} "
             "synthetic sentences stratified like the default test set (1-80 words), outputs "
             "one token longer than the source (`rnnsearch/bench/data.py` says why these stand "
             "for the real ones)."]
    lines += noisy_lines(results) + against_lines(results)
    lines += table("Training (target tokens/s)", [
        "model", "batch", "precision", "CUDA graphs", "tokens/s", "ms/step",
        "shapes captured (time left out)", "achieved GFLOP/s", "of the device's GEMM peak",
        "of the model's GEMM roofline", "peak memory MiB"], training_rows(results),
        "Padding of the bucketed batches: " + ", ".join(
            f"{name} {p:.1%}" for name, p in results["padding"].items()) + ".")
    lines += profile_lines(results)
    lines += table("Arithmetic", ["model", "batch", "MFLOP/token (fwd+bwd)",
                                  "GEMM GFLOP/s fp32 (before training / after)",
                                  "roofline tokens/s fp32", "GEMM GFLOP/s bf16",
                                  "roofline tokens/s bf16"],
                   map(_arithmetic_row, results["arithmetic"]),
                   f"The device's GEMM rate (a {plan['gemm_size']}^3 product): fp32 "
                   f"{card['tflops_fp32']:,.2f} TFLOP/s, bf16 {card['tflops_bf16']:,.2f} TFLOP/s. "
                   "FLOPs counted by torch (FlopCounterMode) on the train stage's step over a "
                   "bucketed batch of median length. Roofline (a CPU's only): the tokens/s if a "
                   "step were nothing but the matrix products torch recorded in it, at the rates "
                   "measured for their shapes; a GPU runs such small products alone bound by "
                   "their launches, so there it would be no bound.")
    fastest = [_best(decoding, "sentences_per_s", model=m, method=k) for m, k in dict.fromkeys(
        (d["model"], d["method"]) for d in decoding if "sentences_per_s" in d)]
    lines += table("Decoding", ["model", "method", "batch", "sentences/s", "output tokens/s",
                                "mean output tokens", "MFLOP/sentence",
                                "of the products' roofline (fp32)", "peak memory MiB"],
                   map(_decoding_row, results["decoding"]),
                   "Fastest decode batch (on a GPU the candidate for `translate.batch_size_cuda`): "
                   + "; ".join(f"{d['model']} {d['method']}: batch {d['batch']}" for d in fastest)
                   + ". FLOPs counted by torch over the whole decoding at the largest batch "
                   "(FlopCounterMode); the roofline, as for training, is the time its matrix "
                   "products alone take at this machine's rates for their shapes (CPU only).")
    return "\n".join(lines + ["", "Bench time by part: " + ", ".join(
        f"{name} {s:.0f} s" for name, s in results["seconds"].items()) + "."]) + "\n"
