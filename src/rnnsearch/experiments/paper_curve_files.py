"""The files of the paper-width curve (:mod:`rnnsearch.experiments.paper_curve`): what ``pack``
puts in the pack, what ``run`` writes and ``report`` reads."""
from __future__ import annotations

import hashlib
from pathlib import Path

PACK = "pack.tar.xz"
MANIFEST = "manifest.json"
PARAMS = "params.yaml"
TOKENIZED = tuple(f"{split}.{side}" for split in ("train", "dev", "test") for side in ("src", "tgt"))
VOCABS = ("vocab.src.txt", "vocab.tgt.txt")
PACKED = TOKENIZED + VOCABS + (PARAMS, MANIFEST)
MAX_LEN = 50                                   # the -50 cells
RESULTS = "run.json"


def hyp_file(cell: str, method: str) -> str:
    """The name of one cell's hypotheses for one decoding method."""
    return f"{cell}.{method}.tok.txt"


def sha256_of(path: Path) -> str:
    """The file's sha256, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
