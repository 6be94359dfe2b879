"""Sliding windows over a series: past inputs (N, L, F), known-future covariates (N, H, K),
targets (N, H). Windows are views into one array, so stride-1 sets cost no copies."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from numpy.lib.stride_tricks import sliding_window_view
from torch.utils.data import Dataset


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

    def past_calendar(self) -> np.ndarray | None:
        if self.calendar is None:
            return None
        return self._slice(self.calendar, 0, self.lookback)  # (N, L, K)

    def future_calendar(self) -> np.ndarray | None:
        if self.calendar is None:
            return None
        return self._slice(self.calendar, self.lookback, self.horizon)  # (N, H, K)

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
    """Scaled windows for training: each item is ``past`` (L, F+K) with calendar features appended,
    ``future`` (H, Kf+K) (future covariates, then calendar) or empty, and ``target`` (H,)."""

    def __init__(self, windows: SeriesWindows, series_index: int | None = None) -> None:
        self.series_index = series_index  # a panel member's position, for series embeddings
        self.values = torch.as_tensor(windows.values, dtype=torch.float32)
        self.calendar = (
            None if windows.calendar is None else torch.as_tensor(windows.calendar, dtype=torch.float32)
        )
        self.ahead = None if windows.ahead is None else torch.as_tensor(windows.ahead, dtype=torch.float32)
        self.starts = windows.starts
        self.lookback = windows.lookback
        self.horizon = windows.horizon

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        s = int(self.starts[i])
        mid, end = s + self.lookback, s + self.lookback + self.horizon
        past = self.values[s:mid]  # (L, F)
        item = {"target": self.values[mid:end, 0]}  # (H,)
        known = []  # what is known for the forecast steps: future covariates, then calendar
        if self.ahead is not None:
            known.append(self.ahead[mid:end])  # (H, Kf)
        if self.calendar is not None:
            past = torch.cat([past, self.calendar[s:mid]], dim=-1)  # (L, F+K)
            known.append(self.calendar[mid:end])  # (H, K)
        if known:
            item["future"] = torch.cat(known, dim=-1)  # (H, Kf+K)
        item["past"] = past
        if self.series_index is not None:
            item["series"] = torch.tensor(self.series_index)
        return item
