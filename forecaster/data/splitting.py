"""Chronological borders (row positions, never shuffled): train, validation, selection, test.

The validation period is cut in two. Its first part ("val") is what early stopping and the best
checkpoint watch; its later part ("selection") is seen by no fit: conformal intervals are
calibrated on it and models are compared on it (the promotion gate, the demo's pick, `compare`'s
order). The test split is only ever reported.

With ``split.selection_folds`` k > 1 models are chosen on k selection folds (``selection_splits``):
the selection period and the k - 1 stretches of as many rows before it, laid back from the test
split, never into the training rows (forecaster/selection.py says why those rows)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from forecaster.config import SplitConfig
from forecaster.errors import ConfigError

FOLD_PREFIX = "selection-"  # "selection-2" ... name the selection folds before the selection period


def selection_splits(folds: int) -> tuple[str, ...]:
    """The split names of ``folds`` selection folds, latest first: "selection" (the selection
    period itself, so one fold is the plain selection split), "selection-2", ..."""
    return ("selection", *(f"{FOLD_PREFIX}{fold}" for fold in range(2, folds + 1)))


@dataclass(frozen=True)
class SplitBorders:
    """Rows [0, train_end) train, [train_end, selection_start) val (early stopping),
    [selection_start, val_end) selection (calibration, model choice), [val_end, test_end) test."""

    train_end: int
    selection_start: int
    val_end: int
    test_end: int

    def rows(self, split: str) -> tuple[int, int]:
        if split.startswith(FOLD_PREFIX):
            return self.fold_rows(int(split.removeprefix(FOLD_PREFIX)))
        return {
            "train": (0, self.train_end),
            "val": (self.train_end, self.selection_start),
            "selection": (self.selection_start, self.val_end),
            "test": (self.val_end, self.test_end),
        }[split]

    def fold_rows(self, fold: int) -> tuple[int, int]:
        """Target rows of selection fold ``fold`` (1: the selection period; 2: as many rows just
        before it ...): disjoint, all before test, none in the training rows."""
        length = self.val_end - self.selection_start
        lo, hi = self.val_end - fold * length, self.val_end - (fold - 1) * length
        if lo < self.train_end:
            raise ConfigError(
                f"split.selection_folds: fold {fold} ({length} rows, as many as the selection "
                f"period) would start at row {lo}, inside the training rows (validation starts at row "
                f"{self.train_end}); use fewer folds or a lower split.selection"
            )
        return lo, hi

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
