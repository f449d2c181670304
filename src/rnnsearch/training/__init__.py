"""Training: bucketed data, the LightningModule, callbacks and the per-cell driver."""
from rnnsearch.training.data import Batch, TranslationDataModule, bucket_batches, collate, read_pairs
from rnnsearch.training.module import TranslationTask
from rnnsearch.training.run import train_cell

__all__ = ["Batch", "TranslationDataModule", "TranslationTask", "bucket_batches", "collate",
           "read_pairs", "train_cell"]
