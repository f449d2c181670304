"""Evaluation: sacrebleu BLEU and chrF with signatures, the no-UNK subset, BLEU by source
length, paired bootstrap significance against the no-attention baseline, and unigram F1 by the
word's training frequency (Sennrich et al. 2016's rare-word measure)."""
from rnnsearch.evaluation.cell import TestSet, evaluate_cell, length_rows, score_system
from rnnsearch.evaluation.rare_words import TrainingWords, unigram_f1, unit_words
from rnnsearch.evaluation.scores import corpus_scores, paired_bootstrap
from rnnsearch.evaluation.subsets import Bucket, length_buckets, no_unk_indices

__all__ = ["Bucket", "TestSet", "TrainingWords", "corpus_scores", "evaluate_cell",
           "length_buckets", "length_rows", "no_unk_indices", "paired_bootstrap", "score_system",
           "unigram_f1", "unit_words"]
