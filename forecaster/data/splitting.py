"""Chronological borders (row positions, never shuffled): train, validation, selection, test.

The validation period is cut in two. Its first part ("val") is what early stopping and the best
checkpoint watch; its later part ("selection") is seen by no fit: conformal intervals are
calibrated on it and models are compared on it (the promotion gate, the demo's pick, `compare`'s
order). The test split is only ever reported."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from forecaster.config import SplitConfig
from forecaster.errors import ConfigError


@dataclass(frozen=True)
class SplitBorders:
    """Rows [0, train_end) train, [train_end, selection_start) val (early stopping),
    [selection_start, val_end) selection (calibration, model choice), [val_end, test_end) test."""

    train_end: int
    selection_start: int
    val_end: int
    test_end: int

    def rows(self, split: str) -> tuple[int, int]:
        return {
            "train": (0, self.train_end),
            "val": (self.train_end, self.selection_start),
            "selection": (self.selection_start, self.val_end),
            "test": (self.val_end, self.test_end),
        }[split]

    @property
    def fitted_end(self) -> int:
        """First row no fit has seen (training and early stopping end here)."""
        return self.selection_start


def split_borders(index: pd.DatetimeIndex, config: SplitConfig) -> SplitBorders:
    n = len(index)
    if config.val_start is None:
        train_end = int(n * config.train)
        val_end = train_end + int(n * config.val)
        test_end = n
    else:
        train_end = int(index.searchsorted(pd.Timestamp(config.val_start)))
        val_end = int(index.searchsorted(pd.Timestamp(config.test_start)))
        test_end = n if config.end is None else int(index.searchsorted(pd.Timestamp(config.end)))
    selection_start = val_end - int((val_end - train_end) * config.selection)
    if not 0 < train_end < selection_start < val_end < test_end:
        raise ConfigError(
            f"split: {'dates' if config.val_start else 'fractions'} give empty splits on a series of "
            f"{n} rows from {index[0]} to {index[-1]} (train rows {train_end}, val rows "
            f"{selection_start - train_end}, selection rows {val_end - selection_start}, "
            f"test rows {test_end - val_end})"
        )
    return SplitBorders(train_end, selection_start, val_end, test_end)
