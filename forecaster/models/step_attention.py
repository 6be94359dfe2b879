"""Attention from every forecast step over every look-back step (the `lags` and `steps` layouts,
issue 41).

Query of forecast step t: [decoder state | position of t | calendar of t]. Key of look-back step
i: [encoder state | position of i | calendar of i]. The score is Bahdanau's additive one with
block-diagonal W and U, so it is exactly a sum of one score per block:

    e[t, i] = content(s_t, h_i) + position(t, i) + calendar(t, i)

and, in the `lags` layout, a fourth block, one learned score per lag (``lag_scores.py``):

    e[t, i] = content + position + calendar + lag(t + L - i)

Each block is computed where it varies, which is what keeps all H x L pairs affordable:

* content: decoder state x encoder state. A segment model (w steps per recurrent step) has H/w
  decoder states and L/w encoder states, so this block is (B, H/w, L/w); every step of a segment
  shares its state, so computing it per step would repeat the same numbers w x w times.
* position: the same for every window, (H, L), once per forward pass (``positions.py``): it
  lets a query find "the same hour yesterday", which no state-only score can single out within a
  segment.
* lag (the `lags` layout): the same for every window too, (H, L), added to the position block.
* calendar (models with calendar features): each step's own hour, weekday and day of year,
  (B, H, L) with a small score size.

The softmax over the L steps factors over segments (``segment_softmax``), so nothing of size
B x H x L is made unless the calendar block needs it or a caller asks for the weights per step.

Values: what a step retrieves is its own inputs (the scaled value; its calendar features too
only with ``retrieves_calendar``, as models saved before that switch have it), projected, and,
unless ``retrieves_states`` is off, its encoder state too: attending to yesterday's hour
retrieves yesterday's value at that hour, not a summary of the day it belongs to. The `lags`
attention retrieves the inputs alone by default (``attention_values: inputs``):
chosen on ETTh1's selection period (benchmarks/README.md, issue 41): retrieving the encoder
states too, the attention model's selection MSE was up to 1.08x the network without attention's
(L=336); with the inputs alone at most 1.003x, and the rows came out sharper. The step-by-step
decoder, whose RNN reads what is retrieved as its context, does the same since the fourth pass (its
state starts from the encoder's final state, so it does not need the encoder states retrieved).

Heads (``heads``): several weightings of the same pairs, whose mean is the attention, as the
Temporal Fusion Transformer's interpretable multi-head attention has it (Lim et al. 2021): the
heads share the values, so what the mean of their weights retrieves is exactly what the model
uses, and the map a user reads (``Forecast.attention_per_step``) is that mean. One head has to
choose between, say, the last few hours and the same hour on earlier days; several need not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from forecaster.models.lag_scores import LAG_SCORE_SCALE, LagScores
from forecaster.models.positions import StepPositions
from forecaster.models.scores import AdditiveScore

POSITION_SIZE = 16  # features per step's position, and the size of the position block's score
CALENDAR_SIZE = 8  # the calendar block's score size: it is the only block of B x H x L x size


@dataclass(frozen=True)
class CalendarColumns:
    """Where the K calendar features sit in the network's inputs (forecaster/data/model_inputs.py):
    in past (B, L, F+K+...) after the F series features, in future (B, H, Kf+K+...) after the Kf
    future covariates."""

    past_start: int
    future_start: int
    size: int

    def of_past(self, past: torch.Tensor) -> torch.Tensor:
        return past[..., self.past_start : self.past_start + self.size]  # (B, L, K)

    def of_future(self, future: torch.Tensor) -> torch.Tensor:
        return future[..., self.future_start : self.future_start + self.size]  # (B, H, K)


class Alignment(NamedTuple):
    """Attention weights in compact form, per head: ``weights`` (B, m, H, L/w) per look-back
    segment and, for w > 1, ``within`` (m, H, L) or (B, m, H, L): each segment's weight shared
    among its w steps. Head k's weight of step i for forecast step t is
    weights[k, t, i // w] * within[k, t, i]; the attention is the mean over the m heads."""

    weights: torch.Tensor
    within: torch.Tensor | None = None

    def reported(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """What a Forecast carries: w = 1, the mean over heads (B, H, L) itself; w > 1, the factors
        (``Forecast.attention_per_step`` multiplies them and takes the mean over heads)."""
        if self.within is None:
            return self.weights.mean(dim=-3), None
        return self.weights, self.within


def per_forecast_step(scores: torch.Tensor, segment: int) -> torch.Tensor:
    """(..., H/w, X) -> (..., H, X): each decoder segment's row for each of its w forecast steps."""
    repeated = scores.unsqueeze(-2).expand(*scores.shape[:-1], segment, scores.shape[-1])  # (..., H/w, w, X)
    return repeated.flatten(-3, -2)  # (..., H, X)


def segment_softmax(segment_scores: torch.Tensor, step_scores: torch.Tensor, segment: int) -> Alignment:
    """softmax over i of segment_scores[t, i // w] + step_scores[t, i], in factored form.

    segment_scores (B, m, H, L/w); step_scores (m, H, L) or (B, m, H, L). exp(a + b) / Z splits
    into the segment's share, exp(a + log sum_segment exp(b)) / Z, times the step's share of its
    segment, exp(b) / sum_segment exp(b): the same numbers, without a B x H x L tensor when
    step_scores is shared by the batch.
    """
    if segment == 1:
        return Alignment(torch.softmax(segment_scores + step_scores, dim=-1))  # (B, m, H, L)
    steps = step_scores.unflatten(-1, (-1, segment))  # (..., m, H, L/w, w)
    mass = torch.logsumexp(steps, dim=-1)  # (..., m, H, L/w): log of a segment's summed exp
    weights = torch.softmax(segment_scores + mass, dim=-1)  # (B, m, H, L/w), sums to 1 over segments
    within = torch.softmax(steps, dim=-1).flatten(-2)  # (..., m, H, L), each segment's w sum to 1
    return Alignment(weights, within)


def mix(alignment: Alignment, segment_values: torch.Tensor | None, step_values: torch.Tensor) -> torch.Tensor:
    """The mean over heads of sum_i alpha[t, i] (segment_values[i // w] + step_values[i]), for
    every forecast step t.

    segment_values (B, L/w, V) or None (nothing per segment), step_values (B, L, V) -> (B, H, V).
    """
    weights, within = alignment
    if within is None:  # w = 1: the segments are the steps
        values = step_values if segment_values is None else segment_values + step_values  # (B, L, V)
        return torch.bmm(weights.mean(dim=1), values)  # (B, H, V)
    from_segments = 0 if segment_values is None else torch.bmm(weights.mean(dim=1), segment_values)
    batch, heads, _, segments = weights.shape
    steps = step_values.reshape(batch, segments, -1, step_values.shape[-1])  # (B, L/w, w, V)
    shares = within.unflatten(-1, (segments, -1))  # (..., m, H, L/w, w)
    pattern = "mhsw,bswv->bmhsv" if shares.dim() == 4 else "bmhsw,bswv->bmhsv"
    inside = torch.einsum(pattern, shares, steps)  # (B, m, H, L/w, V): each segment's steps, mixed
    return from_segments + torch.einsum("bmhs,bmhsv->bhv", weights, inside) / heads  # (B, H, V)


@dataclass
class StepKeys:
    """What the step-by-step decoder computes once per window and reads at every step."""

    content: torch.Tensor  # (B, L, A): the encoder states, projected for the content score
    position: torch.Tensor  # (m, H, L): the position block of every (t, i)
    calendar: torch.Tensor | None  # (B, L, A_cal): the look-back calendar, projected
    future_calendar: torch.Tensor | None  # (B, H, K)
    values: torch.Tensor  # (B, L, V)


class StepAttention(nn.Module):
    def __init__(
        self,
        query_size: int,
        state_size: int,
        input_size: int,
        value_size: int,
        horizon: int,
        lookback: int,
        segment: int = 1,
        season: int = 1,
        calendar: CalendarColumns | None = None,
        heads: int = 1,
        lag_scores: bool = False,
        values_start_at_zero: bool = False,
        retrieves_states: bool = True,
        retrieves_calendar: bool = False,
        lag_scale: float = LAG_SCORE_SCALE,
    ) -> None:
        """``query_size``: the decoder state's; ``state_size``:
        an encoder state's (C); ``input_size``: a look-back step's inputs (the values it also
        retrieves); ``value_size`` V: what a step retrieves (the decoder's outputs Q for the direct
        decoder, whose output adds it; C for the step-by-step one, whose RNN reads it).
        ``lag_scores``: the `lags` layout's score per lag; ``values_start_at_zero``: what a step
        retrieves is 0 until training finds it worth something, so a network that adds it to its
        output starts as the same network without attention. ``retrieves_states``: what a step
        retrieves includes its encoder state; without it, only the look-back step's own inputs
        (``attention_values: inputs``), so what the attention adds is a weighted sum of past
        observations, and it reaches the encoder only through its scores. ``retrieves_calendar``:
        a look-back step's retrieved inputs include its calendar features (``calendar``); without it
        (``attention_retrieves_calendar``, the default), they are its other inputs alone (its observed
        values): a weighted sum of past calendar encodings describes the weights, not the series.
        ``lag_scale``: what the `lags` layout's lag scores are multiplied by (``lag_scores.py``)."""
        super().__init__()
        self.segment = segment
        self.content = AdditiveScore(query_size, state_size, query_size, heads)  # size: as `states` has it
        self.positions = StepPositions(horizon, lookback, POSITION_SIZE, season)
        self.position = AdditiveScore(POSITION_SIZE, POSITION_SIZE, POSITION_SIZE, heads)
        self.lags = LagScores(horizon, lookback, heads, lag_scale) if lag_scores else None
        self.calendar_columns = calendar
        self.calendar = None
        if calendar is not None:
            self.calendar = AdditiveScore(calendar.size, calendar.size, CALENDAR_SIZE, heads)
        self.state_values = nn.Linear(state_size, value_size) if retrieves_states else None
        self.calendar_retrieved = calendar is None or retrieves_calendar
        retrieved_inputs = input_size if self.calendar_retrieved else input_size - calendar.size
        self.input_values = nn.Linear(retrieved_inputs, value_size, bias=False)
        if values_start_at_zero:
            for parameter in self.values_parameters():
                nn.init.zeros_(parameter)
        # False inside ``nothing_retrieved``: every step's value is 0, so the forecast is the
        # network's without what its attention adds (a plain attribute: not saved, not exported)
        self.retrieving = True

    def values_parameters(self) -> list[nn.Parameter]:
        """The projections of what a step retrieves: those the `lags` layout starts at zero."""
        layers = [layer for layer in (self.state_values, self.input_values) if layer is not None]
        return [parameter for layer in layers for parameter in layer.parameters()]

    def input_values_of(self, past: torch.Tensor) -> torch.Tensor:
        """(B, L, F+K+...) -> (B, L, V): what a look-back step's own inputs add to its value."""
        values = self.input_values(self.retrieved_inputs(past))  # (B, L, V)
        return values if self.retrieving else torch.zeros_like(values)

    def retrieved_inputs(self, past: torch.Tensor) -> torch.Tensor:
        """(B, L, F+K+...) -> the inputs a look-back step's value holds: all of them, or all but the
        calendar's K columns."""
        if self.calendar_retrieved:
            return past
        columns = self.calendar_columns
        before, after = past[..., : columns.past_start], past[..., columns.past_start + columns.size :]
        return torch.cat([before, after], dim=-1)  # (B, L, F+...)

    def state_values_of(self, encoded: torch.Tensor) -> torch.Tensor | None:
        """(B, L/w, C) -> (B, L/w, V): what an encoder state adds to its steps' values; None
        where the values are the inputs alone or nothing is retrieved."""
        if self.state_values is None or not self.retrieving:
            return None
        return self.state_values(encoded)

    def position_scores(self) -> torch.Tensor:
        forecast, lookback = self.positions()  # (H, P), (L, P)
        scores = self.position(forecast, self.position.keys(lookback))  # (m, H, L)
        return scores if self.lags is None else scores + self.lags()  # (m, H, L)

    def align(
        self,
        states: torch.Tensor,  # (B, H/w, hidden): the decoder state of each forecast segment
        encoded: torch.Tensor,  # (B, L/w, C): the encoder state of each look-back segment
        past: torch.Tensor,  # (B, L, F+K+...)
        future: torch.Tensor | None,  # (B, H, Kf+K+...)
    ) -> Alignment:
        """The weights of all H forecast steps over all L look-back steps, in one pass."""
        content = self.content(states, self.content.keys(encoded))  # (B, m, H/w, L/w)
        content = per_forecast_step(content, self.segment)  # (B, m, H, L/w)
        steps = self.position_scores()  # (m, H, L), shared by the batch
        if self.calendar is not None:
            columns = self.calendar_columns
            calendar_keys = self.calendar.keys(columns.of_past(past))  # (B, L, A_cal)
            steps = steps + self.calendar(columns.of_future(future), calendar_keys)  # (B, m, H, L)
        return segment_softmax(content, steps, self.segment)

    def retrieve(self, alignment: Alignment, encoded: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        """(B, H, V): what each forecast step's weights retrieve: the inputs, and the encoder states
        where the values hold them (``retrieves_states``)."""
        return mix(alignment, self.state_values_of(encoded), self.input_values_of(past))

    def keys(self, encoded: torch.Tensor, past: torch.Tensor, future: torch.Tensor | None) -> StepKeys:
        """The step-by-step decoder's keys and values (w = 1: an encoder state per step)."""
        calendar = future_calendar = None
        if self.calendar is not None:
            calendar = self.calendar.keys(self.calendar_columns.of_past(past))  # (B, L, A_cal)
            future_calendar = self.calendar_columns.of_future(future)  # (B, H, K)
        values = self.input_values_of(past)  # (B, L, V)
        states = self.state_values_of(encoded)  # (B, L, V) or None (w = 1: a state per step)
        if states is not None:
            values = values + states
        return StepKeys(
            content=self.content.keys(encoded),  # (B, L, A)
            position=self.position_scores(),  # (H, L)
            calendar=calendar,
            future_calendar=future_calendar,
            values=values,
        )

    def forward(self, t: int, query: torch.Tensor, keys: StepKeys) -> tuple[torch.Tensor, torch.Tensor]:
        """Forecast step t of the step-by-step decoder: query (B, hidden), its state s_{t-1} ->
        context (B, V) and weights (B, L), the mean over heads."""
        scores = self.content(query.unsqueeze(1), keys.content).squeeze(-2)  # (B, m, L)
        scores = scores + keys.position[:, t]  # (B, m, L)
        if keys.calendar is not None:
            here = keys.future_calendar[:, t : t + 1]  # (B, 1, K)
            scores = scores + self.calendar(here, keys.calendar).squeeze(-2)  # (B, m, L)
        weights = torch.softmax(scores, dim=-1).mean(dim=1)  # (B, L), sums to 1
        context = torch.bmm(weights.unsqueeze(1), keys.values).squeeze(1)  # (B, V)
        return context, weights


def is_residual(layout: str, decoder: str) -> bool:
    """Whether an attention of this layout and decoder is a residual: the forecast is the network
    without attention's plus what the attention retrieves, which starts at zero (the `lags` layout
    with the direct decoder). The step-by-step decoder's RNN, and the `steps` layout's output, read
    what is retrieved as an input instead."""
    return layout == "lags" and decoder == "direct"


@contextmanager
def nothing_retrieved(network: nn.Module) -> Iterator[bool]:
    """Within it, every StepAttention of ``network`` retrieves zeros, so the network forecasts
    without what its attention adds: the direct decoder emits what the network under the attention
    emits alone, the step-by-step decoder's RNN reads a zero context. For a residual attention
    (``is_residual``) a forecast inside it against one outside tells whether the attention's own
    term lowers the network's error, which its weights alone cannot say (forecaster/evaluation.py,
    ``RetrievalEffect``). Yields whether ``network`` has any StepAttention (the `states` layout's
    has none: nothing changes)."""
    layers = [module for module in network.modules() if isinstance(module, StepAttention)]
    before = [layer.retrieving for layer in layers]  # restored as they were: it may be nested
    for layer in layers:
        layer.retrieving = False
    try:
        yield bool(layers)
    finally:
        for layer, retrieving in zip(layers, before, strict=True):
            layer.retrieving = retrieving
