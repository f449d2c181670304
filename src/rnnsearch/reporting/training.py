"""How long each cell trained and which ``train.budget`` limit stopped it; a warning when the
cells Table 1 compares trained unequally (a difference would not be the model's alone)."""
from __future__ import annotations

from typing import Any, Mapping

from rnnsearch.config.train import BudgetConfig
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.reporting.tables import Table, fmt

LIMITS = {"max_steps": "train.budget.max_steps", "max_minutes": "train.budget.max_minutes",
          "early_stopping": "train.budget.early_stopping_patience",
          "max_epochs": "train.budget.max_epochs"}


def stop_reason(train: Mapping[str, Any], budget: BudgetConfig) -> str | None:
    """The :data:`LIMITS` key that ended a cell's training: its recorded ``stop_reason``, else
    read from steps, minutes and epochs against ``budget`` in Lightning's order of checks (early
    stopping last, the only other way a run ends); None for a run with no step count."""
    if train.get("stop_reason"):
        return train["stop_reason"]
    steps, minutes = train.get("steps"), train.get("train_minutes")
    if steps is None:
        return None
    if 0 < budget.max_steps <= steps:
        return "max_steps"
    if 0 < budget.max_minutes <= (minutes or 0.0):
        return "max_minutes"
    if train.get("epochs", 0.0) >= budget.max_epochs or not budget.early_stopping_patience:
        return "max_epochs"
    return "early_stopping"


def trained_cells(inputs: ReportInputs) -> list[str]:
    """The report's cells that have training metrics, in the tables' order."""
    return [cell for cell in inputs.ordered_cells() if cell in inputs.train]


def training_table(inputs: ReportInputs, budget: BudgetConfig) -> Table | None:
    """Steps, best step, epochs, minutes, tokens/s and stopping limit per cell (None: untrained)."""
    cells = trained_cells(inputs)
    if not cells:
        return None
    rows = []
    for cell in cells:
        train = inputs.train[cell]
        reason = stop_reason(train, budget)
        rows.append((cell, fmt(train.get("steps")), fmt(train.get("best_step")),
                     fmt(train.get("epochs")), fmt(train.get("train_minutes"), 1),
                     fmt(train.get("tokens_per_s"), 0), LIMITS.get(reason, fmt(reason))))
    notes = ("Stopped by: the first limit of train.budget the run reached; a run that did not "
             "record it is read from its steps, epochs and minutes against the budget.",
             *unequal_training(inputs, budget))
    return Table("Training (train stage)",
                 ("Cell", "Steps", "Best step", "Epochs", "Minutes", "Tokens/s", "Stopped by"),
                 tuple(rows), notes)


def unequal_training(inputs: ReportInputs, budget: BudgetConfig) -> tuple[str, ...]:
    """A warning when the cells trained different step counts or stopped at different limits."""
    cells = trained_cells(inputs)
    runs = {cell: (inputs.train[cell].get("steps"), stop_reason(inputs.train[cell], budget))
            for cell in cells}
    if len(set(runs.values())) <= 1:
        return ()
    shown = ", ".join(f"{cell} {fmt(steps)} steps ({LIMITS.get(reason, fmt(reason))})"
                      for cell, (steps, reason) in runs.items())
    return (f"Warning: the cells trained unequally ({shown}); a difference between them is "
            f"partly the training budget's, not the model's alone.",)
