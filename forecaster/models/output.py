"""What every network returns."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Forecast(NamedTuple):
    mean: torch.Tensor  # (B, H) point forecast, in the network's (scaled) units
    # attention weights, compact (``attention_per_step`` expands them): the `states` layout (B, H/w,
    # L/w), decoder state x encoder state; the `steps` layout (B, H, L), or for w > 1 (B, m, H, L/w),
    # each of m heads' weight per forecast step and look-back segment, ``attention_within`` beside it
    attention: torch.Tensor | None = None
    quantiles: torch.Tensor | None = None  # (B, H, Q) for quantile networks; mean is the median
    segment: int = 1  # w: horizon and look-back steps per attention row and column (SegRNN models)
    # the `steps` layout of a segment model: how each head and forecast step shares a segment's
    # weight among its w look-back steps (each segment's w entries sum to 1); (m, H, L) when the
    # same for every window (no calendar features), else (B, m, H, L)
    attention_within: torch.Tensor | None = None

    def attention_per_step(self) -> torch.Tensor | None:
        """(B, H, L) weights, horizon step x look-back step, whatever the model's layout.

        The `steps` layout of a segment model weighs each look-back segment (B, m, H, L/w), shares
        that weight among the segment's steps (``attention_within``) and averages the m heads, as
        the network does (step_attention.py); the `states` layout attends
        from H/w decoder steps over L/w segment states, so every horizon step of a decoder segment
        shares its row and a segment's weight is spread evenly over its w steps. Rows sum to 1
        either way. Done on demand only: at H=720, L=336 the expanded tensor is 31M numbers per
        128 windows, which training never needs.
        """
        if self.attention is None or self.segment == 1:
            return self.attention
        w = self.segment
        if self.attention_within is not None:
            per_head = self.attention.repeat_interleave(w, dim=-1) * self.attention_within  # (B, m, H, L)
            return per_head.mean(dim=1)  # (B, H, L)
        return self.attention.repeat_interleave(w, dim=1).repeat_interleave(w, dim=2) / w
