"""The LM -> decoder contract (``docs/contracts.md``, "LM to decoder").

Beside the decoder it fills, so pretrain_lm (writer) and train (reader) share it without
translation training importing the LM package. ``embedding`` and ``rnn`` weights must fit exactly,
but only the previous word's columns of ``rnn.weight_ih_l0`` are copied and deeper decoder layers
keep their init; the LM's ``output`` is never copied (decoders' output layers read other states)."""
from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from rnnsearch.errors import DataError
from rnnsearch.models.files import check_state_dict, read_torch_dict
from rnnsearch.models.rnn import RNN_CLASSES


def save_decoder_init(model: nn.Module, path: str | Path) -> None:
    """Write ``{"meta", "state_dict"}`` of ``model`` (a :class:`rnnsearch.lm.model.LanguageModel`)
    to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    torch.save({"meta": model.meta(), "state_dict": state}, tmp)
    os.replace(tmp, path)


def check_shapes(name: str, lm_shape: tuple[int, ...], decoder_shape: tuple[int, ...],
                 hint: str = "") -> None:
    """Raise :class:`DataError` naming both shapes unless they are equal."""
    if tuple(lm_shape) != tuple(decoder_shape):
        raise DataError(f"{name}: the language model has shape {tuple(lm_shape)} but the decoder "
                        f"has {tuple(decoder_shape)}{' (' + hint + ')' if hint else ''}")


def rnn_kind(rnn: nn.Module) -> str:
    """``lstm``/``gru``/``rnn`` for an ``nn.LSTM``/``nn.GRU``/``nn.RNN``."""
    for name, cls in RNN_CLASSES.items():
        if type(rnn) is cls:
            return name
    raise TypeError(f"the decoder's rnn is a {type(rnn).__name__}, not one of nn.LSTM/GRU/RNN")


def check_compatible(meta: dict, state: dict[str, torch.Tensor], decoder: nn.Module) -> None:
    """Cell type, vocabulary size, E and H of the LM must be the decoder's (errors name shapes)."""
    hh = "rnn.weight_hh_l0"
    ours = rnn_kind(decoder.rnn)
    if meta["cell"] != ours:
        raise DataError(f"cell type: the language model is an {meta['cell'].upper()} "
                        f"({hh} shape {tuple(state[hh].shape)}) but the decoder is a "
                        f"{ours.upper()} ({hh} shape {tuple(decoder.rnn.weight_hh_l0.shape)})")
    check_shapes("embedding.weight", state["embedding.weight"].shape,
                 decoder.embedding.weight.shape, "vocabulary size x embedding size")
    check_shapes(hh, state[hh].shape, decoder.rnn.weight_hh_l0.shape,
                 "gates*hidden size x hidden size")


def _copy_one(name: str, source: torch.Tensor, target: torch.Tensor) -> int:
    """Copy ``source`` into ``target`` per the contract; return the number of elements copied."""
    if name == "rnn.weight_ih_l0":  # G*H x (E [+ context]): the first E columns read the word
        check_shapes(name + " (previous-word columns)", source.shape,
                     (target.shape[0], min(source.shape[1], target.shape[1])))
        target[:, : source.shape[1]] = source
        return source.numel()
    check_shapes(name, source.shape, target.shape)
    target.copy_(source)
    return source.numel()


NOT_COPIED = ("output.",)   # the LM's softmax: it reads a state no decoder's output layer reads
LM_FILE = "a decoder_init.pt of the pretrain_lm stage"
RERUN_LM = "rerun the pretrain_lm stage (dvc repro pretrain_lm)"
META_KEYS = ("cell",)
STATE_KEYS = ("embedding.weight", "rnn.weight_hh_l0")


def read_decoder_init(path: str | Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """``(meta, state_dict)`` of ``decoder_init.pt``; :class:`DataError` if unreadable/partial."""
    saved = read_torch_dict(path, ("meta", "state_dict"), LM_FILE, RERUN_LM)
    meta, state = saved["meta"], check_state_dict(path, saved["state_dict"], LM_FILE, RERUN_LM)
    for key in META_KEYS:
        if not isinstance(meta, dict) or key not in meta:
            raise DataError(f"{path}: no 'meta.{key}', not {LM_FILE}; {RERUN_LM}")
    for key in STATE_KEYS:
        if key not in state:
            raise DataError(f"{path}: no 'state_dict.{key}', not {LM_FILE}; {RERUN_LM}")
    return meta, state


def load_lm_into_decoder(decoder: nn.Module, path: str | Path) -> float:
    """Initialise ``decoder`` from ``decoder_init.pt``; return the fraction of its parameters
    (elements) that came from the LM. Raises :class:`DataError` naming both shapes on a mismatch."""
    meta, state = read_decoder_init(path)
    check_compatible(meta, state, decoder)
    params = dict(decoder.named_parameters())
    copied = 0
    with torch.no_grad():
        for name, source in state.items():
            if name in params and not name.startswith(NOT_COPIED):
                copied += _copy_one(name, source, params[name])
    total = sum(p.numel() for p in params.values())
    return copied / total if total else 0.0
