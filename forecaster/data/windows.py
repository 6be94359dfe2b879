"""Sliding windows over a series: past inputs (N, L, F), known-future covariates (N, H, K),
targets (N, H). Windows are views into one array, so stride-1 sets cost no copies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from numpy.lib.stride_tricks import sliding_window_view
from torch.utils.data import Dataset

from forecaster.data.model_inputs import model_inputs


def window_starts(lo: int, hi: int, lookback: int, horizon: int, stride: int) -> np.ndarray:
    """Starts of windows whose H target rows all lie in rows [lo, hi). Inputs may reach back up to
    L rows before ``lo`` (earlier observations, never later ones), as the ETT benchmarks do."""
    first = max(lo - lookback, 0)
    last = hi - lookback - horizon
    if last < first:
        return np.empty(0, dtype=np.int64)
    return np.arange(first, last + 1, stride, dtype=np.int64)


@dataclass
class SeriesWindows:
    """Windows of one split, in whatever units ``values`` has (raw or scaled)."""

    values: np.ndarray  # (T, F), target in column 0
    calendar: np.ndarray | None  # (T, K) or None
    index: pd.DatetimeIndex  # (T,)
    starts: np.ndarray  # (N,)
    lookback: int
    horizon: int
    ahead: np.ndarray | None = None  # (T, Kf): future covariates, seen over the horizon only

    def __len__(self) -> int:
        return len(self.starts)

    def _slice(self, array: np.ndarray, offset: int, length: int) -> np.ndarray:
        view = sliding_window_view(array, length, axis=0)  # (T-length+1, [F,] length)
        picked = view[self.starts + offset]
        return np.moveaxis(picked, -1, 1) if array.ndim == 2 else picked

    def past(self) -> np.ndarray:
        return self._slice(self.values, 0, self.lookback)  # (N, L, F)

    def target(self) -> np.ndarray:
        return self._slice(self.values[:, 0], self.lookback, self.horizon)  # (N, H)

    def future_covariates(self) -> np.ndarray | None:
        if self.ahead is None:
            return None
        return self._slice(self.ahead, self.lookback, self.horizon)  # (N, H, Kf)

    def past_times(self) -> np.ndarray:
        positions = self.starts[:, None] + np.arange(self.lookback)  # (N, L)
        return self.index.values[positions]

    def future_times(self) -> np.ndarray:
        positions = self.starts[:, None] + self.lookback + np.arange(self.horizon)  # (N, H)
        return self.index.values[positions]


class WindowDataset(Dataset):
    """Scaled windows for training, over one series or all of a panel's: each item is ``past``
    (L, F+K) with calendar features appended, ``future`` (H, Kf+K) (future covariates, then
    calendar) or empty, ``target`` (H,), and for a panel ``series`` (its member's position, for
    series embeddings).

    Why one dataset for all series, gathered a batch at a time: the series' scaled values are
    held once, end to end, and a window is its start in them, so memory grows with the data and
    not with windows x look-back. torch's DataLoader hands ``__getitems__`` a batch's indices, and
    the batch is gathered by one indexing operation per input instead of a Python call per window
    (a panel of 1,000 series spent a fifth of its epoch there); use ``collate_fn=as_batch``."""

    def __init__(self, windows: list[SeriesWindows], series_indices: list[int] | None = None) -> None:
        lengths = [len(w.values) for w in windows]
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.values = torch.as_tensor(np.concatenate([w.values for w in windows]), dtype=torch.float32)
        self.calendar = joined([w.calendar for w in windows])  # (T, K) or None
        self.ahead = joined([w.ahead for w in windows])  # (T, Kf) or None
        self.starts = np.concatenate([w.starts + offset for w, offset in zip(windows, offsets, strict=True)])
        self.series = None
        if series_indices is not None:  # a panel member's position, for series embeddings
            self.series = np.concatenate(
                [
                    np.full(len(w), index, dtype=np.int64)
                    for w, index in zip(windows, series_indices, strict=True)
                ]
            )
        self.lookback = windows[0].lookback
        self.horizon = windows[0].horizon
        self.past_steps = torch.arange(self.lookback)
        self.future_steps = torch.arange(self.lookback, self.lookback + self.horizon)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        """One window (as the batch of one, squeezed)."""
        picked = np.arange(len(self))[i : i + 1] if i >= 0 else np.arange(len(self))[i:][:1]
        if not len(picked):
            raise IndexError(f"window {i} of {len(self)}")
        return {key: value[0] for key, value in self.gather(picked).items()}

    def __getitems__(self, indices: list[int]) -> dict[str, torch.Tensor]:
        return self.gather(np.asarray(indices, dtype=np.int64))

    def gather(self, picks: np.ndarray) -> dict[str, torch.Tensor]:
        starts = torch.as_tensor(self.starts[picks])[:, None]  # (B, 1)
        past_rows = starts + self.past_steps  # (B, L)
        future_rows = starts + self.future_steps  # (B, H)
        window_rows = torch.cat([past_rows, future_rows], dim=1)  # (B, L+H)
        batch = model_inputs(
            past=self.values[past_rows],  # (B, L, F)
            calendar=None if self.calendar is None else self.calendar[window_rows],  # (B, L+H, K)
            ahead=None if self.ahead is None else self.ahead[future_rows],  # (B, H, Kf)
            series=None if self.series is None else torch.as_tensor(self.series[picks]),  # (B,)
        )
        batch["target"] = self.values[future_rows, 0]  # (B, H)
        return batch


def joined(parts: list[np.ndarray | None]) -> torch.Tensor | None:
    """The series' arrays end to end, as one float32 tensor (None when they have none)."""
    if parts[0] is None:
        return None
    return torch.as_tensor(np.concatenate(parts), dtype=torch.float32)


def as_batch(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The DataLoader's collate_fn for WindowDataset: ``__getitems__`` made the batch already."""
    return batch
