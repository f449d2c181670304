"""Evaluation: subsets, bucket BLEU against sacrebleu, paired bootstrap, the evaluate stage."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from sacrebleu.metrics import BLEU

from conftest import run_script
from rnnsearch.data.vocab import SPECIALS, Vocabulary
from rnnsearch.evaluation import corpus_scores, length_buckets, no_unk_indices, paired_bootstrap

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


def _workspace(root: Path) -> Path:
    (root / "data/prepared").mkdir(parents=True)
    (root / "data/prepared/test.tgt").write_text("\n".join(REFS) + "\n")
    tok = root / "data/tokenized"
    tok.mkdir(parents=True)
    (tok / "test.src").write_text("\n".join(r.replace(".", " .") for r in REFS) + "\n")
    (tok / "test.tgt").write_text("\n".join(r.replace(".", " .") for r in REFS) + "\n")
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
    assert "vs_baseline" not in encdec["systems"]["beam"]
    assert search["speed"]["greedy"]["sentences_per_s"] == 100.0
    rows = list(csv.DictReader((root / "plots/bleu_by_length/search-50.csv").open()))
    assert [r["bucket"] for r in rows] == ["0-10", "10-20", "20-30", "30-40", "40-50", "50-60", "60+"]
    assert sum(int(r["sentences"]) for r in rows) == len(REFS)
    assert float(rows[0]["beam"]) == corpus_scores(GOOD, REFS, [0, 1, 2, 4, 5, 6])["bleu"]
    assert rows[1]["sentences"] == "1"                # 14 words


def test_remove_unk_deletes_the_unknown_token_and_keeps_punctuation():
    from rnnsearch.evaluation.cell import remove_unk

    assert remove_unk(["le <unk> chat", "<unk>", "il dit <unk>, puis <unk>.", ""]) == \
        ["le chat", "", "il dit , puis .", ""]
