"""The translation model: encoder + decoder behind the interface decoding relies on.

``encode`` once per batch, ``init_state``, then ``step`` per target word (pure: nothing cached on
the module), or ``forward`` for teacher forcing (``docs/contracts.md``, "The model interface")."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from rnnsearch.config.architectures import ARCHITECTURES
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.registry import load
from rnnsearch.data.savefile import save_atomically
from rnnsearch.errors import DataError
from rnnsearch.models.files import check_state_dict, read_torch_dict
from rnnsearch.models.rnn import orthogonal_init_
from rnnsearch.models.state import DecoderState, Memory


class Seq2Seq(nn.Module):
    """The encoder and decoder (RNNencdec, RNNsearch, Luong, Transformer) of ``config.model``'s
    entry of :data:`~rnnsearch.config.architectures.ARCHITECTURES`."""

    def __init__(self, config: ModelConfig, src_vocab: int, tgt_vocab: int) -> None:
        super().__init__()
        config.check("model")
        self.config, self.src_vocab, self.tgt_vocab = config, src_vocab, tgt_vocab
        architecture = ARCHITECTURES[config.model]
        self.encoder = load(architecture.encoder)(src_vocab, config)
        self.decoder = load(architecture.decoder)(tgt_vocab, config)
        if config.orthogonal_init and architecture.recurrent:
            for rnn in (self.encoder.rnn, *self.decoder.recurrent_modules()):
                orthogonal_init_(rnn)

    @property
    def has_attention(self) -> bool:
        return self.decoder.attention is not None

    def position_predictor_parameters(self) -> list[nn.Parameter]:
        """Local-p's window-centre predictor (``v_p``, ``W_p``); empty for every other model."""
        position = getattr(self.decoder.attention, "position", None)
        return list(position.parameters()) if position is not None else []

    def encode(self, src: Tensor, src_len: Tensor) -> Memory:
        """``src``: batch x src_len ids, ``src_len``: batch real lengths -> :class:`Memory`."""
        values, final, mask, lengths = self.encoder(src, src_len)
        return self.decoder.prepare_memory(values, final, mask, lengths)

    def init_state(self, memory: Memory) -> DecoderState:
        """The decoder state before the first target word."""
        return self.decoder.init_state(memory)

    def step(self, prev: Tensor, state: DecoderState, memory: Memory
             ) -> tuple[Tensor, DecoderState, Tensor | None]:
        """``prev``: batch ids -> logits batch x V, next state, weights batch x src_len or None."""
        return self.decoder.step(prev, state, memory)

    def forward(self, src: Tensor, src_len: Tensor, tgt_in: Tensor, features: bool = False
                ) -> tuple[Tensor, Tensor | None]:
        """Teacher forcing: logits batch x tgt_len x V (``features``: ``output_layer``'s input, ...
        x O, for training.fused_loss), weights batch x tgt_len x src_len or None."""
        memory = self.encode(src, src_len)
        return self.decoder(tgt_in, memory, self.init_state(memory), features=features)

    @property
    def output_layer(self) -> nn.Linear:
        """The final linear layer to the target vocabulary (O -> V)."""
        return self.decoder.output


def build_model(config: ModelConfig, src_vocab: int, tgt_vocab: int) -> Seq2Seq:
    """A freshly initialised model; ``config`` is validated first (errors name the key)."""
    return Seq2Seq(config, src_vocab, tgt_vocab)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def save_model(model: Seq2Seq, path: str | Path) -> None:
    """Write ``{"config", "src_vocab", "tgt_vocab", "state_dict"}`` (weights only, CPU tensors)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    data = {"config": model.config.to_dict(), "src_vocab": model.src_vocab,
            "tgt_vocab": model.tgt_vocab, "state_dict": state}
    # Atomic (temporary folder + rename): a kill or full disk never leaves half a file. Inside, the
    # file is always model.pt, as torch.save names the archive's root folder after the file, so the
    # same weights give the same bytes (and DVC hash) for model.pt and model.pt.partial alike.
    save_atomically(path, lambda file: torch.save(data, file), inner_name="model.pt")


MODEL_FILE = "a model file of the train stage"
RETRAIN = "rerun the train stage that writes it (dvc repro train@<model>-<max_len>)"


def _vocab_size(path: Path, data: dict[str, Any], side: str, state: dict[str, Tensor]) -> int:
    """The ``src``/``tgt`` vocabulary size: saved, or the embedding's row count."""
    if f"{side}_vocab" in data:
        return int(data[f"{side}_vocab"])
    weight = state.get(f"{'encoder' if side == 'src' else 'decoder'}.embedding.weight")
    if weight is None:
        raise DataError(f"{path}: no '{side}_vocab' and no embedding weights: not {MODEL_FILE}; "
                        f"{RETRAIN}")
    return weight.shape[0]


def load_model(path: str | Path, map_location: Any = "cpu") -> Seq2Seq:
    """Rebuild a model written by :func:`save_model`, in eval mode; an unusable file (missing,
    truncated, not a model...) raises :class:`~rnnsearch.data.textio.DataError` naming ``path``."""
    path = Path(path)
    data = read_torch_dict(path, ("config", "state_dict"), MODEL_FILE, RETRAIN)
    state = check_state_dict(path, data["state_dict"], MODEL_FILE, RETRAIN)
    sizes = [_vocab_size(path, data, side, state) for side in ("src", "tgt")]
    model = build_model(ModelConfig.from_dict(data["config"], f"{path}:config"), *sizes)
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        raise DataError(f"{path}: its weights do not fit its own config "
                        f"({_first_line(err)}); {RETRAIN}") from err
    return model.to(map_location).eval()


def _first_line(err: BaseException) -> str:
    """The first informative line of a ``load_state_dict`` error."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[1] if len(lines) > 1 else (lines[0] if lines else type(err).__name__)
