"""Level-relative forecasting (RevIN / NLinear style) around any network.

The network sees each window minus its own level (last value or mean) and forecasts deviations
from it; the level is added back after. This keeps a model trained on one temperature range
usable when the test period sits at another (ETTh1's test level is far from its training level).
"""

from __future__ import annotations

import torch
from torch import nn

from forecaster.models.output import Forecast


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
        level = series[:, -1:] if self.mode == "last" else series.mean(dim=1, keepdim=True)
        shifted = torch.cat([series - level, past[..., self.series_features :]], dim=-1)
        target_level = level[:, :, 0]  # (B, 1)
        relative_target = None if target is None else target - target_level  # (B, H)
        out = self.network(shifted, future, relative_target, teacher_forcing)
        quantiles = None if out.quantiles is None else out.quantiles + target_level.unsqueeze(-1)
        return out._replace(mean=out.mean + target_level, quantiles=quantiles)
