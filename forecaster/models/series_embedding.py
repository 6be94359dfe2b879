"""A learned vector per series seen in training, for panel models (``model.series_embedding``).

The vector is appended to every look-back step and every forecast step, as a known input, so a
global network can learn what sets one series apart. Series it never saw (and series sent without
an id) get one more learned row, "unknown", which training teaches by hiding a share of the ids:
so a model with an embedding still forecasts any series from its own window."""

from __future__ import annotations

import torch
from torch import nn

from forecaster.models.output import Forecast

HIDE_SHARE = 0.1  # of training windows whose id is replaced by "unknown"


class SeriesEmbedded(nn.Module):
    def __init__(self, network: nn.Module, series_count: int, size: int, horizon: int) -> None:
        super().__init__()
        self.network = network
        self.horizon = horizon
        self.unknown = series_count  # the index of the "unknown" row
        self.embedding = nn.Embedding(series_count + 1, size)

    def forward(
        self,
        past: torch.Tensor,  # (B, L, F+K)
        future: torch.Tensor | None = None,  # (B, H, Kf+K) or None
        target: torch.Tensor | None = None,  # (B, H)
        teacher_forcing: float = 0.0,
        series: torch.Tensor | None = None,  # (B,) indices; None or -1: unknown
    ) -> Forecast:
        batch, lookback = past.shape[0], past.shape[1]
        index = torch.full((batch,), self.unknown, dtype=torch.long, device=past.device)
        if series is not None:
            index = torch.where(series >= 0, series.long(), index)
        if self.training:
            hidden = torch.rand(batch, device=past.device) < HIDE_SHARE
            index = torch.where(hidden, torch.full_like(index, self.unknown), index)
        vector = self.embedding(index)  # (B, E)
        past = torch.cat([past, vector.unsqueeze(1).expand(-1, lookback, -1)], dim=-1)  # (B, L, F+K+E)
        ahead = vector.unsqueeze(1).expand(-1, self.horizon, -1)  # (B, H, E)
        future = ahead if future is None else torch.cat([future, ahead], dim=-1)  # (B, H, Kf+K+E)
        return self.network(past, future, target, teacher_forcing)


def run_network(
    network: nn.Module,
    batch: dict[str, torch.Tensor],  # forecaster.data.model_inputs' keys
    target: torch.Tensor | None = None,  # (B, H): teacher forcing while training
    teacher_forcing: float = 0.0,
) -> Forecast:
    """The one call of a network on a batch, for training and for serving: a panel's batch
    carries ``series``, which only a network with a series embedding takes."""
    known = {"series": batch["series"]} if isinstance(network, SeriesEmbedded) and "series" in batch else {}
    return network(batch["past"], batch.get("future"), target, teacher_forcing, **known)
