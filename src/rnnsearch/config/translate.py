"""The ``translate`` section of params.yaml: how the test set is decoded."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal, get_args

from rnnsearch.config.base import check_non_negative, check_positive, require
from rnnsearch.config.methods import DECODING_METHODS, method_names
from rnnsearch.config.search import LengthPenalty, SearchOptions  # noqa: F401 (its section)

Device = Literal["auto", "cpu", "cuda"]
DEVICES: tuple[str, ...] = get_args(Device)


def resolve_device(name: str, key: str = "translate.device") -> str:
    """The torch device ``name`` means here: ``auto`` is ``cuda`` if torch sees a CUDA GPU, else
    ``cpu``; ``cuda`` without one, or a name not in :data:`DEVICES`, is a :class:`ConfigError`."""
    import torch   # here, not at the top: validating params must not need torch

    require(name in DEVICES, key, f"must be one of {list(DEVICES)}, got {name!r}")
    has_gpu = torch.cuda.is_available()
    if name == "auto":
        return "cuda" if has_gpu else "cpu"
    require(name == "cpu" or has_gpu, key,
            f"cuda asked for, but torch {torch.__version__} sees no CUDA GPU on this machine "
            "(auto decodes on the GPU when there is one, else on the CPU)")
    return name


@dataclass(frozen=True)
class TranslateConfig:
    """Decoding of ``data/tokenized/test.src`` for each grid cell."""

    search: SearchOptions = field(default_factory=SearchOptions)
    # names of DECODING_METHODS (default: all), each written as its own system
    methods: tuple[str, ...] = field(default_factory=method_names)
    device: Device = "auto"                  # auto: cuda if torch sees a GPU, else cpu
    batch_size: int = 64                     # sentences decoded together on the CPU
    batch_size_cuda: int = 512               # ... and on a CUDA GPU (launch-bound: wider is faster)
    source_eos: bool = False                 # append </s> to each source (training does not)
    unk_replace: bool = True                 # also write <method>_unk outputs (attention models)
    attention: Literal["none", "samples", "all"] = "samples"  # matrices kept in attention.npz
    samples: int = 4                         # sentences drawn as alignment figures
    sample_max_len: int = 25                 # ... each at most this many source words
    speed_sentences: int = 50                # also time this many one at a time (0: skip)
    max_sentences: int = 0                   # decode only the first N test sentences (0: all)

    def check(self, key: str) -> None:
        for i, method in enumerate(self.methods):
            require(method in DECODING_METHODS, f"{key}.methods[{i}]",
                    f"must be one of {list(DECODING_METHODS)}, got {method!r}")
        require(len(set(self.methods)) == len(self.methods) and self.methods, f"{key}.methods",
                "must list each method once, at least one")
        check_positive(self, key, "batch_size", "batch_size_cuda", "sample_max_len")
        check_non_negative(self, key, "samples", "speed_sentences", "max_sentences")

    def check_runtime(self, key: str) -> None:
        """``device: cuda`` needs a GPU that torch can use on this machine."""
        resolve_device(self.device, f"{key}.device")

    def batch_size_for(self, device: str) -> int:
        """Sentences decoded together on ``device`` (``cpu`` or ``cuda``)."""
        return self.batch_size_cuda if device == "cuda" else self.batch_size


def method_options(search: SearchOptions, method: str) -> SearchOptions:
    """The options ``method`` decodes with: ``search`` as given, or, for a method that keeps one
    hypothesis (greedy), ``search`` with ``beam_size`` 1 and ``nbest`` 1."""
    if DECODING_METHODS[method].one_hypothesis:
        return dataclasses.replace(search, beam_size=1, nbest=1)
    return search
