"""What every network returns."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Forecast(NamedTuple):
    mean: torch.Tensor  # (B, H) point forecast, in the network's (scaled) units
    attention: torch.Tensor | None = None  # (B, H/w, L/w): decoder step x encoder state
    quantiles: torch.Tensor | None = None  # (B, H, Q) for quantile networks; mean is the median
    segment: int = 1  # w: horizon and look-back steps per attention row and column (SegRNN models)

    def attention_per_step(self) -> torch.Tensor | None:
        """(B, H, L) weights, horizon step x look-back step, whatever the model's segments.

        A segment model attends from H/w decoder steps over L/w segment states; every horizon step
        of a decoder segment shares its row and a look-back segment's weight is spread evenly
        over its w steps, so rows still sum to 1. Done on demand only: at H=720, L=336 the
        expanded tensor is 31M numbers per 128 windows, which training never needs.
        """
        if self.attention is None or self.segment == 1:
            return self.attention
        w = self.segment
        return self.attention.repeat_interleave(w, dim=1).repeat_interleave(w, dim=2) / w
