"""A corpus of one's own, defined only in params (``prepare.corpus: custom``): local files, .gz,
TSV, http(s) URLs (served here on 127.0.0.1), checksums recorded, and one-line errors."""
from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, SHARED_CORPORA, http_server, make_project, run_in, run_script
from test_stages_data import write_params

from rnnsearch.config import ConfigError, from_dict
from rnnsearch.config.prepare import PrepareConfig

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
    assert {split: metrics[split]["pairs"] for split in FILES} == {"train": 300, "dev": 50,
                                                                   "test": 40}
    for split, (_, _, names) in FILES.items():
        assert metrics[split]["inputs"] == {
            side: {"file": f"own/{name}", "sha256": sha256(files[name])}
            for side, name in zip(("src", "tgt"), names)}
    meta = json.loads((tmp_path / "data/prepared/meta.json").read_text())
    assert (meta["corpus"], meta["src_lang"], meta["tgt_lang"]) == ("custom", "de", "en")
    assert meta["splits"]["dev"]["inputs"] == metrics["dev"]["inputs"]
    tokenized = json.loads((tmp_path / "metrics/tokenize.json").read_text())
    assert tokenized["pairs"] == {"train": 300, "dev": 50, "test": 40}


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
    custom = {"train": custom["train"], "dev": {"src": "own/dev.de.gz", "tgt": "own/dev.en.gz"}}
    write_corpus(tmp_path / "own")
    use_custom(tmp_path, custom, download=False, sizes={**SIZES, "test": 30})
    result = run_prepare(tmp_path)
    assert result.returncode == 2
    assert f"{url}/train.en: no prepare.custom.train.tgt_sha256 in params" in result.stderr
    custom["train"]["tgt_sha256"] = sha256(files["train.en"])
    use_custom(tmp_path, custom, download=False, sizes={**SIZES, "test": 30})
    result = run_prepare(tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "metrics/prepare.json").read_text())["test"]["pairs"] == 30


def test_gz_and_tsv_splits_with_test_held_out_of_train(tmp_path):
    write_corpus(tmp_path / "own")
    pairs = zip(mirror_lines("train.de.gz", 300), mirror_lines("train.en.gz", 300))
    tsv = write_text(tmp_path / "own/train.tsv.gz", [f"{de}\t{en}" for de, en in pairs])
    custom = {"train": {"tsv": "own/train.tsv.gz", "sha256": sha256(tsv)},
              "dev": {"src": "own/dev.de.gz", "tgt": "own/dev.en.gz"}, "test": None}
    use_custom(tmp_path, custom, sizes={"train": 200, "dev": 50, "test": 60})
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
    files, so test is held out of train); returns (prepare.custom, expected message)."""
    split, src, tgt, message = EMPTIED[case]
    names = [Path(custom[split][side]).name for side in ("src", "tgt")]
    for name, lines in zip(names, (src, tgt)):
        write_text(root / "own" / name, lines)
    if split == "train":
        custom["test"] = None
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
    use_custom(tmp_path, custom_params("own"), test_buckets=[3], test_per_bucket=5)
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
])
def test_bad_custom_params_name_the_key(custom, message):
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        from_dict(PrepareConfig, {"corpus": "custom", "src_lang": "de", "tgt_lang": "en",
                                  "custom": custom}, "prepare")


def test_held_out_test_needs_a_size():
    custom = {"train": {"tsv": "t.tsv"}, "dev": {"tsv": "d.tsv"}}
    with pytest.raises(ConfigError, match=r"^prepare\.sizes\.test: must be > 0"):
        from_dict(PrepareConfig, {"corpus": "custom", "src_lang": "de", "tgt_lang": "en",
                                  "custom": custom, "sizes": {"test": 0}}, "prepare")
    cfg = from_dict(PrepareConfig, {"corpus": "multi30k", "src_lang": "de", "tgt_lang": "en",
                                    "custom": custom}, "prepare")
    assert cfg.custom.test is None           # kept, but read only when corpus is custom


@pytest.mark.slow
def test_custom_corpus_given_only_in_params_runs_through_dvc_repro_to_table_1(tmp_path, http_root):
    """The acceptance: the README's example layout (train as two files, here served by URL
    from 127.0.0.1; dev as a local gzipped TSV; test held out of train), tiny, through the real
    DVC pipeline up to the report."""
    from test_pipeline_e2e import TINY

    served, url = http_root
    for lang in ("de", "en"):
        write_text(served / f"train.{lang}", mirror_lines(f"train.{lang}.gz", 1000))
    custom = {"train": {"src": f"{url}/train.de", "tgt": f"{url}/train.en"},
              "dev": {"tsv": "data/own/dev.tsv.gz"}, "test": None}
    prepare = {"corpus": "custom", "src_lang": "de", "tgt_lang": "en", "custom": custom,
               "download": True}
    one_cell = {**TINY["train"], "grid": {"models": ["search"], "max_lens": [20]}}
    project = make_project(tmp_path / "project", {**TINY, "prepare": {**TINY["prepare"], **prepare},
                                                  "train": one_cell})
    dev = zip(mirror_lines("val.de.gz", 80), mirror_lines("val.en.gz", 80))
    tsv = write_text(project / "data/own/dev.tsv.gz", [f"{de}\t{en}" for de, en in dev])
    run_in(["dvc", "repro"], project)
    assert "Table 1" in (project / "reports/README.md").read_text()
    metrics = json.loads((project / "metrics/prepare.json").read_text())
    assert {split: metrics[split]["pairs"] for split in FILES} == {"train": 800, "dev": 60,
                                                                   "test": 60}
    assert metrics["dev"]["inputs"]["tsv"] == {"file": "data/own/dev.tsv.gz", "sha256": sha256(tsv)}
    assert metrics["test"]["held_out_from"] == "train"
    assert metrics["train"]["inputs"]["src"] == {"file": f"{url}/train.de",
                                                 "sha256": sha256(served / "train.de")}


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
