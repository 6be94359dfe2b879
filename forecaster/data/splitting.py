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


@dataclass(frozen=True)
class CutOffs:
    """The split borders as dates, shared by every series of a panel: no series' validation or
    test period can then sit in another series' training rows."""

    val_start: pd.Timestamp
    selection_start: pd.Timestamp
    test_start: pd.Timestamp
    end: pd.Timestamp | None  # first timestamp not used; None: to the end

    def borders(self, index: pd.DatetimeIndex, where: str) -> SplitBorders:
        """This series' rows at the shared dates; a split it cannot fill is an error naming it."""
        train_end, selection_start, val_end = (
            int(index.searchsorted(stamp))
            for stamp in (self.val_start, self.selection_start, self.test_start)
        )
        test_end = len(index) if self.end is None else int(index.searchsorted(self.end))
        if not 0 < train_end < selection_start < val_end < test_end:
            raise ConfigError(
                f"split: {where} ({len(index)} rows from {index[0]} to {index[-1]}) has no rows in a "
                f"split at the panel's cut-offs (validation {self.val_start}, selection "
                f"{self.selection_start}, test {self.test_start}): train rows {train_end}, val rows "
                f"{selection_start - train_end}, selection rows {val_end - selection_start}, test rows "
                f"{test_end - val_end}; leave the series out or change the split"
            )
        return SplitBorders(train_end, selection_start, val_end, test_end)


def panel_cut_offs(indexes: list[pd.DatetimeIndex], config: SplitConfig) -> CutOffs:
    """Fractions (or dates) of the union of all series' timestamps, as dates."""
    union = indexes[0]
    for index in indexes[1:]:
        union = union.union(index)
    borders = split_borders(union, config)
    end = None if borders.test_end >= len(union) else union[borders.test_end]
    return CutOffs(union[borders.train_end], union[borders.selection_start], union[borders.val_end], end)
