"""Evaluation: sacrebleu BLEU and chrF with signatures, the no-UNK subset, BLEU by source
length, paired bootstrap significance against the no-attention baseline, and unigram F1 by the
word's training frequency (Sennrich et al. 2016's rare-word measure)."""
