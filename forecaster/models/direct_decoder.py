"""The direct seq2seq decoder: known-future inputs only, all H steps in one fused recurrent call.

The autoregressive decoder feeds back its own previous prediction, so it must run H Python-level
steps and, trained with the truth fed back (teacher forcing), it meets its own errors only at
inference (exposure bias). This decoder's step t sees only what is known in advance for that
step: the calendar features of its timestamp (when the model has them) and a learned embedding
of t. Nothing is fed back, so:

* the decoder RNN runs once over the whole horizon (cuDNN on a GPU), and
* every decoder state s_t is known after that call, so the Bahdanau queries s_{t-1} of all H
  steps are too, and the attention is one batched operation instead of H.
"""

from __future__ import annotations

import torch
from torch import nn

from forecaster.models.attention import BahdanauAttention
from forecaster.models.cells import hidden_of, recurrent_layer

State = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


def previous_states(initial: State, outputs: torch.Tensor) -> torch.Tensor:
    """The attention query of every step, s_{t-1}: the initial state's top layer for t = 0, the
    decoder's (top-layer) output of step t-1 after that; as the autoregressive decoder uses it.

    ``initial`` (layers, B, hidden) or an LSTM's (h, c); ``outputs`` (B, H, hidden) -> (B, H, hidden).
    """
    first = hidden_of(initial)[-1].unsqueeze(1)  # (B, 1, hidden): s_{-1}, the bridged state
    return torch.cat([first, outputs[:, :-1]], dim=1)  # (B, H, hidden)


class DirectDecoder(nn.Module):
    def __init__(
        self,
        cell: str,
        horizon: int,
        future_size: int,
        hidden_size: int,
        layers: int,
        dropout: float,
        context_size: int,
        outputs: int,
    ) -> None:
        super().__init__()
        self.horizon = horizon
        self.position = nn.Embedding(horizon, hidden_size)  # which step of the horizon this is
        self.rnn = recurrent_layer(cell, future_size + hidden_size, hidden_size, layers, dropout, False)
        self.output = nn.Linear(hidden_size + context_size, outputs)  # on [s_t, c_t], as stepwise

    def step_inputs(self, future: torch.Tensor | None, batch: int) -> torch.Tensor:
        """Per step: the calendar of that step when given, then its position embedding."""
        position = self.position.weight.unsqueeze(0).expand(batch, -1, -1)  # (B, H, hidden)
        if future is None:
            return position
        return torch.cat([future, position], dim=-1)  # (B, H, K + hidden)

    def forward(
        self,
        state: State,  # (layers, B, hidden): the bridged encoder state
        encoded: torch.Tensor,  # (B, L, C): every encoder state h_i
        fixed_context: torch.Tensor,  # (B, C): the encoder's top-layer summary
        future: torch.Tensor | None = None,  # (B, H, K)
        attention: BahdanauAttention | None = None,
        keys: torch.Tensor | None = None,  # (B, L, A): attention.project_keys(encoded)
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """-> raw outputs (B, H, Q or 1) and attention weights (B, H, L), or None without attention."""
        inputs = self.step_inputs(future, encoded.shape[0])  # (B, H, K + hidden)
        outputs, _ = self.rnn(inputs, state)  # (B, H, hidden): s_t of the top layer, every t
        if attention is None:
            contexts = fixed_context.unsqueeze(1).expand(-1, self.horizon, -1)  # (B, H, C)
            weights = None
        else:
            queries = previous_states(state, outputs)  # (B, H, hidden): s_{t-1}
            contexts, weights = attention.attend_all(queries, encoded, keys)  # (B, H, C), (B, H, L)
        return self.output(torch.cat([outputs, contexts], dim=-1)), weights  # (B, H, Q or 1)
