"""The benchmark's results as a Markdown report (also printed to the terminal)."""
from __future__ import annotations

from typing import Any

JOEY = {"train": 1670, "greedy": 244, "beam": 77}  # Joey NMT 2.3.0 on these machines (design.md)


def markdown_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table's lines: the header, the separator, one line per row."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def _training_rows(models: dict[str, Any]) -> list[list[Any]]:
    return [[name, f"{m['tokens_per_s']:,.0f}", f"{m['mflop_per_token']:.1f}",
             _gemm_rates(m), f"{m['roofline_tokens_per_s_fp32']:,.0f}",
             f"{m['roofline_fraction_fp32']:.0%}", f"{m['roofline_tokens_per_s_bf16']:,.0f}",
             f"{m['padding_fraction']:.1%}", f"{m['peak_rss_mb_training']:,.0f}"]
            for name, m in models.items()]


def _gemm_rates(m: dict[str, Any]) -> str:
    """The fp32 GEMM rate before and after the model's training windows (after only, in a
    report from before both were measured)."""
    after = f"{m['gemm_gflops_fp32']:.0f}"
    before = m.get("gemm_gflops_fp32_before")
    return after if before is None else f"{before:.0f} / {after}"


def _load_line(m: dict[str, Any]) -> list[str]:
    """The machine's load average around the run, where recorded."""
    if m.get("load_average_before") is None:
        return []
    return [f"Load average (1, 5, 15 min): {m['load_average_before']} at the start, "
            f"{m.get('load_average_after')} at the end; a run whose GEMM rate moved by more "
            "than 20% or whose training exceeded its roofline is refused.", ""]


def _decoding_rows(decoding: dict[str, Any]) -> list[list[Any]]:
    return [[method, f"{d['batched_sent_per_s']:,.1f}", f"{d['single_sent_per_s']:,.1f}",
             f"{d['batching_speedup']:.1f}x", f"{d['mean_output_tokens']:.1f}"]
            for method, d in ((m, decoding[m]) for m in ("greedy", "beam5"))]


def _check(measured: float, required: float, higher_is_better: bool = True) -> str:
    ok = measured >= required if higher_is_better else measured <= required
    return "yes" if ok else "**no**"


def target_rows(results: dict[str, Any]) -> list[list[Any]]:
    """Each target of the speed issue: required, measured, met."""
    ref = results["models"]["search"]
    dec = ref["decoding"]
    rows = [
        ["training vs fp32 GEMM roofline", ">= 80%", f"{ref['roofline_fraction_fp32']:.0%}",
         _check(ref["roofline_fraction_fp32"], 0.8)],
        ["training tokens/s (1.5x Joey NMT)", f">= {1.5 * JOEY['train']:,.0f}",
         f"{ref['tokens_per_s']:,.0f}", _check(ref["tokens_per_s"], 1.5 * JOEY["train"])],
        ["greedy sentences/s (1.5x Joey NMT)", f">= {1.5 * JOEY['greedy']:.0f}",
         f"{dec['greedy']['batched_sent_per_s']:.0f}",
         _check(dec["greedy"]["batched_sent_per_s"], 1.5 * JOEY["greedy"])],
        ["beam 5 sentences/s (1.5x Joey NMT)", f">= {1.5 * JOEY['beam']:.0f}",
         f"{dec['beam5']['batched_sent_per_s']:.0f}",
         _check(dec["beam5"]["batched_sent_per_s"], 1.5 * JOEY["beam"])],
        ["bucketed batch padding", "<= 10%", f"{ref['padding_fraction']:.1%}",
         _check(ref["padding_fraction"], 0.10, higher_is_better=False)],
        ["batched vs one-at-a-time beam 5", ">= 10x", f"{dec['beam5']['batching_speedup']:.1f}x",
         _check(dec["beam5"]["batching_speedup"], 10)],
    ]
    if "tokenize" in results:
        seconds = results["tokenize"]["seconds"]
        rows.append(["tokenising the 1M-pair Hansard train split", "< 180 s", f"{seconds:.0f} s",
                     _check(seconds, 180, higher_is_better=False)])
    return rows


def _rate(count: float, seconds: float) -> str:
    """``count`` per second, or a dash when no time was measured."""
    return f"{count / seconds:,.0f}" if seconds else "-"


def _subword_rows(units: str, sub: dict[str, Any]) -> list[list[Any]]:
    """Learning and applying one subword model: seconds, speeds, peak memory."""
    model = (f"{sub['vocab_size']:,} pieces, {'joint' if sub['joint'] else 'per side'}, "
             f"character coverage {sub['character_coverage']}")
    return [[f"{units}: learning ({model}; {sub['learning_threads']} thread)",
             f"{sub['seconds_learning']:.1f}", _rate(sub["sentences"], sub["seconds_learning"]),
             _rate(sub["words"], sub["seconds_learning"]), f"{sub['peak_rss_mb_learning']:,.0f}"],
            [f"{units}: applying to both sides ({sub['applying_threads']} threads)",
             f"{sub['seconds_applying']:.1f}", _rate(sub["sentences"], sub["seconds_applying"]),
             _rate(sub["words"], sub["seconds_applying"]), f"{sub['peak_rss_mb']:,.0f}"]]


def tokenization_section(results: dict[str, Any]) -> list[str]:
    """Moses tokenisation of the Hansard train split and, where measured, learning and
    applying each subword model on its tokens (the tokenize stage's code and settings)."""
    if "tokenize" not in results:
        return []
    moses, models = results["tokenize"], results.get("subwords", {})
    sentences = 2 * moses["pairs"]
    rows = [[f"Moses tokenisation, en and fr ({moses['workers']} processes)",
             f"{moses['seconds']:.1f}", _rate(sentences, moses["seconds"]), "-", "-"]]
    for units, sub in models.items():
        rows += _subword_rows(units, sub)
    lines = ["", f"## Tokenisation and subword units (Hansard train split, {moses['pairs']:,} "
                 f"pairs)", ""]
    lines += markdown_table(["step", "seconds", "sentences/s", "words/s", "peak RSS MiB"], rows)
    if models:
        split = ", ".join(f"{units} {sub['pieces_per_word']:.2f}" for units, sub in models.items())
        lines += ["", f"Pieces per word: {split}. Each model is the subword preset's "
                      "(presets/subword.yaml), learnt by the tokenize stage's own code on both "
                      "sides' Moses tokens: every sentence (no sampling, "
                      "input_sentence_size=0), one thread, a fixed seed. Peak RSS is that of "
                      "the part's own process (the split's lines included), after learning "
                      "and after applying."]
    return lines


PROFILE_COLUMNS = ["category", "ms per step", "share", "largest operators (ms)"]


def _profile_rows(profile: dict[str, Any]) -> list[list[Any]]:
    """One row per category; reports made before the categories named their operators leave
    that column empty."""
    return [[name, f"{c['ms']:.1f}", f"{c['share']:.0%}",
             ", ".join(f"{op.removeprefix('aten::')} {ms:.1f}" for op, ms in c.get("top", []))]
            for name, c in profile["categories"].items()]


SIDE_BY_SIDE_ROWS = {"fp32": "fp32, Adam's per-parameter loop (the reference, the default run's)",
                     "bf16_autocast": "bf16 autocast (`train.trainer.precision: bf16-mixed`)",
                     "bf16_cross_entropy": "bf16 autocast, loss in bf16 "
                                           "(`train.trainer.bf16_cross_entropy: true`)",
                     "fused_adam": "fused Adam (`train.optim.fused: true`)",
                     "bf16_fused_adam": "bf16 autocast and fused Adam",
                     "bf16_cross_entropy_fused_adam": "bf16 autocast, loss in bf16, fused Adam",
                     "fused_loss": "fused output layer and loss (`train.trainer.fused_loss: true`)",
                     "fused_loss_fused_adam": "fused output layer and loss, fused Adam",
                     "bf16_fused_loss_fused_adam": "bf16 autocast, fused output layer and loss "
                                                   "(its log-softmax in fp32), fused Adam"}


def _side_by_side_section(ref: dict[str, Any]) -> list[str]:
    """The reference beside its variants, measured taking turns (``side_by_side``); the older
    results' single bf16 number otherwise."""
    side = ref.get("side_by_side")
    if side is None:
        if "bf16_autocast_tokens_per_s" not in ref:
            return []
        bf16 = ref["bf16_autocast_tokens_per_s"]
        return ["", f"bf16 autocast (`torch.autocast(\"cpu\", torch.bfloat16)`), search model: "
                    f"{bf16:,.0f} target tokens/s, {bf16 / ref['tokens_per_s']:.2f}x fp32 "
                    f"(native bf16 instructions: {'yes' if ref['bf16_native'] else 'no'})."]
    rounds = len(next(iter(side.values()))["windows"])
    rows = [[SIDE_BY_SIDE_ROWS.get(name, name), f"{row['tokens_per_s']:,.0f}",
             f"{row['speedup']:.2f}x"] for name, row in side.items()]
    return (["", "### Side by side (search model)", "",
             f"The reference beside the settings that change its arithmetic, one model each, "
             f"taking turns window by window ({rounds} rounds) so that a machine whose speed "
             f"drifts slows them alike; speed-up: the median of the per-round ratios to the "
             f"reference; each variant first trains once on the batches its windows take "
             f"(untimed), as a training run has met their shapes before. "
             f"Native bf16 instructions: {'yes' if ref['bf16_native'] else 'no'}. "
             "Fused Adam's weights differ from the loop's in the last float digits "
             "(docs/performance.md).", ""]
            + markdown_table(["training", "target tokens/s", "x reference"], rows)
            + _emulated_bf16_line(ref.get("bf16_emulated")))


def _emulated_bf16_line(emulated: dict[str, Any] | None) -> list[str]:
    """bf16 autocast's short look beside fp32 on a CPU without native bf16 instructions."""
    if emulated is None:
        return []
    return ["", "This CPU has no native bf16 instructions, so the bf16 variants are left out "
                "of the table: bf16 autocast, emulated, timed beside fp32 over a few steps, "
                f"trained {emulated['tokens_per_s']:,.0f} target tokens/s, "
                f"{emulated['speedup']:.2f}x fp32. Train in fp32 here."]


def _profile_section(ref: dict[str, Any]) -> list[str]:
    """torch.profiler self time by operator category: a training step and batched beam search."""
    training, beam = ref.get("profile"), ref["decoding"]["beam5"].get("profile")
    if not training or not beam:
        return []
    lines = ["", "## Where the time goes (torch.profiler, self time by operator category)", "",
             f"Training step of the reference model (mean of {training['repeats']} steps, on "
             f"batches it had trained on once; {training['ms_per_repeat']:.0f} ms per step; "
             f"phases: {_phases(training)}):", ""]
    lines += markdown_table(PROFILE_COLUMNS, _profile_rows(training))
    for variant in ("profile_fused", "profile_bf16"):
        lines += _variant_profile(ref.get(variant))
    lines += ["", f"Batched beam 5 over the test set (batches of 64, "
                  f"{beam['ms_per_repeat'] / 1e3:.1f} s):", ""]
    lines += markdown_table(["category", "ms", *PROFILE_COLUMNS[2:]], _profile_rows(beam))
    return lines


def _variant_profile(profile: dict[str, Any] | None) -> list[str]:
    """The profile of one of the fastest side-by-side variants: fp32's (benches from
    2026-12-03 on) and, where the CPU runs bf16 natively, bf16's."""
    if not profile:
        return []
    name = SIDE_BY_SIDE_ROWS.get(profile["variant"], profile["variant"])
    return ["", f"The same steps trained as \"{name}\" ({profile['ms_per_repeat']:.0f} ms per "
                f"step; phases: {_phases(profile)}):", "",
            *markdown_table(PROFILE_COLUMNS, _profile_rows(profile))]


def _phases(profile: dict[str, Any]) -> str:
    return ", ".join(f"{name} {ms:.0f} ms" for name, ms in profile["phases_ms"].items())


def _threads_section(rows: list[dict[str, Any]]) -> list[str]:
    """Training speed by thread count (``train.trainer.threads``), when measured."""
    if not rows:
        return []
    return ["", "## Threads (train.trainer.threads; 0 = torch's default, one per core)", "",
            *markdown_table(["threads", "search model, target tokens/s"],
                            [[r["threads"], f"{r['tokens_per_s']:,.0f}"] for r in rows]),
            "", "Measured alone on the machine. Beside other work (another stage, another "
                "user's training), one thread per process is faster than one per core: "
                "docs/performance.md."]


def allocator_section(side: dict[str, Any] | None) -> list[str]:
    """Training with freed memory kept (the pipeline's setting) against glibc's defaults."""
    if not side:
        return []
    rows = [[label, f"{side[name]['tokens_per_s']:,.0f}",
             f"{side[name]['page_faults_per_step']:,.0f}", f"{side[name]['peak_rss_mb']:,.0f}"]
            for name, label in (("kept", "freed memory kept for reuse (the pipeline's)"),
                                ("system", "glibc's defaults (RNNSEARCH_MALLOC=system)"))]
    return ["", "## Memory allocator (rnnsearch.allocator)", "",
            *markdown_table(["setting", "search model, target tokens/s (1 thread)",
                             "page faults per step", "peak RSS MiB"], rows),
            "", f"Both processes started at the same moment, one thread each: "
                f"{side['speedup']:.2f}x."]


def markdown_report(results: dict[str, Any]) -> str:
    """The whole report: machine, targets, training, decoding, scaling."""
    m = results["machine"]
    lines = ["# Benchmark", "",
             f"Machine: {m['cpu']}, {m['cores']} cores ({m['cpu_capability']}), torch {m['torch']}, "
             f"{m['threads']} threads, Python {m['python']}. Command: `{m['command']}` "
             f"({m['date']}, {m.get('bench_seconds', '?')} s).", "", *_load_line(m),
             "Reference configuration: GRU, vocabulary 8,000 per side, embedding = hidden = "
             "attention = output width 256, batch 64 sentences, fp32, real Multi30k de->en batches "
             "(bucketed, max length 50); throughput is the median of timed windows after warm-up.",
             "", "## Targets", ""]
    lines += markdown_table(["target", "required", "measured", "met"], target_rows(results))
    lines += tokenization_section(results)
    lines += ["", "## Training", ""]
    lines += markdown_table(["model", "target tokens/s", "MFLOP/token (fwd+bwd)",
                     "GEMM GFLOP/s fp32 (before / after training)",
                     "fp32 roofline tokens/s", "achieved/roofline", "bf16 roofline tokens/s",
                     "padding", "peak RSS MiB"], _training_rows(results["models"]))
    ref = results["models"]["search"]
    lines += _side_by_side_section(ref)
    lines += ["", f"## Decoding (search model, {ref['decoding']['test_sentences']} test sentences "
                  f"batched by 64; {ref['decoding']['single_sentences']} one at a time; peak RSS "
                  f"{ref['peak_rss_mb_decoding']:,.0f} MiB)", ""]
    lines += markdown_table(["method", "batched sentences/s", "one at a time", "speedup", "mean output tokens"],
                    _decoding_rows(ref["decoding"]))
    lines += _profile_section(ref)
    lines += _threads_section(results.get("threads", []))
    lines += allocator_section(results.get("allocator"))
    lines += ["", "## Scaling", ""]
    lines += markdown_table(["training pairs", "batches", "seconds per epoch"],
                    [[r["pairs"], r["batches"], f"{r['seconds']:.1f}"] for r in results["scaling"]["epochs"]])
    lines += [""]
    lines += markdown_table(["source = target length", "attention fwd+bwd ms (batch 64)", "us per (S x T) cell"],
                    [[r["length"], f"{r['seconds'] * 1e3:.1f}", f"{r['us_per_cell']:.2f}"]
                     for r in results["scaling"]["attention"]])
    if results.get("seconds"):
        lines += ["", "Bench time by part: " + ", ".join(
            f"{name} {seconds:.0f} s" for name, seconds in results["seconds"].items()) + "."]
    return "\n".join(lines) + "\n"
