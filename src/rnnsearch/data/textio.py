"""Reading and writing parallel text safely.

Readers decode strictly as UTF-8 (gzip or plain); a bad byte, unequal line counts, a TSV line
without exactly one tab, an empty, missing, truncated or corrupt file is a :class:`DataError` naming
the file (and line). :func:`atomic_dir` and :func:`atomic_write_text` rename a temporary sibling
into place on success, so a failed stage never leaves half-written outputs."""
from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Sequence

from rnnsearch.errors import DataError


def _open_binary(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


@contextlib.contextmanager
def unreadable_as_data_error(name: str | Path) -> Iterator[None]:
    """Turn the errors of reading a file (or a damaged gzip stream, whose ``zlib.error`` is not
    an ``OSError``) into a :class:`DataError` naming ``name``."""
    try:
        yield
    except (zlib.error, gzip.BadGzipFile) as err:
        raise DataError(f"{name}: corrupt gzip data ({err})") from err
    except (OSError, EOFError) as err:
        raise DataError(f"{name}: cannot read: {err}") from err


def check_gzip(path: Path, name: str | Path) -> None:
    """Read the gzip file ``path`` through to its end; a corrupt or truncated stream raises
    :class:`DataError` naming ``name`` (e.g. the URL it came from)."""
    with unreadable_as_data_error(name), gzip.open(path, "rb") as handle:
        while handle.read(1 << 20):
            pass


BOM = "\ufeff"


def decode_lines(handle: BinaryIO, name: str | Path) -> Iterator[str]:
    """A binary stream's lines as strict UTF-8, without endings or a leading BOM. Lines end at
    ``\n`` (or ``\r\n``) only, not where :meth:`str.splitlines` breaks (U+2028, ``\x0b``, ...), so
    line ``i`` is sentence ``i``. Bad UTF-8 is a :class:`DataError` naming ``name`` and the line."""
    for number, raw in enumerate(handle, 1):
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as err:
            raise DataError(f"{name}:{number}: invalid UTF-8 ({err.reason} at byte "
                            f"{err.start})") from err
        yield line.removeprefix(BOM) if number == 1 else line


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (``.gz`` or plain), without their line endings, as
    :func:`decode_lines` reads them; an empty or missing file is an error."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    with unreadable_as_data_error(path), _open_binary(path) as handle:
        lines = list(decode_lines(handle, path))
    if not lines:
        raise DataError(f"{path}: file is empty")
    return lines


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> tuple[list[str], list[str]]:
    """Both sides of a parallel corpus; their line counts must agree."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(f"line counts differ: {src_path} has {len(src)} lines, "
                        f"{tgt_path} has {len(tgt)}")
    return src, tgt


def read_tsv_pairs(path: str | Path) -> tuple[list[str], list[str]]:
    """Both sides of a tab-separated parallel file, ``source<TAB>target`` on each line; a line
    with no tab or more than one is an error naming the file and line."""
    src, tgt = [], []
    for number, line in enumerate(read_lines(path), 1):
        tabs = line.count("\t")
        if tabs != 1:
            raise DataError(f"{path}:{number}: expected source<TAB>target (exactly one tab), "
                            f"found {tabs} tabs")
        source, target = line.split("\t")
        src.append(source)
        tgt.append(target)
    return src, tgt


def write_lines(path: str | Path, lines: Sequence[str]) -> None:
    """Write one line per item (newline-terminated)."""
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(line + "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Yield an empty temporary directory that replaces ``target`` only if the block succeeds."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    tmp.chmod(0o777 & ~_umask())
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    backup = target.with_name(f".{target.name}.old")
    if target.exists():
        shutil.rmtree(backup, ignore_errors=True)
        target.rename(backup)
    tmp.rename(target)
    shutil.rmtree(backup, ignore_errors=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON, atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def write_csv(path: str | Path, rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` (dicts with the same keys) as a CSV file with a header, atomically."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


def read_json(path: str | Path) -> Any:
    """A JSON file's content; missing, truncated or not JSON: a :class:`DataError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: not valid JSON ({err})") from err
