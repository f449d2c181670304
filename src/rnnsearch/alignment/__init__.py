"""Word alignment: IBM Model 1 (and a diagonal-preferring variant) trained by EM, symmetrisation,
attention as alignment by forced decoding, and the alignment error rate against human links."""

Link = tuple[int, int]      # (English position, French position), 0-based
