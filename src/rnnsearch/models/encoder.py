"""The encoder: word embeddings and a (bi)directional RNN over packed sequences, so that a
sentence's annotations and final state do not depend on the batch's padding."""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from rnnsearch.config.model import ModelConfig
from rnnsearch.data.vocab import PAD_ID
from rnnsearch.models.rnn import make_rnn


class Encoder(nn.Module):
    """Source ids -> annotations ``h_j`` (``[h_fwd; h_bwd]`` when bidirectional) and final state."""

    def __init__(self, vocab_size: int, config: ModelConfig) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, config.embedding_size, padding_idx=PAD_ID)
        self.dropout = nn.Dropout(config.dropout)
        self.rnn = make_rnn(config.cell, config.embedding_size, config.hidden_size,
                            config.encoder_layers, config.bidirectional, config.dropout)
        self.output_size = config.encoder_output_size

    def forward(self, src: Tensor, src_len: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``src``: batch x src_len ids; ``src_len``: batch. Returns annotations batch x src_len x
        D, the last layer's final state batch x D (``[h_fwd_N; h_bwd_1]`` if bidirectional), mask
        batch x src_len and lengths clamped to >= 1 (an empty source gets one padding position)."""
        lengths = src_len.clamp(min=1)      # on the host (training batches) or the device
        embedded = self.dropout(self.embedding(src))                     # batch x src_len x E
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        lengths = _on_device(lengths, src.device)
        packed_out, final = self.rnn(packed)
        values, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=src.size(1))
        if isinstance(final, tuple):                                     # LSTM: (h_n, c_n)
            final = final[0]
        directions = 2 if self.rnn.bidirectional else 1
        last = final.view(self.rnn.num_layers, directions, src.size(0), -1)[-1]  # dirs x batch x H
        summary = last.transpose(0, 1).reshape(src.size(0), -1)          # batch x D
        positions = torch.arange(src.size(1), device=src.device)
        mask = positions.unsqueeze(0) < lengths.unsqueeze(1)             # batch x src_len
        return values, summary, mask, lengths


def _on_device(lengths: Tensor, device: torch.device) -> Tensor:
    """``lengths`` on ``device``; host -> GPU via pinned memory (a plain copy waits for the GPU)."""
    if lengths.device == device:
        return lengths
    if device.type == "cuda" and lengths.device.type == "cpu":
        return lengths.pin_memory().to(device, non_blocking=True)
    return lengths.to(device)
