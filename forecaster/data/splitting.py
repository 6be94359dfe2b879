"""Chronological train/validation/test borders (row positions, never shuffled)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from forecaster.config import SplitConfig
from forecaster.errors import ConfigError


@dataclass(frozen=True)
class SplitBorders:
    """Rows [0, train_end) train, [train_end, val_end) val, [val_end, test_end) test."""

    train_end: int
    val_end: int
    test_end: int

    def rows(self, split: str) -> tuple[int, int]:
        return {
            "train": (0, self.train_end),
            "val": (self.train_end, self.val_end),
            "test": (self.val_end, self.test_end),
        }[split]


def split_borders(index: pd.DatetimeIndex, config: SplitConfig) -> SplitBorders:
    n = len(index)
    if config.val_start is None:
        train_end = int(n * config.train)
        val_end = train_end + int(n * config.val)
        return SplitBorders(train_end, val_end, n)
    train_end = int(index.searchsorted(pd.Timestamp(config.val_start)))
    val_end = int(index.searchsorted(pd.Timestamp(config.test_start)))
    test_end = n if config.end is None else int(index.searchsorted(pd.Timestamp(config.end)))
    if not 0 < train_end < val_end < test_end:
        raise ConfigError(
            f"split: dates give empty splits on a series from {index[0]} to {index[-1]} "
            f"(train rows {train_end}, val rows {val_end - train_end}, "
            f"test rows {test_end - val_end})"
        )
    return SplitBorders(train_end, val_end, test_end)
