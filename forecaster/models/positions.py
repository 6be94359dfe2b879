"""Where each forecast step and each look-back step sits, as features an attention score can match.

A step's offset from the forecast origin (the last observed step is 0): look-back step i (0-based)
is at i - L + 1, forecast step t at t + 1. Two kinds of feature describe it:

* a learned vector per index (which forecast step, which look-back step), free to learn any
  pattern the data has;
* sines and cosines of the offset at the data's seasonal period P (24 for hourly data, the period
  of the seasonal-naive baseline) and its harmonics up to P/2: for hourly data every frequency a
  daily pattern has (at most HARMONICS_AT_MOST). Two steps a whole number of periods apart
  (yesterday's same hour and tomorrow's) have the same phases, and with the whole basis a score
  can single out exactly those pairs: on the synthetic copy task (the future repeats the value 24
  steps back, tests/forecaster/test_step_attention.py) the rows put 0.94 of their weight on lag
  24 after 300 steps with the whole basis, 0.89 with its first three harmonics.

The features depend on the indices only, never on a window: computed once per forward pass and
shared by the whole batch.
"""

from __future__ import annotations

import math

import torch
from torch import nn

HARMONICS_AT_MOST = 12  # hourly data's whole basis (24 / 2); a minute's day would have 720


def harmonics(period: int) -> int:
    return min(HARMONICS_AT_MOST, period // 2)


def seasonal_phases(offsets: torch.Tensor, period: int) -> torch.Tensor:
    """(T,) offsets -> (T, 2k): sin and cos of 2 pi j offset / period, j = 1..k = harmonics(period)."""
    j = torch.arange(1, harmonics(period) + 1, dtype=torch.float32)  # (k,)
    angle = 2 * math.pi * offsets.float().unsqueeze(-1) * j / period  # (T, k)
    return torch.cat([angle.sin(), angle.cos()], dim=-1)  # (T, 2k)


class StepPositions(nn.Module):
    """(H, size) features of the forecast steps and (L, size) of the look-back steps."""

    def __init__(self, horizon: int, lookback: int, size: int, season: int) -> None:
        super().__init__()
        self.forecast_index = nn.Embedding(horizon, size)
        self.lookback_index = nn.Embedding(lookback, size)
        self.seasonal = season > 1  # a period of 1 (no seasonality known) has no phase to compare
        if self.seasonal:
            # derived from the sizes alone, so not saved with the weights
            forecast_phase = seasonal_phases(torch.arange(horizon) + 1, season)  # (H, 2k)
            lookback_phase = seasonal_phases(torch.arange(lookback) - lookback + 1, season)  # (L, 2k)
            self.register_buffer("forecast_phase", forecast_phase, persistent=False)
            self.register_buffer("lookback_phase", lookback_phase, persistent=False)
            self.forecast_season = nn.Linear(2 * harmonics(season), size, bias=False)
            self.lookback_season = nn.Linear(2 * harmonics(season), size, bias=False)

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        forecast = self.forecast_index.weight  # (H, size)
        lookback = self.lookback_index.weight  # (L, size)
        if self.seasonal:
            forecast = forecast + self.forecast_season(self.forecast_phase)  # (H, size)
            lookback = lookback + self.lookback_season(self.lookback_phase)  # (L, size)
        return forecast, lookback
