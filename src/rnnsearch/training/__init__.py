"""Training: bucketed data, the LightningModule, callbacks and the per-cell driver."""
