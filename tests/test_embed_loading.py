"""Loading the embed stage's aligned vectors into a model: mapping, coverage, shape errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rnnsearch.embeddings.loading import init_embedding, load_vocab_vectors
from rnnsearch.errors import DataError


@pytest.fixture
def vectors(tmp_path):
    """Six rows (4 specials + 2 words), d = 3; only the two words and </s> have vectors."""
    rows = np.zeros((6, 3), dtype=np.float32)
    rows[3], rows[4], rows[5] = [1, 1, 1], [1, 2, 3], [4, 5, 6]
    mask = np.array([False, False, False, True, True, True])
    np.save(tmp_path / "v.npy", rows)
    np.save(tmp_path / "m.npy", mask)
    return tmp_path / "v.npy", tmp_path / "m.npy"


def test_load_maps_rows_and_reports_coverage(vectors):
    tensor, coverage = load_vocab_vectors(*vectors, vocab_size=6, dim=3)
    assert tensor.shape == (6, 3) and tensor.dtype == torch.float32
    assert tensor[5].tolist() == [4.0, 5.0, 6.0]
    assert coverage == 1.0  # both ordinary words (ids 4, 5) found; specials do not count


def test_init_embedding_overwrites_only_found_rows(vectors):
    embedding = nn.Embedding(6, 3)
    before = embedding.weight.detach().clone()
    np.save(vectors[1], np.array([False, False, False, True, False, True]))
    coverage = init_embedding(embedding, *vectors)
    assert coverage == 0.5
    assert embedding.weight[5].tolist() == [4.0, 5.0, 6.0]
    assert torch.equal(embedding.weight[4], before[4]) and torch.equal(embedding.weight[0], before[0])


@pytest.mark.parametrize("vocab_size, dim", [(6, 4), (7, 3)])
def test_shape_mismatch_names_both_shapes(vectors, vocab_size, dim):
    with pytest.raises(DataError) as err:
        load_vocab_vectors(*vectors, vocab_size=vocab_size, dim=dim)
    assert "(6, 3)" in str(err.value) and str((vocab_size, dim)) in str(err.value)
    with pytest.raises(DataError, match=r"\(6, 3\).*\(%d, %d\)" % (vocab_size, dim)):
        init_embedding(nn.Embedding(vocab_size, dim), *vectors)
