"""A corpus of one's own, defined only in params (``prepare.corpus: custom``): local files, .gz,
TSV, http(s) URLs (served here on 127.0.0.1), checksums recorded, and one-line errors."""
from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, SHARED_CORPORA, http_server, run_script
from test_stages_data import write_params

from rnnsearch.config.base import from_dict
from rnnsearch.errors import ConfigError
from rnnsearch.config.prepare import PrepareConfig, auto_test_size
from rnnsearch.data.tokenize import tokenize_line, unknown_language_notice

SIZES = {"train": 0, "dev": 50, "test": 40}   # train 0: keep all


def mirror_lines(name: str, count: int) -> list[str]:
    """The first ``count`` lines of a Multi30k file of the shared mirror."""
    path = SHARED_CORPORA / "multi30k" / name
    if not path.is_file():
        pytest.skip(f"corpora mirror not found at {SHARED_CORPORA}")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [next(handle).rstrip("\n") for _ in range(count)]


def write_text(path: Path, lines: list[str]) -> Path:
    """Write ``lines`` to ``path`` (gzipped when it ends in ``.gz``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.write_bytes(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# split -> (Multi30k file stem, lines taken, our file names for de and en)
FILES = {"train": ("train", 300, ("train.de", "train.en")),
         "dev": ("val", 60, ("dev.de.gz", "dev.en.gz")),
         "test": ("test_2016_flickr", 50, ("test.de", "test.en"))}


def write_corpus(folder: Path) -> dict[str, Path]:
    """Two files per split (de -> en; dev gzipped) in ``folder``; returns name -> path."""
    written = {}
    for stem, count, names in FILES.values():
        for lang, name in zip(("de", "en"), names):
            written[name] = write_text(folder / name, mirror_lines(f"{stem}.{lang}.gz", count))
    return written


def custom_params(base: str) -> dict[str, Any]:
    """``prepare.custom`` for the corpus of :func:`write_corpus`; ``base``: folder or URL."""
    return {split: {"src": f"{base}/{names[0]}", "tgt": f"{base}/{names[1]}"}
            for split, (_, _, names) in FILES.items()}


def use_custom(root: Path, custom: dict[str, Any] | None, **overrides: Any) -> Path:
    """params.yaml in ``root`` selecting the custom corpus ``custom`` (de -> en)."""
    params = {"corpus": "custom", "custom": custom, "sizes": SIZES, "download": True, **overrides}
    return write_params(root / "params.yaml", SHARED_CORPORA, **params)


def run_prepare(root: Path) -> Any:
    """Run the prepare stage script in ``root``."""
    return run_script("prepare.py", cwd=root)


def test_local_files_run_through_prepare_and_tokenize(tmp_path):
    files = write_corpus(tmp_path / "own")
    use_custom(tmp_path, custom_params("own"))           # relative to the working directory
    for script in ("prepare.py", "tokenize_text.py"):
        result = run_script(script, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    assert {split: metrics[split]["pairs"] for split in FILES} == {"train": 300, "dev": 60,
                                                                   "test": 50}   # given: whole
    for split, (_, _, names) in FILES.items():
        assert metrics[split]["inputs"] == {
            side: {"file": f"own/{name}", "sha256": sha256(files[name])}
            for side, name in zip(("src", "tgt"), names)}
    meta = json.loads((tmp_path / "data/prepared/meta.json").read_text())
    assert (meta["corpus"], meta["src_lang"], meta["tgt_lang"]) == ("custom", "de", "en")
    assert meta["splits"]["dev"]["inputs"] == metrics["dev"]["inputs"]
    tokenized = json.loads((tmp_path / "metrics/tokenize.json").read_text())
    assert tokenized["pairs"] == {"train": 300, "dev": 60, "test": 50}


def test_urls_are_downloaded_to_the_cache_and_checked(tmp_path, http_root):
    served, url = http_root
    files = write_corpus(served)
    custom = custom_params(url)
    custom["train"]["src_sha256"] = sha256(files["train.de"])
    use_custom(tmp_path, custom)
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    assert metrics["train"]["inputs"]["src"] == {"file": f"{url}/train.de",
                                                 "sha256": sha256(files["train.de"])}
    assert metrics["dev"]["inputs"]["tgt"]["sha256"] == sha256(files["dev.en.gz"])
    cached = sorted(p.name.split("-", 1)[1] for p in (tmp_path / ".cache/corpora/custom").iterdir())
    assert cached == sorted(files)                     # no temporary files left beside them
    # Offline, a file pinned by its sha256 comes from the cache; an unpinned one is refused.
    (served / "train.de").unlink()
    custom = {"train": custom["train"], "dev": {"src": "own/dev.de.gz", "tgt": "own/dev.en.gz"},
              "test_size": 30}
    write_corpus(tmp_path / "own")
    use_custom(tmp_path, custom, download=False)
    result = run_prepare(tmp_path)
    assert result.returncode == 2
    assert f"{url}/train.en: no prepare.custom.train.tgt_sha256 in params" in result.stderr
    custom["train"]["tgt_sha256"] = sha256(files["train.en"])
    use_custom(tmp_path, custom, download=False)
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "metrics/prepare.json").read_text())["test"]["pairs"] == 30


def test_gz_and_tsv_splits_with_test_held_out_of_train(tmp_path):
    write_corpus(tmp_path / "own")
    pairs = zip(mirror_lines("train.de.gz", 300), mirror_lines("train.en.gz", 300))
    tsv = write_text(tmp_path / "own/train.tsv.gz", [f"{de}\t{en}" for de, en in pairs])
    custom = {"train": {"tsv": "own/train.tsv.gz", "sha256": sha256(tsv)},
              "dev": {"src": "own/dev.de.gz", "tgt": "own/dev.en.gz"}, "test": None,
              "test_size": 60}
    use_custom(tmp_path, custom, sizes={"train": 200, "dev": 50, "test": 0})
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    assert metrics["train"]["inputs"] == {"tsv": {"file": "own/train.tsv.gz", "sha256": sha256(tsv)}}
    assert metrics["test"]["held_out_from"] == "train" and metrics["test"]["pairs"] == 60
    assert metrics["train"]["pairs"] == 200
    out = tmp_path / "data/prepared"
    train = set(zip(*(out.joinpath(f"train.{s}").read_text().splitlines() for s in ("src", "tgt"))))
    test = set(zip(*(out.joinpath(f"test.{s}").read_text().splitlines() for s in ("src", "tgt"))))
    assert len(test) == 60 and len(train) == 200 and not train & test


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def corrupt_gzip(path: Path) -> None:
    """Overwrite the first bytes of ``path``'s deflate stream (a corrupt, not truncated, .gz)."""
    data = bytearray(path.read_bytes())
    data[10:18] = b"\xff" * 8
    path.write_bytes(bytes(data))


def bad_input(case: str, root: Path, http_root: tuple[Path, str]
              ) -> tuple[dict[str, Any] | None, str]:
    """Write the corpus broken as ``case`` says; returns (prepare.custom, expected message)."""
    served, url = http_root
    custom = custom_params("own")
    write_corpus(root / "own")
    if case == "missing file":
        custom["dev"]["src"] = "own/nope.de"
        return custom, "own/nope.de: file not found (prepare.custom.dev.src;"
    if case == "line counts differ":
        write_text(root / "own/test.en", mirror_lines("test_2016_flickr.en.gz", 49))
        return custom, "line counts differ: own/test.de has 50 lines, own/test.en has 49"
    if case == "bad checksum":
        custom["train"]["tgt_sha256"] = "0" * 64
        return custom, (f"own/train.en: checksum mismatch (sha256 {sha256(root / 'own/train.en')}"
                        f", expected {'0' * 64} from prepare.custom.train.tgt_sha256)")
    if case == "connection refused":
        custom["train"]["src"] = refused = f"http://127.0.0.1:{free_port()}/train.de"
        return custom, f"{refused}: download failed: <urlopen error [Errno 111] Connection refused>"
    if case == "not found (404)":
        custom["train"]["src"] = f"{url}/missing.de"
        return custom, f"{url}/missing.de: download failed: HTTP Error 404"
    if case == "corrupt gzip":
        corrupt_gzip(root / "own/dev.de.gz")
        return custom, ("own/dev.de.gz: corrupt gzip data (Error -3 while decompressing data: "
                        "invalid block type) (prepare.custom.dev)")
    if case == "corrupt gzip download":
        corrupt_gzip(write_text(served / "train.de.gz", ["ein Hund", "eine Katze"]))
        custom["train"]["src"] = f"{url}/train.de.gz"
        return custom, (f"{url}/train.de.gz: corrupt gzip data (Error -3 while decompressing "
                        "data: invalid block type) (prepare.custom.train.src)")
    if case == "tsv line without a tab":
        write_text(root / "own/dev.tsv", ["ein Hund\ta dog", "eine Katze\ta cat", "kein Tab"])
        custom["dev"] = {"tsv": "own/dev.tsv"}
        return custom, "own/dev.tsv:3: expected source<TAB>target (exactly one tab), found 0 tabs"
    if case in EMPTIED:
        return emptied_split(case, root, custom)
    assert case == "custom missing"
    return None, "prepare.custom: required when prepare.corpus is 'custom'"


LONG = " ".join(["Wort"] * 81)             # one word over the default clean.max_len (80)
EMPTIED = {  # case -> split, its source and target lines, the expected message after the files
    "dev emptied by clean.max_len": ("dev", [LONG] * 60, ["a long line"] * 60,
                                     "cleaning dropped all 60 pairs of the dev split (too_long "
                                     "60): loosen prepare.clean.max_len (80)"),
    "test emptied by clean.max_ratio": ("test", ["Hund"] * 50, ["a b c d e f g h i j"] * 50,
                                        "cleaning dropped all 50 pairs of the test split (ratio "
                                        "50): loosen prepare.clean.max_ratio (9.0)"),
    "train emptied, test held out of it": ("train", [LONG, "Hund"], ["long", "a b c d e f g h i j"],
                                           "cleaning dropped all 2 pairs of the train split "
                                           "(too_long 1, ratio 1): loosen prepare.clean.max_len "
                                           "(80), prepare.clean.max_ratio (9.0)"),
    "dev lines blank": ("dev", [" ", "\t"], ["ein", "zwei"], "cleaning dropped all 2 pairs of "
                        "the dev split (empty 2): every pair has a side without words"),
}


def emptied_split(case: str, root: Path, custom: dict[str, Any]
                  ) -> tuple[dict[str, Any], str]:
    """The corpus with one split's files replaced as :data:`EMPTIED` says (train: and no test
    files, so test is held out of train; dev and test: cleaned as ``cut_given`` asks); returns
    (prepare.custom, expected message)."""
    split, src, tgt, message = EMPTIED[case]
    names = [Path(custom[split][side]).name for side in ("src", "tgt")]
    for name, lines in zip(names, (src, tgt)):
        write_text(root / "own" / name, lines)
    if split == "train":
        custom["test"] = None
    elif "loosen" in message:              # a given split is cleaned only when cut_given says so
        custom["cut_given"] = ["dev", "test"]
    return custom, f"own/{names[0]}, own/{names[1]}: {message}"


@pytest.mark.parametrize("case", ["missing file", "line counts differ", "bad checksum",
                                  "connection refused", "not found (404)", "corrupt gzip",
                                  "corrupt gzip download", "tsv line without a tab",
                                  "custom missing", *EMPTIED])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, http_root, case):
    """Was, for a corrupt gzip file (local or downloaded): a ``zlib.error`` traceback naming no
    file, and the bad download left in the cache. A split that cleaning empties passed prepare
    and failed only in tokenize."""
    custom, message = bad_input(case, tmp_path, http_root)
    use_custom(tmp_path, custom)
    result = run_prepare(tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.strip().splitlines()
             if not line.startswith("download ")]          # the progress bar of a download
    assert len(lines) == 1 and lines[0].startswith("prepare: error: "), result.stderr
    assert message in lines[0]
    assert not (tmp_path / "data").exists() and not (tmp_path / "metrics").exists()
    assert not [p for p in tmp_path.glob(".cache/**/*") if p.is_file()]


def test_test_buckets_that_take_no_pair_are_refused_naming_the_key(tmp_path):
    """Was: an empty test split written, failing only later in tokenize."""
    write_corpus(tmp_path / "own")
    for name in ("test.de", "test.en"):
        write_text(tmp_path / "own" / name, ["eins zwei drei vier"] * 20)
    custom = {**custom_params("own"), "cut_given": ["test"]}
    use_custom(tmp_path, custom, test_buckets=[3], test_per_bucket=5)
    result = run_prepare(tmp_path)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert lines[-1] == ("prepare: error: prepare.test_buckets [3]: none of the 20 clean pairs "
                         "the test split is drawn from has a source of at most 3 words (the "
                         "shortest has 4)"), lines
    assert not (tmp_path / "data").exists()


class Trickle(http.server.BaseHTTPRequestHandler):
    """Answers at once, promising 1,000 bytes, then sends one byte every 0.1 s (30 s at most)."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        for _ in range(300):
            try:
                self.wfile.write(b"x")
                self.wfile.flush()
            except OSError:                  # the client gave up
                return
            time.sleep(0.1)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_trickling_download_is_abandoned_naming_the_url(tmp_path):
    """Was: a server sending a byte now and then kept the download going for ever (each byte
    restarted the socket's timeout). Now under $RNNSEARCH_DOWNLOAD_SPEED_LIMIT bytes/s over
    $RNNSEARCH_DOWNLOAD_SPEED_TIME seconds (here 1 s) gives up, naming the URL, and removes the
    partial file."""
    write_corpus(tmp_path / "own")
    with http_server(Trickle) as url:
        custom = custom_params("own")
        custom["train"]["src"] = f"{url}/train.de"
        use_custom(tmp_path, custom)
        started = time.monotonic()
        result = run_script("prepare.py", cwd=tmp_path,
                            env={"RNNSEARCH_DOWNLOAD_SPEED_TIME": "1"})
    assert time.monotonic() - started < 25           # the server trickles for 30 s
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"prepare: error: {url}/train.de: download too slow: "), line
    assert "RNNSEARCH_DOWNLOAD_SPEED_TIME" in line and "Traceback" not in result.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "metrics").exists()
    assert not [p for p in tmp_path.glob(".cache/**/*") if p.is_file()]


@pytest.mark.parametrize("custom, message", [
    ({"dev": {"src": "d.de", "tgt": "d.en"}}, "prepare.custom.train: required key is missing"),
    ({"train": {"src": "t.de"}, "dev": {"tsv": "d.tsv"}}, "prepare.custom.train.tgt: required"),
    ({"train": {"src": "t.de", "tgt": "t.en", "tsv": "t.tsv"}, "dev": {"tsv": "d.tsv"}},
     "prepare.custom.train: give either src and tgt or tsv, not both"),
    ({"train": {"tsv": "t.tsv", "src_sha256": "ab" * 32}, "dev": {"tsv": "d.tsv"}},
     "prepare.custom.train.src_sha256: is set but prepare.custom.train.src is not"),
    ({"train": {"tsv": "t.tsv", "sha256": "xyz"}, "dev": {"tsv": "d.tsv"}},
     "prepare.custom.train.sha256: must be 64 hexadecimal digits"),
    ({"train": {"tsv": "ftp://host/t.tsv"}, "dev": {"tsv": "d.tsv"}},
     "prepare.custom.train.tsv: only local paths and http(s) URLs"),
    ({"train": {"tsv": "t.tsv"}, "dev": {"tsv": "d.tsv"}, "tset": None},
     "prepare.custom.tset: unknown key"),
    ({"train": {"tsv": "t.tsv"}, "dev": {"tsv": "d.tsv"}, "cut_given": ["test"]},
     "prepare.custom.cut_given: lists test, but prepare.custom.test is null"),
])
def test_bad_custom_params_name_the_key(custom, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        from_dict(PrepareConfig, {"corpus": "custom", "src_lang": "de", "tgt_lang": "en",
                                  "custom": custom}, "prepare")


@pytest.mark.parametrize("custom, extra, message", [
    ({"test_size": 0}, {}, "prepare.custom.test_size: must be auto or a number of pairs > 0, got 0"),
    ({"test_size": "half"}, {}, "prepare.custom.test_size: expected"),
    ({"test_stratified": True}, {"test_buckets": []},
     "prepare.custom.test_stratified: needs prepare.test_buckets"),
    ({"test_stratified": True, "test": {"tsv": "x.tsv"}}, {"test_buckets": [10]},
     "prepare.custom.test_stratified: applies to a test split held out of train"),
])
def test_held_out_test_params_are_checked(custom, extra, message):
    files = {"train": {"tsv": "t.tsv"}, "dev": {"tsv": "d.tsv"}}
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        from_dict(PrepareConfig, {"corpus": "custom", "src_lang": "de", "tgt_lang": "en",
                                  "custom": {**files, **custom}, **extra}, "prepare")
    cfg = from_dict(PrepareConfig, {"corpus": "multi30k", "src_lang": "de", "tgt_lang": "en",
                                    "custom": files}, "prepare")
    assert cfg.custom.test is None           # kept, but read only when corpus is custom


def test_auto_test_size_is_five_percent_within_bounds():
    assert [auto_test_size(n) for n in (1, 10, 9_500, 60_000, 1_000_000)] == [1, 1, 475, 3000, 3000]


def short_corpus(folder: Path, pairs: int) -> list[int]:
    """Multi30k de-en training pairs as one TSV (short sentences, none over 40 words), with
    dev given; returns the source lengths."""
    rows = list(zip(mirror_lines("train.de.gz", pairs), mirror_lines("train.en.gz", pairs)))
    write_text(folder / "train.tsv", [f"{de}\t{en}" for de, en in rows])
    return [len(de.split()) for de, _ in rows]


def test_held_out_test_of_a_short_corpus_ignores_the_built_in_buckets(tmp_path):
    """Was: params.yaml's Hansard layout (7 buckets of 300, up to 80 words) stratified the test
    held out of a short corpus, taking every pair over 20 words out of training, unsaid."""
    lengths = short_corpus(tmp_path / "own", 2000)
    custom = {"train": {"tsv": "own/train.tsv"}, "dev": {"src": "own/dev.de.gz",
              "tgt": "own/dev.en.gz"}, "test": None}
    write_corpus(tmp_path / "own")
    use_custom(tmp_path, custom, sizes={"train": 0, "dev": 50, "test": 0},
               test_buckets=[10, 20, 30, 40, 50, 60, 80], test_per_bucket=300)
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    train, test = metrics["train"], metrics["test"]
    assert (test["pairs"], test["test_size"], "per_bucket" in test) == (100, 100, False)
    assert train["pairs"] + train["held_out_for_test"] + train["not_sampled"] == 2000
    assert train["pairs"] == 2000 - train["held_out_for_test"]
    trained = [len(src.split()) for src, _ in prepared_lines(tmp_path, "train")]
    assert max(trained) == max(lengths) > 20          # the long pairs stay in training
    assert notices(result)[-2:] == [
        f"prepare: train: kept {train['pairs']:,} of 2,000 pairs: "
        f"{train['held_out_for_test']} held out for test by prepare.custom.test_size (auto: 5%, "
        f"at most 3,000)",
        "prepare: test: 100 of train's 2,000 clean pairs held out by prepare.custom.test_size "
        "(auto: 5%, at most 3,000)"]


def test_a_stratified_held_out_test_takes_at_most_half_of_each_bucket(tmp_path):
    lengths = short_corpus(tmp_path / "own", 600)
    custom = {"train": {"tsv": "own/train.tsv"}, "dev": {"src": "own/dev.de.gz",
              "tgt": "own/dev.en.gz"}, "test": None, "test_stratified": True}
    write_corpus(tmp_path / "own")
    use_custom(tmp_path, custom, test_buckets=[10, 20, 30, 80], test_per_bucket=100)
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    per_bucket = json.loads((tmp_path / "metrics/prepare.json").read_text())["test"]["per_bucket"]
    members = [sum(lo < n <= hi for n in lengths) for lo, hi in ((0, 10), (10, 20), (20, 30),
                                                                  (30, 80))]
    assert list(per_bucket.values()) == [min(100, m // 2) for m in members]
    assert members[2] < 200 and per_bucket["21-30"] == members[2] // 2


def key_comment(params: Path, section: str, key: str) -> str:
    """The comment on ``section.key`` in ``params``: the end of its line and the comment-only
    lines that continue it."""
    lines = params.read_text(encoding="utf-8").splitlines()
    start = lines.index(f"{section}:")
    at = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(f"  {key}:"))
    comment = [lines[at].partition("#")[2]]
    for line in lines[at + 1:]:
        if not line.lstrip().startswith("#"):
            break
        comment.append(line.lstrip()[1:])
    return " ".join(" ".join(comment).split())


def test_mirror_and_cache_may_be_anywhere_on_disk_as_params_yaml_says(tmp_path, http_root):
    assert "anywhere on disk" in key_comment(REPO / "params.yaml", "prepare", "cache_dir")
    served, url = http_root
    files = write_corpus(served)
    elsewhere = tmp_path / "elsewhere" / "corpora"         # outside the project folder
    project = tmp_path / "project"
    project.mkdir()
    use_custom(project, custom_params(url), cache_dir=str(elsewhere))   # mirror: absolute too
    done = run_prepare(project)
    assert done.returncode == 0, done.stderr
    cached = sorted(p.name.split("-", 1)[1] for p in (elsewhere / "custom").iterdir())
    assert cached == sorted(files)
    assert not (project / ".cache").exists()


# ---- given dev and test files are the user's --------------------------------------------------

def prepared_lines(root: Path, split: str) -> list[tuple[str, str]]:
    """The pairs prepare wrote for ``split`` under ``root``."""
    out = root / "data/prepared"
    return list(zip(*(out.joinpath(f"{split}.{s}").read_text().splitlines() for s in ("src", "tgt"))))


def with_odd_test_pairs(folder: Path) -> list[tuple[str, str]]:
    """Append to the test files of :func:`write_corpus` a pair over ``clean.max_len``, one over
    ``clean.max_ratio`` and one with an empty source; returns every test pair as written."""
    odd = [(LONG, "a long line"), ("Hund", "a b c d e f g h i j"), ("", "nothing")]
    pairs = list(zip(mirror_lines("test_2016_flickr.de.gz", 50),
                     mirror_lines("test_2016_flickr.en.gz", 50))) + odd
    for side, name in enumerate(FILES["test"][2]):
        write_text(folder / name, [pair[side] for pair in pairs])
    return pairs


def notices(result: Any) -> list[str]:
    """The ``prepare: <split>: ...`` and ``prepare: warning: ...`` lines the stage printed."""
    return [line for line in (result.stdout + result.stderr).splitlines()
            if line.startswith(("prepare: dev:", "prepare: test:", "prepare: train:",
                                "prepare: warning:"))]


def test_given_dev_and_test_files_are_used_whole_by_default(tmp_path):
    """Was: a given test file length-cleaned and subsampled (here to sizes.test 40, or 300 per
    test_buckets bucket) and a given dev file cut to sizes.dev, without a word."""
    write_corpus(tmp_path / "own")
    given = with_odd_test_pairs(tmp_path / "own")
    use_custom(tmp_path, custom_params("own"), test_buckets=[10, 20], test_per_bucket=5)
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    assert prepared_lines(tmp_path, "test") == given[:-1]        # only the empty side dropped
    assert len(prepared_lines(tmp_path, "dev")) == 60            # sizes.dev is 50
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    test, dev = metrics["test"], metrics["dev"]
    assert (test["raw_pairs"], test["pairs"], test["cut"], test["not_sampled"]) == (53, 52, False, 0)
    assert {k: v for k, v in test["dropped"].items() if v} == {"empty": 1}
    assert (dev["raw_pairs"], dev["pairs"], dev["cut"]) == (60, 60, False)
    assert notices(result) == ["prepare: test: kept 52 of 53 given pairs: 1 dropped as empty "
                               "(a side without words)"]


def test_cut_given_cleans_and_samples_given_splits_and_says_so(tmp_path):
    write_corpus(tmp_path / "own")
    with_odd_test_pairs(tmp_path / "own")
    custom = {**custom_params("own"), "cut_given": ["dev", "test"]}
    use_custom(tmp_path, custom)
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    assert (metrics["dev"]["pairs"], metrics["test"]["pairs"]) == (50, 40)
    assert metrics["test"]["cut"] and metrics["test"]["not_sampled"] == 10
    assert notices(result) == [
        "prepare: dev: kept 50 of 60 given pairs: 10 not sampled by prepare.sizes.dev (50)",
        "prepare: test: kept 40 of 53 given pairs: 1 dropped as empty (a side without words), "
        "1 dropped by prepare.clean.max_len (80), 1 dropped by prepare.clean.max_ratio (9.0), "
        "10 not sampled by prepare.sizes.test (40)"]
    use_custom(tmp_path, {**custom, "cut_given": ["test"]}, test_buckets=[10, 20],
               test_per_bucket=5)
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    assert metrics["dev"]["pairs"] == 60 and metrics["test"]["pairs"] == 10
    assert notices(result) == [
        "prepare: test: kept 10 of 53 given pairs: 1 dropped as empty (a side without words), "
        "1 dropped by prepare.clean.max_len (80), 1 dropped by prepare.clean.max_ratio (9.0), "
        "40 not sampled by prepare.test_buckets/test_per_bucket ([10, 20]/5)"]


def test_cut_given_names_only_given_splits():
    custom = {"train": {"tsv": "t.tsv"}, "dev": {"tsv": "d.tsv"}, "cut_given": ["train"]}
    with pytest.raises(ConfigError, match=r"^prepare\.custom\.cut_given: 'train' is not dev or "
                                          r"test \(train is always cleaned and sampled\)"):
        from_dict(PrepareConfig, {"corpus": "custom", "src_lang": "de", "tgt_lang": "en",
                                  "custom": custom}, "prepare")


ESCAPED = ["it&apos;s a &quot;dog&quot; &amp; a cat", "&#39;x&#x27; &lt;b&gt;", "AT&T; &nosuch; x"]


def test_entities_are_counted_and_warned_about_and_unescaped_on_request(tmp_path):
    """Was: a Moses-escaped corpus (``&apos;s``) tokenised as ``& apos ; s``, unnoticed."""
    write_corpus(tmp_path / "own")
    lines = mirror_lines("test_2016_flickr.en.gz", 50)
    write_text(tmp_path / "own/test.en", ESCAPED + lines[3:])
    use_custom(tmp_path, custom_params("own"))
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    for path in (tmp_path / "metrics/prepare.json", tmp_path / "data/prepared/meta.json"):
        saved = json.loads(path.read_text())
        test = saved["test"] if "test" in saved else saved["splits"]["test"]
        assert test["entities"] == {"src": {"occurrences": 0, "lines": 0},
                                    "tgt": {"occurrences": 8, "lines": 2}, "unescaped": False}
    assert notices(result) == [
        "prepare: warning: test: 8 HTML/XML entities (such as &apos; &quot; &amp; &#39;) in 0 "
        "source and 2 target lines, left as they are (the tokenizer splits &apos; into & apos ;): "
        "set prepare.clean.unescape_entities: true to turn them into characters"]
    assert prepared_lines(tmp_path, "test")[0][1] == ESCAPED[0]
    use_custom(tmp_path, custom_params("own"), clean={"unescape_entities": True})
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    assert metrics["test"]["entities"]["unescaped"] is True
    assert metrics["test"]["entities"]["tgt"] == {"occurrences": 8, "lines": 2}
    assert [pair[1] for pair in prepared_lines(tmp_path, "test")[:3]] == [
        "it's a \"dog\" & a cat", "'x' <b>", "AT&T; &nosuch; x"]
    assert notices(result) == ["prepare: test: unescaped 8 HTML/XML entities in 0 source and 2 "
                               "target lines (prepare.clean.unescape_entities)"]


def corpus_block(root: Path) -> dict[str, Any]:
    """The corpus block of ``metrics/prepare.json``, checked to equal meta.json's."""
    block = json.loads((root / "metrics/prepare.json").read_text())["corpus"]
    assert json.loads((root / "data/prepared/meta.json").read_text())["corpus_info"] == block
    return block


def test_corpus_block_names_a_built_in_corpus_and_its_test_files(tmp_path):
    write_params(tmp_path / "params.yaml", SHARED_CORPORA, sizes={"train": 50, "dev": 20,
                                                                  "test": 30})
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    assert corpus_block(tmp_path) == {
        "name": "multi30k", "title": "Multi30k task 1 (Elliott et al. 2016), image captions",
        "src_lang": "de", "tgt_lang": "en",
        "test_set": "multi30k test_2016_flickr.de.gz / test_2016_flickr.en.gz, 30 of 1,000 pairs"}


def test_corpus_block_of_a_custom_corpus_names_its_test_files_or_the_held_out_part(tmp_path):
    write_corpus(tmp_path / "own")
    use_custom(tmp_path, custom_params("own"))
    assert run_prepare(tmp_path).returncode == 0
    block = corpus_block(tmp_path)
    assert block == {"name": "custom", "title": "your own files", "src_lang": "de",
                     "tgt_lang": "en", "test_set": "test.de / test.en"}
    use_custom(tmp_path, {**custom_params("own"), "test": None})
    assert run_prepare(tmp_path).returncode == 0
    assert corpus_block(tmp_path)["test_set"] == "held out of the training files (15 pairs)"


def test_a_language_moses_does_not_know_is_warned_about_in_one_line(tmp_path):
    """Was: ``rw`` accepted silently, and Moses' fallback split ``n'iki`` into ``n ' iki``."""
    write_corpus(tmp_path / "own")
    use_custom(tmp_path, custom_params("own"), src_lang="rw")
    for script in ("prepare.py", "tokenize_text.py"):
        result = run_script(script, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("tokenize: warn")]
    assert warnings == [unknown_language_notice("rw", "prepare.src_lang")]
    assert "'rw' (prepare.src_lang)" in warnings[0] and "n'iki -> n ' iki" in warnings[0]
    assert tokenize_line("n'iki", "rw") == ["n", "'", "iki"]      # what the line explains
    assert unknown_language_notice("en", "prepare.tgt_lang") is None
    assert unknown_language_notice("zh", "prepare.tgt_lang") is None
