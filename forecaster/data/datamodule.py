"""From a loaded series (or a panel of them) to train/val/test windows: split, fit the scaler on
train rows, cut. A panel is split at the same dates for every series, each scaled on its own
training rows, and training draws its windows across all of them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytorch_lightning as pl
from torch.utils.data import DataLoader, Dataset

from forecaster.config import ForecastConfig
from forecaster.data.calendar import calendar_features, is_sub_daily
from forecaster.data.loading import LoadedSeries
from forecaster.data.panel import LoadedPanel
from forecaster.data.scaling import StandardScaler
from forecaster.data.splitting import (
    CutOffs,
    SplitBorders,
    panel_cut_offs,
    selection_splits,
    split_borders,
)
from forecaster.data.windows import SeriesWindows, WindowDataset, as_batch, window_starts
from forecaster.errors import ConfigError

SPLITS = ("train", "val", "selection", "test")


@dataclass
class PreparedSeries:
    series: LoadedSeries
    borders: SplitBorders
    scaler: StandardScaler
    calendar: np.ndarray | None  # (T, K)
    lookback: int
    horizon: int
    stride: int
    future_scaler: StandardScaler | None = None  # future covariates' (a panel's: pooled)

    @property
    def parts(self) -> list[PreparedSeries]:
        """The series in it: itself (a panel lists its members)."""
        return [self]

    def windows(self, split: str, scaled: bool = False, stride: int | None = None) -> SeriesWindows:
        """Windows of ``split``; training uses the configured stride, evaluation every window."""
        lo, hi = self.borders.rows(split)
        step = stride if stride is not None else (self.stride if split == "train" else 1)
        starts = window_starts(lo, hi, self.lookback, self.horizon, step)
        frame = self.series.frame
        raw = frame[self.series.columns].to_numpy()
        ahead = None
        if self.series.future_covariates:
            ahead = frame[self.series.future_covariates].to_numpy()
            ahead = self.future_scaler.transform(ahead) if scaled else ahead
        return SeriesWindows(
            values=self.scaler.transform(raw) if scaled else raw,
            calendar=self.calendar,
            index=frame.index,
            starts=starts,
            lookback=self.lookback,
            horizon=self.horizon,
            ahead=ahead,
        )

    def dataset(self, split: str) -> Dataset:
        return WindowDataset([self.windows(split, scaled=True)])

    def split_summary(self) -> dict[str, dict[str, object]]:
        """Rows and date range of each split (logged with every run)."""
        index = self.series.frame.index
        summary = {}
        for split in SPLITS:
            lo, hi = self.borders.rows(split)
            summary[split] = {"rows": hi - lo, "start": str(index[lo]), "end": str(index[hi - 1])}
        return summary


@dataclass
class PreparedPanel:
    """Many series split at the same dates (``cut_offs``), each scaled on its own training rows."""

    members: dict[str, PreparedSeries]
    cut_offs: CutOffs
    id_column: str

    @property
    def parts(self) -> list[PreparedSeries]:
        return list(self.members.values())

    @property
    def series(self) -> LoadedSeries:
        """The first member: what all share (columns, frequency, source file)."""
        return self.parts[0].series

    @property
    def calendar(self) -> np.ndarray | None:
        return self.parts[0].calendar

    @property
    def future_scaler(self) -> StandardScaler | None:
        return self.parts[0].future_scaler

    def dataset(self, split: str) -> Dataset:
        """Windows drawn across all series (shuffled together for training)."""
        parts = self.parts
        return WindowDataset([part.windows(split, scaled=True) for part in parts], list(range(len(parts))))

    def scalers(self) -> dict[str, StandardScaler]:
        return {key: part.scaler for key, part in self.members.items()}

    def split_summary(self) -> dict[str, dict[str, object]]:
        """Rows of each split over all series, and the dates where the splits start."""
        summary: dict[str, dict[str, object]] = {}
        for split in SPLITS:
            rows = sum(hi - lo for lo, hi in (part.borders.rows(split) for part in self.parts))
            starts = [str(part.series.frame.index[part.borders.rows(split)[0]]) for part in self.parts]
            ends = [str(part.series.frame.index[part.borders.rows(split)[1] - 1]) for part in self.parts]
            summary[split] = {"rows": rows, "start": min(starts), "end": max(ends)}
        return summary


Prepared = PreparedSeries | PreparedPanel


def prepare(loaded: LoadedSeries | LoadedPanel, config: ForecastConfig) -> Prepared:
    """A single series or a panel, whichever was loaded."""
    if isinstance(loaded, LoadedPanel):
        return prepare_panel(loaded, config)
    return prepare_series(loaded, config)


def prepare_series(
    series: LoadedSeries,
    config: ForecastConfig,
    borders: SplitBorders | None = None,
    future_scaler: StandardScaler | None = None,
) -> PreparedSeries:
    """``borders`` and ``future_scaler`` are given for a panel's member (shared dates, pooled fit)."""
    if borders is None:
        borders = split_borders(series.frame.index, config.split)
    window = config.window
    values = series.frame[series.columns].to_numpy()
    scaler = StandardScaler.fit(values[: borders.train_end])  # train rows only: no leakage
    if future_scaler is None and series.future_covariates:
        future_scaler = StandardScaler.fit(
            series.frame[series.future_covariates].to_numpy()[: borders.train_end]
        )
    calendar = None
    if config.data.calendar_features:
        calendar = calendar_features(series.frame.index, is_sub_daily(series.frequency))
    prepared = PreparedSeries(
        series, borders, scaler, calendar, window.lookback, window.horizon, window.stride, future_scaler
    )
    folds = selection_splits(config.split.folds)[1:]  # fold 1 is the selection split
    for split in (*SPLITS, *folds):
        if len(prepared.windows(split)) == 0:
            lo, hi = borders.rows(split)
            raise ConfigError(
                f"window: lookback {window.lookback} + horizon {window.horizon} does not fit the "
                f"{split} split ({hi - lo} rows of {series.label}); shorten them or change the split"
            )
    return prepared


def prepare_panel(panel: LoadedPanel, config: ForecastConfig) -> PreparedPanel:
    """Cut-off dates from the union of all timestamps; future covariates scaled by one fit on all
    series' training rows (their meaning, a holiday or a temperature, is shared)."""
    cut_offs = panel_cut_offs([m.frame.index for m in panel.members.values()], config.split)
    borders = {key: cut_offs.borders(m.frame.index, m.label) for key, m in panel.members.items()}
    future_scaler = None
    if panel.first.future_covariates:
        names = panel.first.future_covariates
        rows = [m.frame[names].to_numpy()[: borders[key].train_end] for key, m in panel.members.items()]
        future_scaler = StandardScaler.fit(np.concatenate(rows))
    members = {
        key: prepare_series(m, config, borders[key], future_scaler) for key, m in panel.members.items()
    }
    return PreparedPanel(members, cut_offs, panel.id_column)


class ForecastDataModule(pl.LightningDataModule):
    """Lightning's view of a PreparedSeries or PreparedPanel: scaled windows, shuffled for training
    only."""

    def __init__(self, prepared: Prepared, batch_size: int, num_workers: int = 0) -> None:
        super().__init__()
        self.prepared = prepared
        self.batch_size = batch_size
        self.num_workers = num_workers

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        dataset = self.prepared.dataset(split)
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            collate_fn=as_batch,  # type: ignore[arg-type]  # our datasets yield dicts, not lists
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
