"""A learned score per lag: how much a forecast step looks at the step ``lag`` hours before it.

For forecast step t (0-based) and look-back step i (0-based) the lag is t + L - i: the last
look-back step is lag 1 for the first forecast step, and "the same hour yesterday" is lag 24 for
every forecast step. The score of a pair is b[head, lag]: one number per lag, shared by every
forecast step, so a pattern such as "24 and 48 hours back" is L + H - 1 numbers to learn, where the
position block (``positions.py``) has to build it out of embeddings through a tanh. Since the lag
moves with t, the rows of two forecast steps are the same pattern shifted, not the same row: the
alignment differs per step by construction once the scores are not flat.

Why the scale. Adam moves every parameter by about the learning rate per update, whatever its
gradient's size. A score written directly as a parameter then moves by at most lr x updates over a
run: 1e-3 x about 500 updates (ETTh1 at batch 128, the 4 to 10 epochs early stopping allows) is
0.5, and a softmax over 96 steps needs differences of several units to put most of a row's weight
on a few lags. The stored parameter is multiplied by LAG_SCORE_SCALE (a faster learning rate for
these L + H - 1 numbers alone, written into the model so that every optimiser and checkpoint sees
the same thing). It is ``model.attention_lag_scale``, saved with the model; its default,
LAG_SCORE_SCALE, was chosen on the selection period of ETTh1 when the layout was built (the
probes in benchmarks/results/ett-probes.jsonl, seed 0, lag scores alone): at 1 and 10 the rows
stayed near uniform (entropy 0.96 of uniform at L=96, H=24), at 30 and 100 they peaked (0.85 and
0.76 over L=96's six horizons), with selection MSE within 1% of the layout without them. Issue
41's ninth pass probed 30 and 10 on today's model (benchmarks/README.md): the rows less sharp,
and the long horizons at L=96 closer to the network without attention on selection.
"""

from __future__ import annotations

import torch
from torch import nn

from forecaster.alignment import lags
from forecaster.config import LAG_SCORE_SCALE

__all__ = ["LAG_SCORE_SCALE", "LagScores", "lag_index"]


def lag_index(horizon: int, lookback: int) -> torch.Tensor:
    """(H, L): lag - 1 of look-back step i for forecast step t, in 0 .. L + H - 2; the lag is the
    one the alignment metrics read (``forecaster.alignment.lags``)."""
    return torch.from_numpy(lags(horizon, lookback)) - 1


class LagScores(nn.Module):
    """(heads, H, L) scores from (heads, L + H - 1) learned numbers; they start at 0 (no lag
    preferred), so the attention starts from its other scores alone."""

    index: torch.Tensor  # (H, L): the buffer below

    def __init__(self, horizon: int, lookback: int, heads: int, scale: float = LAG_SCORE_SCALE) -> None:
        super().__init__()
        self.scale = scale
        self.lag_score = nn.Parameter(torch.zeros(heads, horizon + lookback - 1))
        # derived from the sizes alone, so not saved with the weights
        self.register_buffer("index", lag_index(horizon, lookback), persistent=False)

    def forward(self) -> torch.Tensor:
        return self.scale * self.lag_score[:, self.index]  # (m, H, L)
