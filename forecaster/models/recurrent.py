"""Many-to-one recurrent forecaster: the final hidden state feeds a head emitting all H steps."""

from __future__ import annotations

import torch
from torch import nn

from forecaster.models.cells import hidden_of, last_layer, recurrent_layer
from forecaster.models.output import Forecast


class RecurrentForecaster(nn.Module):
    """RNN / LSTM / GRU, optionally bidirectional, with a direct multi-step head.

    A direct head avoids feeding back errors step by step; known-future covariates (calendar) are
    flattened into the head's input because the encoder never sees the future.
    """

    def __init__(
        self,
        input_size: int,
        horizon: int,
        future_size: int = 0,
        cell: str = "lstm",
        hidden_size: int = 64,
        layers: int = 2,
        dropout: float = 0.1,
        bidirectional: bool = False,
    ) -> None:
        super().__init__()
        self.layers = layers
        self.directions = 2 if bidirectional else 1
        self.encoder = recurrent_layer(cell, input_size, hidden_size, layers, dropout, bidirectional)
        summary_size = self.directions * hidden_size + horizon * future_size
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(summary_size, horizon))

    def forward(
        self,
        past: torch.Tensor,  # (B, L, F)
        future: torch.Tensor | None = None,  # (B, H, K)
        target: torch.Tensor | None = None,  # unused: a direct head has nothing to teacher-force
        teacher_forcing: float = 0.0,
    ) -> Forecast:
        _, state = self.encoder(past)  # h_n: (layers*D, B, hidden)
        summary = last_layer(hidden_of(state), self.layers, self.directions)  # (B, D*hidden)
        if future is not None:
            summary = torch.cat([summary, future.flatten(1)], dim=-1)  # (B, D*hidden + H*K)
        return Forecast(mean=self.head(summary))  # (B, H)
