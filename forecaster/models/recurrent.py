"""Many-to-one recurrent forecaster: the final hidden state feeds a head emitting all H steps."""

from __future__ import annotations

import torch
from torch import nn

from forecaster.models.cells import hidden_of, last_layer, recurrent_layer
from forecaster.models.output import Forecast
from forecaster.models.quantiles import median_of


class RecurrentForecaster(nn.Module):
    """RNN / LSTM / GRU, optionally bidirectional, with a direct multi-step head.

    A direct head avoids feeding back errors step by step; known-future covariates (calendar) are
    flattened into the head's input because the encoder never sees the future. Two options from
    the literature make long look-backs work: ``segment_length`` (SegRNN, Lin et al. 2023) feeds
    the RNN L/w embedded segments instead of L steps, so BPTT spans a few steps; ``highway``
    (LSTNet, Lai et al. 2018) adds a linear autoregressive path over the last steps of the target.
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
        segment_length: int = 0,
        highway: int = 0,
        quantiles: list[float] | None = None,
    ) -> None:
        super().__init__()
        self.layers = layers
        self.directions = 2 if bidirectional else 1
        self.horizon = horizon
        self.quantiles = list(quantiles or [])
        self.outputs = max(1, len(self.quantiles))
        self.segment_length = segment_length
        self.embed = None
        rnn_input = input_size
        if segment_length:
            self.embed = nn.Sequential(nn.Linear(segment_length * input_size, hidden_size), nn.ReLU())
            rnn_input = hidden_size
        self.encoder = recurrent_layer(cell, rnn_input, hidden_size, layers, dropout, bidirectional)
        summary_size = self.directions * hidden_size + horizon * future_size
        self.head = nn.Sequential(nn.Dropout(dropout), nn.Linear(summary_size, horizon * self.outputs))
        self.highway = nn.Linear(highway, horizon) if highway else None

    def forward(
        self,
        past: torch.Tensor,  # (B, L, F)
        future: torch.Tensor | None = None,  # (B, H, K)
        target: torch.Tensor | None = None,  # unused: a direct head has nothing to teacher-force
        teacher_forcing: float = 0.0,
    ) -> Forecast:
        batch = past.shape[0]
        steps = past
        if self.embed is not None:
            segments = past.reshape(batch, -1, self.segment_length * past.shape[2])  # (B, L/w, w*F)
            steps = self.embed(segments)  # (B, L/w, hidden)
        _, state = self.encoder(steps)  # h_n: (layers*D, B, hidden)
        summary = last_layer(hidden_of(state), self.layers, self.directions)  # (B, D*hidden)
        if future is not None:
            summary = torch.cat([summary, future.flatten(1)], dim=-1)  # (B, D*hidden + H*K)
        out = self.head(summary).view(batch, self.horizon, self.outputs)  # (B, H, Q or 1)
        if self.highway is not None:
            recent = past[:, -self.highway.in_features :, 0]  # (B, k): the target's last k steps
            out = out + self.highway(recent).unsqueeze(-1)  # (B, H, Q or 1)
        if not self.quantiles:
            return Forecast(mean=out.squeeze(-1))  # (B, H)
        out = torch.sort(out, dim=-1).values  # quantiles never cross
        return Forecast(mean=median_of(out, self.quantiles), quantiles=out)  # (B, H), (B, H, Q)
