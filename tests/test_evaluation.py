"""Evaluation: subsets, bucket BLEU against sacrebleu, paired bootstrap, the evaluate stage."""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from sacrebleu.metrics import BLEU

from conftest import run_script
from rnnsearch.config.evaluate import EvaluateConfig
from rnnsearch.data.clean import sentence_length, stratified_indices
from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.evaluation.cell import TestSet as Sentences, compare_systems
from rnnsearch.evaluation.scores import corpus_scores, paired_bootstrap
from rnnsearch.evaluation.subsets import (derived_edges, filled_buckets, length_buckets,
                                          no_unk_indices)

REFS = ["the cat sat on the mat.", "a dog barked at the postman this morning", "hello!",
        "the weather is nice today and the sun is shining over the hills", "I see.",
        "it is what it is", "we will meet again tomorrow at noon near the station"]
GOOD = ["the cat sat on a mat.", "a dog barked at the postman this morning", "hello!",
        "the weather is nice today and the sun shines over the hills", "I see.",
        "it is what it is", "we meet again tomorrow at noon by the station"]
BAD = ["a cat", "dog", "hi", "weather nice", "see", "it is", "we meet"]


def test_no_unk_subset_hand_made():
    src_vocab = Vocabulary(SPECIALS + ("the", "cat", "sat", "."), (0,) * 8)
    tgt_vocab = Vocabulary(SPECIALS + ("le", "chat", "assis", "."), (0,) * 8)
    src = ["the cat sat .", "the dog sat .", "the cat .", "", "cat"]
    tgt = ["le chat assis .", "le chien assis .", "le chat", "", "chat noir"]
    # 1: unknown source word; 4: unknown target word; the empty pair has no unknown word
    assert no_unk_indices(src, tgt, src_vocab, tgt_vocab) == [0, 2, 3]


def test_length_buckets():
    lengths = [0, 3, 10, 11, 25, 60, 61, 200]
    buckets = length_buckets(lengths, [10, 20, 60])
    assert [b.label for b in buckets] == ["0-10", "10-20", "20-60", "60+"]
    assert [b.indices for b in buckets] == [(0, 1, 2), (3,), (4, 5), (6, 7)]
    assert [b.step for b in buckets] == [10, 20, 60, 100]


def test_bucket_bleu_equals_sacrebleu_on_the_subset():
    subset = [0, 3, 6]
    ours = corpus_scores(GOOD, REFS, subset)
    theirs = BLEU().corpus_score([GOOD[i] for i in subset], [[REFS[i] for i in subset]])
    assert ours["bleu"] == round(theirs.score, 2) and ours["n"] == 3
    assert ours["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert corpus_scores(GOOD, REFS, [])["bleu"] is None


def test_paired_bootstrap_is_deterministic_and_significant():
    first = paired_bootstrap(GOOD * 5, BAD * 5, REFS * 5, samples=200, seed=1)
    again = paired_bootstrap(GOOD * 5, BAD * 5, REFS * 5, samples=200, seed=1)
    assert first == again and first["p_value"] < 0.05
    assert "bs:200" in first["signature"]
    close = GOOD[:-1] + BAD[-1:]         # one sentence worse: no significant difference
    assert paired_bootstrap(GOOD, close, REFS, samples=200, seed=1)["p_value"] > 0.05


def sacrebleu_cli_p_value(folder: Path, refs: list[str], baseline: list[str],
                          system: list[str], samples: int, seed: int) -> float:
    """The p-value sacreBLEU's own command line prints for ``system`` against ``baseline``
    (``--paired-bs``, text output; the first ``-i`` file is the baseline)."""
    for name, lines in (("refs", refs), ("baseline", baseline), ("system", system)):
        (folder / name).write_text("\n".join(lines) + "\n")
    done = subprocess.run([str(Path(sys.executable).parent / "sacrebleu"), "refs", "-i",
                           "baseline", "system", "--paired-bs", "--paired-bs-n", str(samples),
                           "-m", "bleu", "-f", "text"], cwd=folder, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "SACREBLEU_SEED": str(seed)})
    assert done.returncode == 0, done.stderr
    return float(re.search(r"\(p = ([0-9.]+)\)", done.stdout).group(1))


def test_no_unk_bootstrap_is_sacrebleus_paired_bootstrap_within_the_subset(tmp_path):
    """Table 1's No UNK p-value resamples the no-UNK sentences only: the same p as sacreBLEU's
    command line run on those sentences' files."""
    refs, system = REFS * 3, GOOD * 3
    baseline = GOOD[:-1] + BAD[-1:] + GOOD[:3] + BAD[3:4] + GOOD[4:] + GOOD
    no_unk = [i for i in range(len(refs)) if i % 2 == 0]
    test = Sentences(refs, no_unk, length_buckets([len(r.split()) for r in refs], [10]))
    cfg = EvaluateConfig(bootstrap_samples=200, bootstrap_seed=7)
    ours = compare_systems(system, baseline, "encdec-50", test, cfg)
    theirs = sacrebleu_cli_p_value(tmp_path, [refs[i] for i in no_unk],
                                   [baseline[i] for i in no_unk], [system[i] for i in no_unk],
                                   samples=200, seed=7)
    assert ours["no_unk"]["n"] == len(no_unk) and ours["no_unk"]["p_value"] == theirs
    assert 0.05 < theirs < 1         # a case where the resampling decides, not 1 / (n + 1)
    everything = sacrebleu_cli_p_value(tmp_path, refs, baseline, system, samples=200, seed=7)
    assert ours["all"]["p_value"] == everything


def test_evaluate_scores_the_length_buckets_prepare_drew(tmp_path):
    """One length definition: the test split's buckets, drawn by prepare from the untokenised
    source's white-space words, are the buckets BLEU by length scores, sentence for sentence,
    though Moses splits punctuation and clitics off (more tokens than words)."""
    words = ["Yes, it's here.", "No.", "Well, we'll see, won't we?", "I agree, sir.",
             "The House adjourned at six o'clock.", "Hear, hear!", "Order, please.",
             "The member's question, Mr. Speaker, is fair."]
    tokens = [re.sub(r"([,.!?])", r" \1", re.sub(r"'", " '", line)) for line in words]
    edges = [2, 4, 8]
    lengths = [sentence_length(line) for line in words]
    chosen, per_bucket = stratified_indices(lengths, edges, per_bucket=2, seed=3)
    for folder, lines in (("prepared", words), ("tokenized", tokens)):
        (tmp_path / folder).mkdir()
        for side in ("src", "tgt"):
            (tmp_path / folder / f"test.{side}").write_text("".join(lines[i] + "\n" for i in chosen))
    for side in ("src", "tgt"):
        Vocabulary(SPECIALS, (0,) * 4).save(tmp_path / "tokenized" / f"vocab.{side}.txt")
    test = Sentences.load(tmp_path / "prepared", tmp_path / "tokenized", edges)
    assert [len(b.indices) for b in test.buckets] == per_bucket + [0] == [2, 2, 2, 0]
    by_tokens = length_buckets([len(tokens[i].split()) for i in chosen], edges)
    assert [len(b.indices) for b in by_tokens] != per_bucket + [0]    # what Moses tokens give


def _workspace(root: Path) -> Path:
    (root / "data/prepared").mkdir(parents=True)
    (root / "data/prepared/test.tgt").write_text("\n".join(REFS) + "\n")
    (root / "data/prepared/test.src").write_text("\n".join(REFS) + "\n")
    tok = root / "data/tokenized"
    tok.mkdir(parents=True)
    (tok / "test.src").write_text("\n".join(r.replace(".", " .") for r in REFS) + "\n")
    (tok / "test.tgt").write_text("\n".join(r.replace(".", " .") for r in REFS) + "\n")
    (tok / "train.tgt").write_text("\n".join(r.replace(".", " .") for r in REFS[:4]) + "\n")
    vocab = Vocabulary(SPECIALS + tuple(sorted({w for r in REFS[:4] for w in r.replace(".", " .").split()})),
                       (0,) * 4 + (1,) * len({w for r in REFS[:4] for w in r.replace(".", " .").split()}))
    vocab.save(tok / "vocab.src.txt")
    vocab.save(tok / "vocab.tgt.txt")
    for cell, hyps, attention in (("search-50", GOOD, True), ("encdec-50", BAD, False)):
        folder = root / "data/translations" / cell
        folder.mkdir(parents=True)
        systems = ["greedy", "beam"] + (["beam_unk"] if attention else [])
        for system in systems:
            (folder / f"{system}.detok.txt").write_text("\n".join(hyps) + "\n")
            (folder / f"{system}.tok.txt").write_text("\n".join(h.replace(".", " .") for h in hyps)
                                                    + "\n")
        speed = {"greedy": {"sentences_per_s": 100.0, "batch_size": 64, "sentences": 7,
                            "seconds": 0.07}}
        (folder / "meta.json").write_text(json.dumps({
            "cell": cell, "model": {"model": cell.split("-")[0]}, "has_attention": attention,
            "sentences": 7, "systems": systems, "speed": speed}))
    params = (Path(__file__).resolve().parents[1] / "params.yaml").read_text()
    (root / "params.yaml").write_text(params.replace("bootstrap_samples: 1000", "bootstrap_samples: 100"))
    return root


def test_evaluate_stage(tmp_path):
    root = _workspace(tmp_path)
    stale = root / "metrics/eval/search-30.json"     # an earlier grid's cell
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("{}")
    done = run_script("evaluate.py", "--cells", "encdec-50", "search-50", cwd=root)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (root / "metrics/eval").iterdir()) == ["encdec-50.json",
                                                                        "search-50.json"]
    beam = next(l for l in done.stdout.splitlines() if l.startswith("evaluate search-50 beam:"))
    for part in ("on all", "with no unknown word", "with <unk> deleted", "vs encdec-50"):
        assert part in beam, beam         # the no-UNK subset and the <unk>-deleted output apart
    search = json.loads((root / "metrics/eval/search-50.json").read_text())
    encdec = json.loads((root / "metrics/eval/encdec-50.json").read_text())
    assert set(search["systems"]) == {"greedy", "beam", "beam_unk"}
    assert search["no_unk_sentences"] == 4 and search["systems"]["beam"]["no_unk"]["n"] == 4
    assert search["systems"]["beam"]["all"]["bleu"] == corpus_scores(GOOD, REFS)["bleu"]
    assert search["systems"]["beam"]["unk_removed"]["n"] == len(REFS)
    vs = search["systems"]["beam_unk"]["vs_baseline"]
    assert vs["baseline"] == "encdec-50" and vs["all"]["p_value"] < 0.05
    assert vs["no_unk"]["n"] == 4 and vs["no_unk"]["p_value"] is not None
    assert "(no unknown word: " in beam
    assert "vs_baseline" not in encdec["systems"]["beam"]
    assert search["speed"]["greedy"]["sentences_per_s"] == 100.0
    by_length = search["systems"]["beam"]["by_length"]
    assert [k for k in by_length if k != "signature"] == ["0-10", "10-20", "20-30", "30-40",
                                                          "40-50", "50-60", "60+"]
    assert by_length["0-10"]["bleu"] == corpus_scores(GOOD, REFS, [0, 1, 2, 4, 5, 6])["bleu"]
    assert by_length["10-20"]["n"] == 1               # 14 words
    # no bucket holds evaluate.min_bucket_sentences (30) of the 7 sentences: Figure 2 has no
    # point, and neither has the DVC plot (it would draw what the report leaves out)
    assert not (root / "plots/bleu_by_length/search-50.csv").exists()


def test_remove_unk_deletes_the_unknown_token_and_keeps_punctuation():
    from rnnsearch.evaluation.cell import remove_unk

    assert remove_unk(["le <unk> chat", "<unk>", "il dit <unk>, puis <unk>.", ""]) == \
        ["le chat", "", "il dit , puis .", ""]


def test_a_length_bucket_below_the_minimum_gets_no_p_value():
    """Was: p = 0.001 printed for a bucket of one sentence. Buckets (0, 5] and (5, 10] hold
    3 sentences of REFS each, the open one 1: with a minimum of 3 the open one is not tested."""
    test = Sentences(REFS, [], length_buckets([len(r.split()) for r in REFS], [5, 10]))
    cfg = EvaluateConfig(bootstrap_samples=50, min_bucket_sentences=3)
    by_length = compare_systems(GOOD, BAD, "encdec-50", test, cfg)["by_length"]
    assert [len(b.indices) for b in test.buckets] == [3, 3, 1]
    assert None not in (by_length["0-5"], by_length["5-10"]) and by_length["10+"] is None
    every = compare_systems(GOOD, BAD, "encdec-50", test, EvaluateConfig(bootstrap_samples=50,
                                                                         min_bucket_sentences=1))
    assert None not in every["by_length"].values()


HANSARD_EDGES = (10, 20, 30, 40, 50, 60)     # params.yaml's evaluate.buckets
# A user's corpus of 1-15 words: 4,054 of its 4,076 test sentences in the bucket 0-10.
SHORT = [n for n, count in {1: 150, 2: 300, 3: 450, 4: 550, 5: 600, 6: 600, 7: 520, 8: 400,
                            9: 284, 10: 200, 11: 8, 12: 6, 13: 4, 14: 2, 15: 2}.items()
         for _ in range(count)]


def test_the_configured_buckets_stay_when_they_fit():
    """The default Hansard test set (300 sentences in each of the 7 buckets) keeps its buckets,
    and so does a test set too small for any bucket of 30 (derived ones would fill none)."""
    hansard = [n for n in (5, 15, 25, 35, 45, 55, 70) for _ in range(300)]
    assert filled_buckets(hansard, HANSARD_EDGES, 30) == 7
    assert derived_edges(hansard, HANSARD_EDGES, 30) is None
    assert derived_edges([6, 8, 1, 13, 2, 5, 10], HANSARD_EDGES, 30) is None


def test_a_short_corpus_gets_buckets_at_the_quantiles_of_its_lengths():
    """Was: one bucket (0-10) of 4,054 sentences, so Figure 2 had one point. Quantiles k/5 of
    the lengths fall at 3 (cumulative 900 >= 816), 5 (2,050 >= 1,631), 6 and 8 words."""
    assert len(SHORT) == 4076 and filled_buckets(SHORT, HANSARD_EDGES, 30) == 1
    edges = derived_edges(SHORT, HANSARD_EDGES, 30)
    assert edges == (3, 5, 6, 8) and all(isinstance(edge, int) for edge in edges)
    assert [(b.label, len(b.indices)) for b in length_buckets(SHORT, edges)] == [
        ("0-3", 900), ("3-5", 1150), ("5-6", 600), ("6-8", 920), ("8+", 506)]


def test_derived_buckets_each_hold_the_minimum():
    """A bucket below evaluate.min_bucket_sentences is merged into its smaller neighbour:
    lengths 1 2 5 6 8 10 13 cut at 2, 5, 8, 10 give 2 1 2 1 1 sentences; with 2 at least,
    0-2 and 2-5 merge, then 8-10 and 10+."""
    lengths = [6, 8, 1, 13, 2, 5, 10]
    assert derived_edges(lengths, HANSARD_EDGES, 2) == (5, 8)
    assert derived_edges([5] * 100, [3, 4], 30) is None             # one length: no edge helps


def test_evaluate_says_which_buckets_it_derived(tmp_path):
    """The stage derives the buckets once for every cell, says so in one line naming
    evaluate.buckets, and its metrics and plot tables hold the buckets used."""
    root = _workspace(tmp_path)
    params = root / "params.yaml"
    params.write_text(params.read_text().replace("min_bucket_sentences: 30",
                                                 "min_bucket_sentences: 2"))
    done = run_script("evaluate.py", "--cells", "encdec-50", "search-50", cwd=root)
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if "evaluate.buckets" in line]
    assert len(said) == 1 and "[10, 20, 30, 40, 50, 60]" in said[0], done.stdout
    assert "1-5 (3), 6-8 (2), 9+ (2)" in said[0] and "edges [5, 8]" in said[0], said[0]
    for cell in ("encdec-50", "search-50"):
        metrics = json.loads((root / f"metrics/eval/{cell}.json").read_text())
        by_length = metrics["systems"]["beam"]["by_length"]
        assert [(k, v["n"], v["step"]) for k, v in by_length.items() if k != "signature"] == \
            [("0-5", 3, 5), ("5-8", 2, 8), ("8+", 2, 11)]
        rows = list(csv.DictReader((root / f"plots/bleu_by_length/{cell}.csv").open()))
        assert [r["bucket"] for r in rows] == ["1-5", "6-8", "9+"]     # in source words
        assert [float(r["beam"]) for r in rows] == [by_length[k]["bleu"] for k in ("0-5", "5-8",
                                                                                   "8+")]


def test_a_bucket_is_shown_in_the_source_words_it_holds():
    """A bucket's metrics key names its edges (``0-10``: above 0, up to 10 words); the reports,
    Figure 2's ticks and the DVC plot show the words it holds."""
    from rnnsearch.reporting.tables import bucket_words

    assert [bucket_words(k) for k in ("0-10", "10-20", "60+", "4-5", "0-4", "signature")] == \
        ["1-10", "11-20", "61+", "5", "1-4", "signature"]
