"""The direct seq2seq decoder: known-future inputs only, all H steps in one fused recurrent call.

The autoregressive decoder feeds back its own previous prediction, so it must run H Python-level
steps and, trained with the truth fed back (teacher forcing), it meets its own errors only at
inference (exposure bias). This decoder's step t sees only what is known in advance for that
step: the calendar features of its timestamp (when the model has them) and a learned embedding
of t. Nothing is fed back, so:

* the decoder RNN runs once over the whole horizon (cuDNN on a GPU), and
* every decoder state s_t is known after that call, so the Bahdanau queries s_{t-1} of all H
  steps are too, and the attention is one batched operation instead of H.

With ``segment_length`` w (SegRNN's parallel multi-step decoding, Lin et al. 2023) a decoder step
is a segment of w horizon steps: it takes those steps' calendar, emits their w values, and the
recurrence spans H/w steps instead of H, which is what makes H=720 affordable on a CPU.

Attention, `lags` and `steps` layouts (``step_attention.py``): every forecast step attends on its
own (its segment's decoder state s_t, its position, calendar and, `lags`, its lag to each look-back
step) over every look-back step, and adds what it retrieves to the w values its segment emits. In
the `lags` layout those values are the network without attention's (from [s_t, the encoder's final
state]) and what is retrieved starts at zero, so attention is a residual the training grows where
it pays; the `steps` layout emits from s_t alone. The query is s_t, not s_{t-1}: here no
context feeds the state, so the state that has read the step's own segment is known. The `states`
layout (models saved before it) attends from s_{t-1} over the encoder states and emits each
segment's w values from [s_t, c_t].
"""

from __future__ import annotations

import torch
from torch import nn

from forecaster.models.attention import BahdanauAttention
from forecaster.models.cells import hidden_of, recurrent_layer
from forecaster.models.step_attention import Alignment, StepAttention

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
        segment_length: int = 1,
        step_attention: bool = False,
        reads_fixed_context: bool = True,
    ) -> None:
        """``context_size``: the fixed or attended context the output reads beside the state;
        ``step_attention``: the `lags` or `steps` layout, whose retrieved values are added to the
        output; ``reads_fixed_context``: with it, the output still reads the encoder's final state
        beside the decoder's (the `lags` layout: the network without attention, plus what the
        attention retrieves); the `steps` layout's output reads the decoder state alone."""
        super().__init__()
        if horizon % segment_length:
            raise ValueError(f"segment_length {segment_length} does not divide the horizon {horizon}")
        self.horizon, self.segment = horizon, segment_length
        self.steps = horizon // segment_length  # S: decoder steps, H when w = 1
        self.outputs = outputs
        self.position = nn.Embedding(self.steps, hidden_size)  # which step of the horizon this is
        rnn_input = future_size * segment_length + hidden_size
        self.rnn = recurrent_layer(cell, rnn_input, hidden_size, layers, dropout, False)
        # on [s_t, c_t], as stepwise; w values per step. Dropout on its input, as the many-to-one
        # head has: a one-layer recurrent layer applies none (torch drops only between layers)
        self.dropout = nn.Dropout(dropout)
        self.reads_fixed_context = reads_fixed_context or not step_attention
        read = hidden_size + context_size if self.reads_fixed_context else hidden_size
        self.output = nn.Linear(read, segment_length * outputs)

    def step_inputs(self, future: torch.Tensor | None, batch: int) -> torch.Tensor:
        """Per step: the calendar of that step's w horizon steps when given, then its position."""
        position = self.position.weight.unsqueeze(0).expand(batch, -1, -1)  # (B, S, hidden)
        if future is None:
            return position
        future = future.reshape(batch, self.steps, -1)  # (B, H, K) -> (B, S, w*K)
        return torch.cat([future, position], dim=-1)  # (B, S, w*K + hidden)

    def forward(
        self,
        state: State,  # (layers, B, hidden): the bridged encoder state
        encoded: torch.Tensor,  # (B, L, C): every encoder state h_i
        fixed_context: torch.Tensor,  # (B, C): the encoder's top-layer summary
        future: torch.Tensor | None = None,  # (B, H, K)
        attention: BahdanauAttention | StepAttention | None = None,
        keys: torch.Tensor | None = None,  # (B, L, A): BahdanauAttention.project_keys(encoded)
        past: torch.Tensor | None = None,  # (B, L, F+K): whose values StepAttention retrieves
    ) -> tuple[torch.Tensor, Alignment | None]:
        """-> raw outputs (B, H, Q or 1) and the attention weights, or None without attention.

        StepAttention: Alignment((B, m, H, L_enc), within (m, H, L) or (B, m, H, L) when w > 1);
        BahdanauAttention: Alignment((B, S, L_enc)), S = H / w decoder steps. L_enc is the number
        of encoder states (L, or L/w for a segment encoder): the caller maps the weights back onto
        the look-back's steps.
        """
        batch = encoded.shape[0]
        inputs = self.step_inputs(future, batch)  # (B, S, w*K + hidden)
        outputs, _ = self.rnn(inputs, state)  # (B, S, hidden): s_t of the top layer, every t
        if isinstance(attention, StepAttention):
            alignment = attention.align(outputs, encoded, past, future)  # weights (B, m, H, L_enc)
            retrieved = attention.retrieve(alignment, encoded, past)  # (B, H, Q or 1)
            read = outputs  # (B, S, hidden)
            if self.reads_fixed_context:
                fixed = fixed_context.unsqueeze(1).expand(-1, self.steps, -1)  # (B, S, C)
                read = torch.cat([outputs, fixed], dim=-1)  # (B, S, hidden + C)
            emitted = self.output(self.dropout(read)).reshape(batch, self.horizon, self.outputs)
            return emitted + retrieved, alignment  # (B, H, Q or 1)
        if attention is None:
            contexts = fixed_context.unsqueeze(1).expand(-1, self.steps, -1)  # (B, S, C)
            alignment = None
        else:
            queries = previous_states(state, outputs)  # (B, S, hidden): s_{t-1}
            contexts, weights = attention.attend_all(queries, encoded, keys)  # (B, S, C), (B, S, L_enc)
            alignment = Alignment(weights)
        values = self.output(self.dropout(torch.cat([outputs, contexts], dim=-1)))  # (B, S, w*Q)
        return values.reshape(batch, self.horizon, self.outputs), alignment  # (B, H, Q or 1)
