"""The corpus registry and where a corpus file comes from: local mirror first, then upstream.

``<split>.<lang>.gz`` comes from the mirror (``prepare.mirror`` or ``RNNSEARCH_CORPORA``), the
download cache or upstream (into the cache), always checked against its sha256. A download under
``RNNSEARCH_DOWNLOAD_SPEED_LIMIT`` bytes/s (1024) over ``RNNSEARCH_DOWNLOAD_SPEED_TIME`` s (60) is
abandoned as curl does: the socket timeout restarts with every byte, so a trickle would hang."""
from __future__ import annotations

import hashlib
import http.client
import math
import os
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

from tqdm import tqdm

from rnnsearch.data.textio import check_gzip
from rnnsearch.errors import DataError

MIRROR_ENV = "RNNSEARCH_CORPORA"
SPEED_LIMIT_ENV = "RNNSEARCH_DOWNLOAD_SPEED_LIMIT"
SPEED_TIME_ENV = "RNNSEARCH_DOWNLOAD_SPEED_TIME"
SPLITS = ("train", "dev", "test")
BLOCK = 1 << 16


@dataclass(frozen=True)
class SpeedLimit:
    """The slowest download kept going: ``bytes_per_s`` on average over every ``seconds`` (curl's
    ``--speed-limit``/``--speed-time``)."""

    bytes_per_s: float = 1024.0
    seconds: float = 60.0

    @classmethod
    def from_env(cls) -> "SpeedLimit":
        """The limit set by ``$RNNSEARCH_DOWNLOAD_SPEED_LIMIT`` and ``$..._SPEED_TIME`` (default:
        the field's); a value that is not a positive number is refused naming the variable."""
        return cls(_positive_env(SPEED_LIMIT_ENV, cls.bytes_per_s),
                   _positive_env(SPEED_TIME_ENV, cls.seconds))

    def too_slow(self, url: str, dest: Path, received: int, elapsed: float) -> DataError:
        """The :class:`DataError` for ``received`` bytes of ``url`` in the last ``elapsed`` s."""
        return DataError(
            f"{url}: download too slow: {received} bytes in the last {elapsed:.1f} s, under "
            f"{self.bytes_per_s:g} bytes/s over {self.seconds:g} s (${SPEED_LIMIT_ENV}, "
            f"${SPEED_TIME_ENV}); the partial file was removed. Check the connection and rerun, "
            f"or fetch {dest.name} another way and point the params at the local copy")


def _positive_env(name: str, default: float) -> float:
    """The positive number in environment variable ``name``, or ``default`` when unset."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise DataError(f"${name}: must be a positive number, got '{text}'")
    return value


@dataclass(frozen=True)
class Corpus:
    """A registered parallel corpus."""

    name: str
    languages: tuple[str, ...]
    split_files: Mapping[str, str]  # our split -> the corpus' file stem
    sha256: Mapping[str, str]  # file name -> sha256
    url_template: str | None  # "{file}" is replaced by the file name; None: no upstream
    note: str = ""
    title: str = ""  # one line naming the corpus (the report's first table)

    def file_name(self, split: str, lang: str) -> str:
        """The corpus' file name of ``split`` in ``lang``, e.g. ``val.en.gz``."""
        return f"{self.split_files[split]}.{lang}.gz"

    def url(self, file_name: str) -> str | None:
        """The upstream URL of ``file_name``, or None when the corpus has no upstream."""
        return self.url_template.format(file=file_name) if self.url_template else None


MULTI30K = Corpus(
    name="multi30k",
    languages=("en", "fr", "de"),
    split_files={"train": "train", "dev": "val", "test": "test_2016_flickr"},
    sha256={
        "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
        "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
        "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
        "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
        "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
        "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
        "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
        "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
        "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    },
    url_template="https://github.com/multi30k/dataset/raw/master/data/task1/raw/{file}",
    note="Multi30k task 1 (Elliott et al. 2016), image-caption translation, short sentences.",
    title="Multi30k task 1 (Elliott et al. 2016), image captions",
)

HANSARD36 = Corpus(
    name="hansard36",
    languages=("en", "fr"),
    split_files={"train": "train", "dev": "dev", "test": "test"},
    sha256={
        "dev.en.gz": "4b07987781e168dd1fd639dd3fc875fe8a67d3ffbda4b0707c588853acfa7fe7",
        "dev.fr.gz": "712a2a51a6f1033fbe67f464fcd4ce9384b902f2b4fc8f09903147100385dc33",
        "test.en.gz": "7f4e053370272059086efb11174c2e9c56e9f620f514684ada337fbe3713fdc8",
        "test.fr.gz": "c587b95234741a26698e658fe0ecdf3de1a08605ed2435ed159b0b00063fbc13",
        "train.en.gz": "2b7f76a0b628ec846728d0118cf44685d8c9e4a63baea742e798aab77d791b30",
        "train.fr.gz": "94d26aa03895b2314ef715e1aecd40c947e5c903db2638b320d891343059dd33",
    },
    url_template=None,
    note="Aligned Hansards of the 36th Parliament of Canada (USC/ISI release 2001-1a), "
         "one file per split; no upstream URL serves these exact files.",
    title="Aligned Hansards of the 36th Parliament of Canada (USC/ISI release 2001-1a)",
)

REGISTRY: dict[str, Corpus] = {c.name: c for c in (MULTI30K, HANSARD36)}


def get_corpus(name: str) -> Corpus:
    """The registered corpus called ``name``."""
    if name not in REGISTRY:
        raise DataError(f"unknown corpus '{name}' (known: {', '.join(sorted(REGISTRY))})")
    return REGISTRY[name]


def sha256_of(path: str | Path, chunk: int = 1 << 20) -> str:
    """The hex sha256 of a file."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, expected: str, source: str = "") -> str:
    """``path``'s sha256; raise :class:`DataError` naming ``path`` (and ``source``, where the
    expected value comes from) when it is not ``expected``."""
    actual = sha256_of(path)
    if actual != expected.lower():
        where = f" from {source}" if source else ""
        raise DataError(f"{path}: checksum mismatch (sha256 {actual}, expected {expected}{where})")
    return actual


def mirror_dir(configured: str | None) -> Path | None:
    """The mirror in force: ``RNNSEARCH_CORPORA`` if set, else the configured one (if any)."""
    chosen = os.environ.get(MIRROR_ENV) or configured
    return Path(chosen).expanduser() if chosen else None


def download(url: str, dest: Path, expected_sha256: str | None, timeout: float = 60.0,
             source: str = "", limit: SpeedLimit | None = None) -> Path:
    """Download ``url`` to ``dest`` (progress bar), check ``expected_sha256`` (None: no check;
    ``source``: where it comes from), read a ``.gz`` through (corrupt: refused naming ``url``),
    rename into place. ``timeout`` (capped at ``limit.seconds``) bounds the wait for the server's
    answer; ``limit`` (default :meth:`SpeedLimit.from_env`) abandons a stalling or trickling
    download. A failure leaves nothing at or beside ``dest``."""
    limit = limit or SpeedLimit.from_env()
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.part-", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        # No byte for limit.seconds is too slow already, so no socket read waits longer.
        with os.fdopen(fd, "wb") as out, \
                urllib.request.urlopen(url, timeout=min(timeout, limit.seconds)) as resp:
            total = int(resp.headers.get("Content-Length") or 0) or None
            with tqdm(total=total, unit="B", unit_scale=True, desc=f"download {dest.name}") as bar:
                for block in read_blocks(resp, limit, url, dest):
                    out.write(block)
                    bar.update(len(block))
        if expected_sha256 is not None:
            verify(tmp, expected_sha256, source)
        if dest.suffix == ".gz":
            check_gzip(tmp, url)
        os.replace(tmp, dest)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise DataError(f"{url}: download failed: {err}") from err
        raise
    return dest


def read_blocks(resp: http.client.HTTPResponse, limit: SpeedLimit, url: str, dest: Path
                ) -> Iterator[bytes]:
    """``resp``'s body in blocks as they arrive (``read1``: ``read`` would wait for a whole block of
    a trickle); raises ``limit``'s error when fewer than ``limit.bytes_per_s`` bytes/s arrived over
    the last ``limit.seconds``, or when a read times out."""
    started, received = time.monotonic(), 0
    while True:
        try:
            block = resp.read1(BLOCK)
        except TimeoutError:
            raise limit.too_slow(url, dest, received, time.monotonic() - started) from None
        if not block:
            return
        yield block
        received += len(block)
        elapsed = time.monotonic() - started
        if elapsed >= limit.seconds:
            if received < limit.bytes_per_s * elapsed:
                raise limit.too_slow(url, dest, received, elapsed)
            started, received = time.monotonic(), 0


def locate(corpus: Corpus, split: str, lang: str, mirror: str | None, cache_dir: str | Path,
           allow_download: bool = True) -> Path:
    """Find (or fetch) the verified file of ``split`` in ``lang``; see the module doc."""
    if lang not in corpus.languages:
        raise DataError(f"corpus '{corpus.name}' has no language '{lang}' "
                        f"(it has: {', '.join(corpus.languages)})")
    name = corpus.file_name(split, lang)
    candidates = []
    root = mirror_dir(mirror)
    if root is not None:
        candidates.append(root / corpus.name / name)
    cached = Path(cache_dir) / corpus.name / name
    candidates.append(cached)
    for path in candidates:
        if path.is_file():
            verify(path, corpus.sha256[name])
            return path
    url = corpus.url(name)
    if url is None:
        raise DataError(f"{name} of corpus '{corpus.name}' not found in "
                        f"{' or '.join(str(c.parent) for c in candidates)}, and this corpus has "
                        f"no upstream URL: point prepare.mirror (or ${MIRROR_ENV}) at your copy. "
                        f"{corpus.note}")
    if not allow_download:
        raise DataError(f"{name} not found in {' or '.join(str(c.parent) for c in candidates)} "
                        f"and prepare.download is false")
    return download(url, cached, corpus.sha256[name])
