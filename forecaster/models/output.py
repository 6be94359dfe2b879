"""What every network returns."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Forecast(NamedTuple):
    mean: torch.Tensor  # (B, H) point forecast, in the network's (scaled) units
    attention: torch.Tensor | None = None  # (B, H, L): decoder step x encoder position
    quantiles: torch.Tensor | None = None  # (B, H, Q) for quantile networks; mean is the median
