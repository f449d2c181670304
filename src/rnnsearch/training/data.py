"""Parallel data for training: encoded pairs, length-bucketed batches, a LightningDataModule.

Bucketing: seeded per-epoch shuffle, sort by length, batches of at most ``batch_size`` pairs closed
before padding exceeds ``max_padding``, batch order shuffled. Under DDP each rank takes every
``world_size``-th batch (cut to a multiple: lockstep), hence ``use_distributed_sampler=False``."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Sampler

from rnnsearch.data.textio import read_lines
from rnnsearch.data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocabulary
from rnnsearch.errors import DataError
from rnnsearch.training.resume import ResumableLoader
from rnnsearch.training.supervision import (Links, check_positions, link_distribution,
                                            links_file, read_links)

Pair = tuple[list[int], list[int]]


@dataclass(frozen=True)
class Batch:
    """A padded batch. ``src_len`` and ``target_tokens`` stay on the host when the ids move to a
    GPU: the encoder packs by host lengths, the loss divides by a host count (no mid-step wait)."""

    src: torch.Tensor       # batch x src_len ids
    src_len: torch.Tensor   # batch (host)
    tgt_in: torch.Tensor    # batch x tgt_len: <s> y_1 .. y_n (padded)
    tgt_out: torch.Tensor   # batch x tgt_len: y_1 .. y_n </s> (padded)
    target_tokens: int      # real target tokens (``</s>`` included), counted when collated
    links: torch.Tensor | None = None  # batch x tgt_len x src_len: normalised links (supervision)

    def _tensors(self, *names: str) -> tuple[str, ...]:
        return names + (("links",) if self.links is not None else ())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        """The id tensors (and links) on ``device`` (``non_blocking`` from pinned memory)."""
        return replace(self, **{name: getattr(self, name).to(device, non_blocking=non_blocking)
                                for name in self._tensors("src", "tgt_in", "tgt_out")})

    def pin_memory(self) -> "Batch":
        """Page-locked host copies, so that copies to a GPU run without holding the host."""
        return replace(self, **{name: getattr(self, name).pin_memory()
                                for name in self._tensors("src", "src_len", "tgt_in", "tgt_out")})


def read_pairs(data_dir: str | Path, split: str, src_vocab: Vocabulary, tgt_vocab: Vocabulary,
               max_len: int = 0) -> tuple[list[Pair], list[str]]:
    """Encode ``<split>.src``/``<split>.tgt``; drop pairs with an empty side or a side over
    ``max_len`` tokens (0: no limit). Returns the pairs and the kept target lines (references)."""
    pairs, references, _ = read_numbered_pairs(data_dir, split, src_vocab, tgt_vocab, max_len)
    return pairs, references


def read_numbered_pairs(data_dir: str | Path, split: str, src_vocab: Vocabulary,
                        tgt_vocab: Vocabulary, max_len: int = 0
                        ) -> tuple[list[Pair], list[str], list[int]]:
    """:func:`read_pairs`, and the 0-based line number of each kept pair."""
    data_dir = Path(data_dir)
    src_path, tgt_path = data_dir / f"{split}.src", data_dir / f"{split}.tgt"
    for path in (src_path, tgt_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing (run the tokenize stage first)")
    src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)   # split on "\n" only
    if len(src_lines) != len(tgt_lines):
        raise DataError(f"{src_path} has {len(src_lines)} lines but {tgt_path} has {len(tgt_lines)}")
    pairs, references, numbers = [], [], []
    for number, (src_line, tgt_line) in enumerate(zip(src_lines, tgt_lines)):
        src, tgt = src_line.split(), tgt_line.split()
        if not src or not tgt or (max_len and max(len(src), len(tgt)) > max_len):
            continue
        pairs.append((src_vocab.encode(src), tgt_vocab.encode(tgt)))
        references.append(" ".join(tgt))
        numbers.append(number)
    return pairs, references, numbers


def bucket_batches(lengths: Sequence[tuple[int, int]], batch_size: int, max_padding: float,
                   rng: random.Random) -> list[list[int]]:
    """Index batches of similar (source, target) lengths, in shuffled order."""
    order = list(range(len(lengths)))
    rng.shuffle(order)                                  # random order among equal lengths
    order.sort(key=lambda i: lengths[i])
    batches, current, longest = [], [], (0, 0)
    for index in order:
        grown = (max(longest[0], lengths[index][0]), max(longest[1], lengths[index][1]))
        members = current + [index]
        real = sum(sum(lengths[i]) for i in members)
        padding = 1 - real / (len(members) * (grown[0] + grown[1]))
        if current and (len(current) == batch_size or padding > max_padding):
            batches.append(current)
            current, grown = [index], lengths[index]
        else:
            current = members
        longest = grown
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


class BucketBatchSampler(Sampler[list[int]]):
    """Yields this rank's bucketed batches; reshuffles per epoch from ``seed + epoch``."""

    def __init__(self, lengths: Sequence[tuple[int, int]], batch_size: int, max_padding: float,
                 seed: int, shuffle: bool = True, rank: int = 0, world_size: int = 1) -> None:
        self.lengths, self.batch_size, self.max_padding = lengths, batch_size, max_padding
        self.seed, self.shuffle, self.rank, self.world_size = seed, shuffle, rank, world_size
        self.epoch = 0
        self._cache: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Called by Lightning at every epoch start (``ResumableLoader`` shows it the way)."""
        self.epoch = epoch

    def _batches(self) -> list[list[int]]:
        epoch = self.epoch if self.shuffle else 0
        if self._cache is None or self._cache[0] != epoch:
            rng = random.Random(self.seed + epoch)
            batches = bucket_batches(self.lengths, self.batch_size, self.max_padding, rng)
            # training ranks must step in lockstep: every rank gets as many batches
            usable = len(batches) - len(batches) % self.world_size if self.shuffle else len(batches)
            self._cache = (epoch, batches[self.rank: usable: self.world_size])
        return self._cache[1]

    def __iter__(self) -> Iterator[list[int]]:
        # a generator: batches are chosen at the first next(), after Lightning set a restored epoch
        yield from self._batches()

    def __len__(self) -> int:
        return len(self._batches())


def collate(pairs: Sequence[Pair]) -> Batch:
    """Pad pairs; the target gets ``<s>`` prepended (input) and ``</s>`` appended (output)."""
    src_len = torch.tensor([len(s) for s, _ in pairs])
    tgt_len = max(len(t) for _, t in pairs) + 1
    src = torch.full((len(pairs), int(src_len.max())), PAD_ID, dtype=torch.long)
    tgt_in = torch.full((len(pairs), tgt_len), PAD_ID, dtype=torch.long)
    tgt_out = torch.full((len(pairs), tgt_len), PAD_ID, dtype=torch.long)
    for row, (s, t) in enumerate(pairs):
        src[row, : len(s)] = torch.tensor(s)
        tgt_in[row, : len(t) + 1] = torch.tensor([BOS_ID] + t)
        tgt_out[row, : len(t) + 1] = torch.tensor(t + [EOS_ID])
    return Batch(src, src_len, tgt_in, tgt_out, sum(len(t) + 1 for _, t in pairs))


def collate_linked(items: Sequence[tuple[list[int], list[int], Links]]) -> Batch:
    """:func:`collate` of (source, target, links) triples, with the links' distribution."""
    batch = collate([(s, t) for s, t, _ in items])
    links = link_distribution([l for _, _, l in items], batch.src.size(1), batch.tgt_in.size(1))
    return replace(batch, links=links)


def round_up(length: int, multiple: int) -> int:
    """``length`` rounded up to a multiple of ``multiple`` (at least one multiple)."""
    return max(multiple, -(-length // multiple) * multiple)


def pad_to_shape(batch: Batch, rows: int, multiple: int) -> Batch:
    """``batch`` padded to ``rows`` sentences and lengths rounded up to ``multiple`` (src rows x
    S', tgt_in/tgt_out rows x T'); added rows have an empty source and no target words."""
    count, src_len, tgt_len = batch.src.size(0), batch.src.size(1), batch.tgt_in.size(1)
    if count > rows:
        raise ValueError(f"a batch of {count} sentences does not fit the {rows} rows captured")
    extra_rows = rows - count
    src_pad = round_up(src_len, multiple) - src_len
    tgt_pad = round_up(tgt_len, multiple) - tgt_len

    def pad(ids: torch.Tensor, columns: int) -> torch.Tensor:   # rows x (length + columns)
        return F.pad(ids, (0, columns, 0, extra_rows), value=PAD_ID)

    lengths = F.pad(batch.src_len, (0, extra_rows), value=0)
    links = None if batch.links is None else \
        F.pad(batch.links, (0, src_pad, 0, tgt_pad, 0, extra_rows))   # rows x T' x S'
    return Batch(pad(batch.src, src_pad), lengths, pad(batch.tgt_in, tgt_pad),
                 pad(batch.tgt_out, tgt_pad), batch.target_tokens, links)


class TranslationDataModule(pl.LightningDataModule):
    """``<data_dir>/{train,dev}.{src,tgt}`` and ``vocab.{src,tgt}.txt`` as bucketed batches."""

    def __init__(self, data_dir: str | Path, max_len: int, batch_size: int = 64,
                 max_padding: float = 0.1, dev_max_len: int = 0, seed: int = 1234,
                 links_dir: str | Path | None = None) -> None:
        """``links_dir``: the align stage's ``{train,dev}.links`` folder, whose links the
        batches then carry (supervised attention); None: nothing is read."""
        super().__init__()
        self.data_dir, self.max_len, self.batch_size = Path(data_dir), max_len, batch_size
        self.max_padding, self.dev_max_len, self.seed = max_padding, dev_max_len, seed
        self.links_dir = None if links_dir is None else Path(links_dir)
        self.src_vocab = Vocabulary.load(self.data_dir / "vocab.src.txt")
        self.tgt_vocab = Vocabulary.load(self.data_dir / "vocab.tgt.txt")
        self.train_pairs: list[Pair] = []
        self.train_links: list[Links] | None = None   # aligned with train_pairs (links_dir)
        self.links_meta: dict = {}                     # the links' meta.json (links_dir)
        self.dev_pairs: list[Pair] = []
        self.dev_links: list[Links] | None = None     # aligned with dev_pairs (links_dir)
        self.dev_references: list[str] = []   # tokenised dev targets, aligned with dev_pairs

    def setup(self, stage: str | None = None) -> None:
        if not self.train_pairs:
            self.train_pairs, _, numbers = read_numbered_pairs(
                self.data_dir, "train", self.src_vocab, self.tgt_vocab, self.max_len)
            self.dev_pairs, self.dev_references, dev_numbers = read_numbered_pairs(
                self.data_dir, "dev", self.src_vocab, self.tgt_vocab, self.dev_max_len)
            if self.links_dir is not None:
                self.train_links = self._kept_links(self.links_dir, "train", numbers,
                                                    self.train_pairs)
                self.dev_links = self._kept_links(self.links_dir, "dev", dev_numbers,
                                                  self.dev_pairs)
            if not self.train_pairs:
                raise DataError(f"{self.data_dir}/train.*: no pair of at most {self.max_len} tokens")

    def _kept_links(self, links_dir: Path, split: str, numbers: list[int], pairs: list[Pair]
                    ) -> list[Links]:
        """``split``'s links of the kept ``pairs`` (``numbers``: their lines), length-checked."""
        lines = len(read_lines(self.data_dir / f"{split}.src"))
        links, self.links_meta = read_links(links_dir, split, lines)
        kept = [links[n] for n in numbers]
        where = links_file(links_dir, split)
        for number, (src, tgt), pair in zip(numbers, pairs, kept):
            check_positions(pair, len(src), len(tgt), f"{where}:{number + 1}")
        return kept

    def _loader(self, pairs: list[Pair], shuffle: bool, links: list[Links] | None = None
                ) -> DataLoader:
        rank, world = 0, 1
        if self.trainer is not None:
            rank, world = self.trainer.global_rank, self.trainer.world_size
        sampler = BucketBatchSampler([(len(s), len(t)) for s, t in pairs], self.batch_size,
                                     self.max_padding, self.seed, shuffle, rank, world)
        dataset: Sequence = pairs
        collate_fn: Callable[[Sequence], Batch] = collate
        if links is not None:   # the same batches, with their links
            dataset, collate_fn = [(s, t, l) for (s, t), l in zip(pairs, links)], collate_linked
        if shuffle:   # training: its place in the epoch travels in last.ckpt (exact resume)
            return ResumableLoader(dataset, sampler, collate_fn=collate_fn)
        return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate_fn)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_pairs, shuffle=True, links=self.train_links)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.dev_pairs, shuffle=False, links=self.dev_links)

    def transfer_batch_to_device(self, batch: Batch, device: torch.device, dataloader_idx: int) -> Batch:
        """To a GPU via pinned memory, not waiting (kernels queue behind the copy); CPU: as is."""
        if device.type == "cuda":
            return batch.pin_memory().to(device, non_blocking=True)
        return batch.to(device)
