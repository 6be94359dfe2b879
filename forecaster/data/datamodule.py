"""From a loaded series to train/val/test windows: split, fit the scaler on train rows, cut."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytorch_lightning as pl
from torch.utils.data import DataLoader

from forecaster.config import ForecastConfig
from forecaster.data.calendar import calendar_features, is_sub_daily
from forecaster.data.loading import LoadedSeries
from forecaster.data.scaling import StandardScaler
from forecaster.data.splitting import SplitBorders, split_borders
from forecaster.data.windows import SeriesWindows, WindowDataset, window_starts
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

    def windows(self, split: str, scaled: bool = False, stride: int | None = None) -> SeriesWindows:
        """Windows of ``split``; training uses the configured stride, evaluation every window."""
        lo, hi = self.borders.rows(split)
        step = stride if stride is not None else (self.stride if split == "train" else 1)
        starts = window_starts(lo, hi, self.lookback, self.horizon, step)
        raw = self.series.frame.to_numpy()
        return SeriesWindows(
            values=self.scaler.transform(raw) if scaled else raw,
            calendar=self.calendar,
            index=self.series.frame.index,
            starts=starts,
            lookback=self.lookback,
            horizon=self.horizon,
        )

    def split_summary(self) -> dict[str, dict[str, object]]:
        """Rows and date range of each split (logged with every run)."""
        index = self.series.frame.index
        summary = {}
        for split in SPLITS:
            lo, hi = self.borders.rows(split)
            summary[split] = {"rows": hi - lo, "start": str(index[lo]), "end": str(index[hi - 1])}
        return summary


def prepare_series(series: LoadedSeries, config: ForecastConfig) -> PreparedSeries:
    borders = split_borders(series.frame.index, config.split)
    window = config.window
    values = series.frame.to_numpy()
    scaler = StandardScaler.fit(values[: borders.train_end])  # train rows only: no leakage
    calendar = None
    if config.data.calendar_features:
        calendar = calendar_features(series.frame.index, is_sub_daily(series.frequency))
    prepared = PreparedSeries(
        series, borders, scaler, calendar, window.lookback, window.horizon, window.stride
    )
    for split in SPLITS:
        if len(prepared.windows(split)) == 0:
            lo, hi = borders.rows(split)
            raise ConfigError(
                f"window: lookback {window.lookback} + horizon {window.horizon} does not fit the "
                f"{split} split ({hi - lo} rows of {series.source}); shorten them or change the split"
            )
    return prepared


class ForecastDataModule(pl.LightningDataModule):
    """Lightning's view of a PreparedSeries: scaled windows, shuffled for training only."""

    def __init__(self, prepared: PreparedSeries, batch_size: int, num_workers: int = 0) -> None:
        super().__init__()
        self.prepared = prepared
        self.batch_size = batch_size
        self.num_workers = num_workers

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        dataset = WindowDataset(self.prepared.windows(split, scaled=True))
        return DataLoader(dataset, batch_size=self.batch_size, shuffle=shuffle, num_workers=self.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
