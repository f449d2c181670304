"""Word alignment: IBM Model 1 (and a diagonal-preferring variant) trained by EM, symmetrisation,
attention as alignment by forced decoding, and the alignment error rate against human links."""
