"""UNK replacement (Table 1's "UNK replaced" column): each ``<unk>`` becomes the source word its
attention weighs most, unless that is the source's ``</s>``."""
from __future__ import annotations

import numpy as np

from rnnsearch.decoding.unk import replace_unknowns


def test_each_unk_takes_its_most_attended_source_word_but_not_the_end_of_sentence():
    src = ["the", "Commons", "sits", "today"]           # attention's last column: </s>
    hyp = ["la", "<unk>", "siège", "<unk>", "<unk>"]
    attention = np.array([[0.7, 0.1, 0.1, 0.05, 0.05],   # "la": not an <unk>, kept
                          [0.1, 0.6, 0.1, 0.1, 0.1],     # -> Commons
                          [0.1, 0.1, 0.6, 0.1, 0.1],
                          [0.1, 0.1, 0.1, 0.3, 0.4],     # </s> most: stays <unk>
                          [0.05, 0.05, 0.1, 0.5, 0.3]])  # -> today
    assert replace_unknowns(hyp, src, attention) == ["la", "Commons", "siège", "<unk>", "today"]
    assert replace_unknowns(hyp, src, None) == hyp      # no attention: unchanged
