"""Seq2seq encoder-decoder, with or without attention.

Without attention the decoder sees one fixed context vector (the encoder's final state): the
bottleneck the textbooks describe. With attention (``step_attention.py``, the `lags` layout by
default) every forecast step has its own query (decoder state, position, calendar) over a key per
look-back step (encoder state, position, calendar), with a learned score per lag between them, and
retrieves that step's own observed values (``attention_values: inputs``, the default) or its
encoder state with them. The attention's initial weights are drawn from a copy of
the random stream, so with one seed the rest of the network starts as the same network without
attention does. The `steps` layout (models saved between the first and second passes of issue 41)
is the same without the lag scores, with a direct decoder that emits from its own state alone. Two
decoders: ``autoregressive`` feeds back its own previous output (teacher forcing may replace it
during training), one step at a time; ``direct`` (``direct_decoder.py``) sees only known-future
inputs, so it runs all H steps in one fused recurrent call and attends for all of them at once.
With ``segment_length`` w (direct decoder only) the encoder reads L/w embedded segments and the
decoder emits H/w segments (SegRNN); the weights come out per look-back segment and
``Forecast.attention_per_step`` maps them onto steps.

The `states` layout (``attention.py``) is the one models saved before issue 41 were trained with:
each decoder state scores the encoder states (a segment model's days), so every step of a decoder
segment has the same row. It is kept so that those models load and forecast as they did.
"""

from __future__ import annotations

import torch
from torch import nn

from forecaster.models.attention import BahdanauAttention
from forecaster.models.cells import hidden_of, last_layer, recurrent_layer
from forecaster.models.direct_decoder import DirectDecoder
from forecaster.models.lag_scores import LAG_SCORE_SCALE
from forecaster.models.output import Forecast
from forecaster.models.quantiles import median_of
from forecaster.models.step_attention import CalendarColumns, StepAttention, StepKeys, is_residual

State = torch.Tensor | tuple[torch.Tensor, torch.Tensor]


class StateBridge(nn.Module):
    """Encoder final state (layers*D, B, hidden) -> decoder initial state (layers, B, hidden)."""

    def __init__(self, layers: int, directions: int, hidden_size: int) -> None:
        super().__init__()
        self.layers, self.directions = layers, directions
        self.project = nn.Linear(directions * hidden_size, hidden_size)

    def forward(self, h_n: torch.Tensor) -> torch.Tensor:
        batch, hidden = h_n.shape[1], h_n.shape[2]
        h = h_n.view(self.layers, self.directions, batch, hidden)  # (layers, D, B, hidden)
        h = h.permute(0, 2, 1, 3).reshape(self.layers, batch, self.directions * hidden)
        return torch.tanh(self.project(h))  # (layers, B, hidden)


class Seq2SeqForecaster(nn.Module):
    def __init__(
        self,
        input_size: int,
        horizon: int,
        future_size: int = 0,
        cell: str = "gru",
        hidden_size: int = 64,
        layers: int = 2,
        dropout: float = 0.1,
        bidirectional: bool = False,
        attention: str = "bahdanau",
        quantiles: list[float] | None = None,
        decoder: str = "autoregressive",
        segment_length: int = 0,
        highway: int = 0,
        attention_layout: str = "steps",
        lookback: int | None = None,
        season: int = 1,
        calendar: CalendarColumns | None = None,
        attention_heads: int = 1,
        attention_values: str = "inputs",
        attention_retrieves_calendar: bool = False,
        attention_lag_scale: float = LAG_SCORE_SCALE,
    ) -> None:
        """``lookback`` L and ``season`` (the data's seasonal period) size the `steps` layout's
        positions; ``calendar`` says where its calendar features are in the inputs;
        ``attention_values``: what the `lags` attention retrieves (the step-by-step decoder's RNN
        reads it as its context; the direct decoder adds it to its output);
        ``attention_retrieves_calendar``: whether a look-back step's retrieved inputs include its
        calendar features (``calendar``), or are its observed values alone;
        ``attention_lag_scale``: the `lags` layout's lag scores' multiplier (``lag_scores.py``)."""
        super().__init__()
        if attention_values not in ("inputs", "states_and_inputs"):
            raise ValueError(f"attention_values {attention_values!r}: 'inputs' or 'states_and_inputs'")
        if (segment_length or highway) and decoder != "direct":
            raise ValueError("segment_length and highway need the direct decoder")
        self.horizon = horizon
        self.segment = segment_length or 1
        self.embed = None
        step_size = input_size  # a look-back step's inputs
        if segment_length:  # one RNN step per segment of w look-back steps
            self.embed = nn.Sequential(nn.Linear(segment_length * input_size, hidden_size), nn.ReLU())
            input_size = hidden_size
        self.quantiles = list(quantiles or [])
        self.layers = layers
        self.directions = 2 if bidirectional else 1
        self.is_lstm = cell == "lstm"
        context_size = self.directions * hidden_size
        self.encoder = recurrent_layer(cell, input_size, hidden_size, layers, dropout, bidirectional)
        self.bridge_h = StateBridge(layers, self.directions, hidden_size)
        self.bridge_c = StateBridge(layers, self.directions, hidden_size) if self.is_lstm else None
        outputs = max(1, len(self.quantiles))
        self.attention: BahdanauAttention | StepAttention | None = None
        residual = is_residual(attention_layout, decoder)
        # the attention's initial weights come from a copy of the random stream, so the rest of the
        # network starts (and, with no randomness in the attention's forward pass, trains on the
        # same batches) exactly as the same network without attention: with one seed, the
        # ablation compares the two from one starting point
        with torch.random.fork_rng(devices=[]):
            if attention != "none" and attention_layout == "states":
                self.attention = BahdanauAttention(hidden_size, context_size, hidden_size)
            elif attention != "none":
                if lookback is None:
                    raise ValueError("the `steps` attention layout needs the look-back length")
                self.attention = StepAttention(
                    query_size=hidden_size,
                    state_size=context_size,
                    input_size=step_size,
                    # the direct decoder adds what a step retrieves to its outputs; the step-by-step
                    # one reads it as its context
                    value_size=outputs if decoder == "direct" else context_size,
                    horizon=horizon,
                    lookback=lookback,
                    segment=self.segment,
                    season=season,
                    calendar=calendar,
                    heads=attention_heads,
                    lag_scores=attention_layout == "lags",
                    # the direct decoder adds what a step retrieves to the no-attention network's output
                    values_start_at_zero=residual,
                    # `lags` with `inputs`: the look-back's own values alone, for both decoders
                    retrieves_states=not (attention_layout == "lags" and attention_values == "inputs"),
                    retrieves_calendar=attention_retrieves_calendar,
                    lag_scale=attention_lag_scale,
                )
        if decoder == "direct":  # its own RNN, position embedding and output layer
            self.direct = DirectDecoder(
                cell,
                horizon,
                future_size,
                hidden_size,
                layers,
                dropout,
                context_size,
                outputs,
                self.segment,
                step_attention=isinstance(self.attention, StepAttention),
                reads_fixed_context=attention_layout != "steps",
            )
            # LSTNet's linear skip over the last ``highway`` steps, as the many-to-one networks have it
            self.highway = nn.Linear(highway, horizon) if highway else None
        else:
            self.direct, self.highway = None, None
            decoder_input = 1 + future_size + context_size  # previous y, calendar, context
            self.decoder = recurrent_layer(cell, decoder_input, hidden_size, layers, dropout, False)
            self.output = nn.Linear(hidden_size + context_size, outputs)

    def _initial_state(self, state: State) -> State:
        if self.is_lstm:
            h_n, c_n = state
            return self.bridge_h(h_n).contiguous(), self.bridge_c(c_n).contiguous()
        return self.bridge_h(state).contiguous()

    def forward(
        self,
        past: torch.Tensor,  # (B, L, F), target in channel 0
        future: torch.Tensor | None = None,  # (B, H, K)
        target: torch.Tensor | None = None,  # (B, H): for teacher forcing during training
        teacher_forcing: float = 0.0,
    ) -> Forecast:
        encoded, enc_state = self.encoder(self._encoder_steps(past))  # (B, L/w, C), (layers*D, B, hidden)
        fixed_context = last_layer(hidden_of(enc_state), self.layers, self.directions)  # (B, C)
        keys: torch.Tensor | StepKeys | None = None  # (B, L, A): the `states` layout's projected keys
        if isinstance(self.attention, BahdanauAttention):
            keys = self.attention.project_keys(encoded)
        state = self._initial_state(enc_state)  # (layers, B, hidden)
        if self.direct is None:
            if isinstance(self.attention, StepAttention):
                keys = self.attention.keys(encoded, past, future)  # StepKeys: once per window
            return self._decode_stepwise(
                past, future, target, teacher_forcing, encoded, fixed_context, keys, state
            )
        # target and teacher_forcing are ignored: nothing is fed back, so there is nothing to force
        outputs, alignment = self.direct(state, encoded, fixed_context, future, self.attention, keys, past)
        if self.highway is not None:
            recent = past[:, -self.highway.in_features :, 0]  # (B, k): the target's last k steps
            outputs = outputs + self.highway(recent).unsqueeze(-1)  # (B, H, Q or 1)
        weights, within = None, None  # the `states` layout's (B, H/w, L/w), or the `steps` layout's
        if isinstance(self.attention, StepAttention):
            weights, within = alignment.reported()
        elif alignment is not None:
            weights = alignment.weights
        attention = dict(attention=weights, attention_within=within, segment=self.segment)
        if not self.quantiles:  # outputs (B, H, 1)
            return Forecast(mean=outputs.squeeze(-1), **attention)  # (B, H)
        outputs = torch.sort(outputs, dim=-1).values  # (B, H, Q): quantiles never cross
        return Forecast(mean=median_of(outputs, self.quantiles), quantiles=outputs, **attention)

    def _encoder_steps(self, past: torch.Tensor) -> torch.Tensor:
        """(B, L, F) -> the encoder's input: the steps, or (B, L/w, hidden) embedded segments."""
        if self.embed is None:
            return past
        batch, w = past.shape[0], self.segment
        return self.embed(past.reshape(batch, -1, w * past.shape[2]))  # (B, L/w, hidden)

    def _decode_stepwise(
        self,
        past: torch.Tensor,  # (B, L, F)
        future: torch.Tensor | None,  # (B, H, K)
        target: torch.Tensor | None,  # (B, H)
        teacher_forcing: float,
        encoded: torch.Tensor,  # (B, L, C)
        fixed_context: torch.Tensor,  # (B, C)
        keys: torch.Tensor | StepKeys | None,  # (B, L, A) of the `states` layout, or StepKeys
        state: State,  # (layers, B, hidden)
    ) -> Forecast:
        """The autoregressive decoder: one step at a time, each fed the previous prediction."""
        y_prev = past[:, -1, :1]  # (B, 1): last observed target
        steps, weights = [], []
        for t in range(self.horizon):
            if self.attention is None:
                context = fixed_context  # (B, C)
            else:
                query = hidden_of(state)[-1]  # (B, hidden): s_{t-1}, top decoder layer
                if isinstance(self.attention, StepAttention):
                    context, alpha = self.attention(t, query, keys)  # (B, C), (B, L)
                else:
                    context, alpha = self.attention(query, encoded, keys)  # (B, C), (B, L)
                weights.append(alpha)
            parts = [y_prev, context] if future is None else [y_prev, future[:, t], context]
            step_in = torch.cat(parts, dim=-1).unsqueeze(1)  # (B, 1, 1+K+C)
            out, state = self.decoder(step_in, state)  # (B, 1, hidden)
            y = self.output(torch.cat([out.squeeze(1), context], dim=-1))  # (B, Q or 1)
            if self.quantiles:
                y = torch.sort(y, dim=-1).values  # quantiles never cross; fed back as reported
            steps.append(y)
            point = median_of(y, self.quantiles).unsqueeze(-1) if self.quantiles else y  # (B, 1)
            y_prev = self._next_input(point, target, t, teacher_forcing)
        outputs = torch.stack(steps, dim=1)  # (B, H, Q or 1)
        attention = torch.stack(weights, dim=1) if weights else None  # (B, H, L)
        if not self.quantiles:
            return Forecast(mean=outputs.squeeze(-1), attention=attention)  # (B, H)
        return Forecast(mean=median_of(outputs, self.quantiles), attention=attention, quantiles=outputs)

    @staticmethod
    def _next_input(y: torch.Tensor, target: torch.Tensor | None, t: int, ratio: float) -> torch.Tensor:
        """Scheduled sampling: per series, the true value with probability ``ratio``."""
        if target is None or ratio <= 0.0:
            return y
        truth = target[:, t : t + 1]  # (B, 1)
        use_truth = torch.rand_like(truth) < ratio
        return torch.where(use_truth, truth, y)
