"""Evaluation: sacrebleu BLEU and chrF with signatures, the no-UNK subset, BLEU by source
length, and paired bootstrap significance against the no-attention baseline."""
from rnnsearch.evaluation.cell import TestSet, evaluate_cell, length_rows, score_system
from rnnsearch.evaluation.scores import corpus_scores, paired_bootstrap
from rnnsearch.evaluation.subsets import Bucket, length_buckets, no_unk_indices

__all__ = ["Bucket", "TestSet", "corpus_scores", "evaluate_cell", "length_buckets",
           "length_rows", "no_unk_indices", "paired_bootstrap", "score_system"]
