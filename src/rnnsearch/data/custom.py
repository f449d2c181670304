"""A corpus of one's own (``prepare.corpus: custom``): the files named in ``prepare.custom``.

Per split a source and a target file or one ``source<TAB>target`` file, plain or ``.gz``, as a local
path or an http(s) URL (its cached download is reused only when the params give a sha256 it matches:
a URL may serve something new). Every file's sha256 is returned; a given one is checked."""
from __future__ import annotations

import hashlib
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from rnnsearch.data.corpora import download, sha256_of, verify
from rnnsearch.data.textio import read_parallel, read_tsv_pairs
from rnnsearch.errors import DataError

CACHE_FOLDER = "custom"


@dataclass(frozen=True)
class SplitText:
    """The raw pairs of one split and the files they came from."""

    src: list[str]
    tgt: list[str]
    paths: list[str]                       # the files read (a download: its cached copy)
    inputs: dict[str, dict[str, str]]      # role (src/tgt/tsv) -> {"file": as given, "sha256"}


def is_url(location: str) -> bool:
    """True for an http(s) URL, False for a local path."""
    return urllib.parse.urlsplit(location).scheme.lower() in ("http", "https")


def file_name(location: str) -> str:
    """The file name of a local path or of an http(s) URL's path (``""`` when it has none)."""
    return Path(urllib.parse.urlsplit(location).path if is_url(location) else location).name


def cache_path(url: str, cache_dir: str | Path) -> Path:
    """Where the download of ``url`` is kept: its file name (suffix kept, so ``.gz`` is read as
    gzip) behind 16 digits of the URL's sha256 (two URLs never share a copy)."""
    name = file_name(url) or "download"
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    return Path(cache_dir) / CACHE_FOLDER / f"{digest}-{name}"


def fetch_url(url: str, expected: str | None, key: str, cache_dir: str | Path,
              allow_download: bool) -> Path:
    """The local copy of ``url``: the cached one when it matches ``expected``, else a fresh
    download (checked against ``expected`` before it enters the cache)."""
    cached = cache_path(url, cache_dir)
    if expected is not None and cached.is_file() and sha256_of(cached) == expected.lower():
        return cached
    if not allow_download:
        raise DataError(f"{url}: {offline_reason(cached, expected, key)}, and prepare.download "
                        f"is false: set it to true, or give a local path in {key}")
    return download(url, cached, expected, source=f"{sha256_key(key)}, for {url}")


def offline_reason(cached: Path, expected: str | None, key: str) -> str:
    """Why the cached copy of a URL cannot be used as it is."""
    if not cached.is_file():
        return f"not downloaded yet (no {cached})"
    if expected is None:
        return f"no {sha256_key(key)} in params to check the cached copy {cached} against"
    return f"the cached copy {cached} does not match {sha256_key(key)}"


def fetch(location: str, expected: str | None, key: str, cache_dir: str | Path,
          allow_download: bool) -> tuple[Path, str]:
    """The local file of ``location`` and its sha256, checked against ``expected`` if given."""
    if is_url(location):
        path = fetch_url(location, expected, key, cache_dir, allow_download)
    else:
        path = Path(location).expanduser()
        if not path.is_file():
            raise DataError(f"{path}: file not found ({key}; a relative path starts at the "
                            f"repository root, here {Path.cwd()})")
    if expected is None:
        return path, sha256_of(path)
    return path, verify(path, expected, sha256_key(key))


def sha256_key(key: str) -> str:
    """The params key of the sha256 that goes with the file key ``key``."""
    split, role = key.rsplit(".", 1)
    return f"{split}.sha256" if role == "tsv" else f"{key}_sha256"


def read_split(files: Mapping[str, tuple[str, str | None]], key: str, cache_dir: str | Path,
               allow_download: bool = True) -> SplitText:
    """Fetch, check and read a split's ``files`` (role ``src``/``tgt``/``tsv`` -> location and
    expected sha256 or None, as ``config.prepare.CustomSplit.files()`` gives them; params key
    ``key``); an error names the file and the key (and, for a download, the URL it came from)."""
    paths: dict[str, Path] = {}
    inputs: dict[str, dict[str, str]] = {}
    where = key
    try:
        for role, (location, expected) in files.items():
            where = f"{key}.{role}"
            paths[role], digest = fetch(location, expected, where, cache_dir, allow_download)
            inputs[role] = {"file": location, "sha256": digest}
        where = key
        src, tgt = (read_tsv_pairs(paths["tsv"]) if "tsv" in paths
                    else read_parallel(paths["src"], paths["tgt"]))
    except DataError as err:
        raise DataError(f"{err}{context(str(err), where, inputs, paths)}") from err
    return SplitText(src, tgt, [str(p) for p in paths.values()], inputs)


def context(message: str, key: str, inputs: dict[str, Any], paths: dict[str, Path]) -> str:
    """`` (<key>; <cached copy> downloaded from <url>)``: what ``message`` does not say yet."""
    notes = [] if key in message else [key]
    notes += [f"{paths[role]} downloaded from {info['file']}" for role, info in inputs.items()
              if is_url(info["file"]) and str(paths[role]) in message]
    return f" ({'; '.join(notes)})" if notes else ""
