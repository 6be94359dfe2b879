"""Level-relative forecasting (RevIN / NLinear style) around any network.

The network sees each window minus its own level (last value or mean) and forecasts deviations
from it; the level is added back after. This keeps a model trained on one temperature range
usable when the test period sits at another (ETTh1's test level is far from its training level).
``standard`` also divides by the window's standard deviation (RevIN without the affine part), so
the forecast does not depend on the units or scale of the series at all: what lets one model serve
a panel of series at different scales, including series it never saw.
"""

from __future__ import annotations

import torch
from torch import nn

from forecaster.models.output import Forecast

STD_FLOOR = 1e-5  # a flat window: divide by this, not by 0 (inputs are z-scored, so tiny)


class LevelNormalized(nn.Module):
    def __init__(self, network: nn.Module, mode: str, series_features: int) -> None:
        super().__init__()
        self.network = network
        self.mode = mode
        self.series_features = series_features  # the first F channels; calendar ones stay as-is

    def forward(
        self,
        past: torch.Tensor,  # (B, L, F+K)
        future: torch.Tensor | None = None,  # (B, H, K)
        target: torch.Tensor | None = None,  # (B, H)
        teacher_forcing: float = 0.0,
    ) -> Forecast:
        if self.mode == "none":
            return self.network(past, future, target, teacher_forcing)
        series = past[..., : self.series_features]  # (B, L, F)
        level = series[:, -1:] if self.mode == "last" else series.mean(dim=1, keepdim=True)  # (B, 1, F)
        spread = torch.ones_like(level)
        if self.mode == "standard":
            spread = series.std(dim=1, keepdim=True, unbiased=False).clamp_min(STD_FLOOR)  # (B, 1, F)
        shifted = torch.cat([(series - level) / spread, past[..., self.series_features :]], dim=-1)
        target_level, target_spread = level[:, :, 0], spread[:, :, 0]  # (B, 1) each
        relative_target = None if target is None else (target - target_level) / target_spread  # (B, H)
        out = self.network(shifted, future, relative_target, teacher_forcing)
        mean = out.mean * target_spread + target_level  # (B, H)
        quantiles = None
        if out.quantiles is not None:  # (B, H, Q)
            quantiles = out.quantiles * target_spread.unsqueeze(-1) + target_level.unsqueeze(-1)
        return out._replace(mean=mean, quantiles=quantiles)  # attention (and its segment) kept
