"""Corpus lookup: local mirror first, then a download (served here on 127.0.0.1), verified."""
from __future__ import annotations

import dataclasses
import gzip
import shutil

import pytest

from rnnsearch.data.corpora import HANSARD36, MULTI30K, MIRROR_ENV, locate, sha256_of
from rnnsearch.errors import DataError


def _served_corpus(base_url: str):
    return dataclasses.replace(MULTI30K, url_template=base_url + "/{file}")


def test_mirror_is_used_and_verified(mirror, tmp_path):
    path = locate(MULTI30K, "dev", "de", str(mirror), tmp_path / "cache")
    assert path == mirror / "multi30k" / "val.de.gz"
    assert not (tmp_path / "cache").exists()  # nothing downloaded


def test_env_overrides_the_configured_mirror(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    path = locate(MULTI30K, "test", "fr", "/nonexistent/mirror", tmp_path / "cache")
    assert path == mirror / "multi30k" / "test_2016_flickr.fr.gz"


def test_download_verifies_and_writes_atomically(mirror, http_root, tmp_path):
    served, url = http_root
    shutil.copy(mirror / "multi30k" / "val.en.gz", served / "val.en.gz")
    cache = tmp_path / "cache"
    path = locate(_served_corpus(url), "dev", "en", None, cache)
    assert path == cache / "multi30k" / "val.en.gz"
    assert sha256_of(path) == MULTI30K.sha256["val.en.gz"]
    assert sorted(p.name for p in path.parent.iterdir()) == ["val.en.gz"]  # no temp files left
    # A second lookup finds the cached copy (the server is no longer needed).
    (served / "val.en.gz").unlink()
    assert locate(_served_corpus(url), "dev", "en", None, cache) == path


def test_corrupted_download_fails_and_leaves_nothing(http_root, tmp_path):
    served, url = http_root
    with gzip.open(served / "val.en.gz", "wt") as handle:
        handle.write("tampered\n")
    cache = tmp_path / "cache"
    with pytest.raises(DataError, match="checksum mismatch"):
        locate(_served_corpus(url), "dev", "en", None, cache)
    assert not any(p.is_file() for p in cache.rglob("*"))


def test_unreachable_upstream_is_a_clear_error(tmp_path):
    corpus = dataclasses.replace(MULTI30K, url_template="http://127.0.0.1:9/{file}")
    with pytest.raises(DataError, match="download failed"):
        locate(corpus, "dev", "en", None, tmp_path / "cache")
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_checksum_mismatch_in_mirror(mirror, tmp_path):
    fake = tmp_path / "mirror" / "multi30k"
    fake.mkdir(parents=True)
    (fake / "val.en.gz").write_bytes(b"not the real file")
    with pytest.raises(DataError, match=r"val\.en\.gz: checksum mismatch"):
        locate(MULTI30K, "dev", "en", str(tmp_path / "mirror"), tmp_path / "cache")


def test_hansard_without_mirror_says_there_is_no_upstream(tmp_path):
    with pytest.raises(DataError, match="no upstream URL"):
        locate(HANSARD36, "train", "en", str(tmp_path / "empty"), tmp_path / "cache")


def test_language_the_corpus_lacks(mirror, tmp_path):
    with pytest.raises(DataError, match="corpus 'hansard36' has no language 'de'"):
        locate(HANSARD36, "train", "de", str(mirror), tmp_path / "cache")
