"""How well a query matches a key: one score for every (query, key) pair of two sets.

Both take the keys projected once (``keys``) and score any number of queries against them, so a
step-by-step decoder projects the look-back once per window, not once per step. Leading axes
broadcast: (B, Tq, Dq) queries against (B, Tk, Dk) keys, or (Tq, Dq) against (Tk, Dk) for
scores every window shares (positions).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class AdditiveScore(nn.Module):
    """Bahdanau's e = v^T tanh(W q + U k): a tanh of ``size`` numbers per pair, so B x Tq x Tk x
    size work; it can peak where query and key agree in any learned sense (two phases that match,
    for instance), which a dot product needs matching features for."""

    def __init__(self, query_size: int, key_size: int, size: int) -> None:
        super().__init__()
        self.query_projection = nn.Linear(query_size, size, bias=False)  # W
        self.key_projection = nn.Linear(key_size, size)  # U (and the bias)
        self.score = nn.Linear(size, 1, bias=False)  # v

    def keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.key_projection(keys)  # (..., Tk, size)

    def forward(self, queries: torch.Tensor, projected_keys: torch.Tensor) -> torch.Tensor:
        """queries (..., Tq, Dq), projected_keys (..., Tk, size) -> scores (..., Tq, Tk)."""
        projected = self.query_projection(queries).unsqueeze(-2)  # (..., Tq, 1, size)
        # the tanh in place on the sum: autograd keeps only its output, half the memory
        energy = (projected + projected_keys.unsqueeze(-3)).tanh_()  # (..., Tq, Tk, size)
        return self.score(energy).squeeze(-1)  # (..., Tq, Tk)


class ScaledDotScore(nn.Module):
    """Scaled dot-product: (W q) . (U k) / sqrt(size) (Vaswani et al. 2017), a matrix product."""

    def __init__(self, query_size: int, key_size: int, size: int) -> None:
        super().__init__()
        self.query_projection = nn.Linear(query_size, size, bias=False)
        self.key_projection = nn.Linear(key_size, size, bias=False)
        self.scale = 1.0 / math.sqrt(size)

    def keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.key_projection(keys) * self.scale  # (..., Tk, size)

    def forward(self, queries: torch.Tensor, projected_keys: torch.Tensor) -> torch.Tensor:
        """queries (..., Tq, Dq), projected_keys (..., Tk, size) -> scores (..., Tq, Tk)."""
        return self.query_projection(queries) @ projected_keys.transpose(-1, -2)  # (..., Tq, Tk)


SCORES: dict[str, type[AdditiveScore] | type[ScaledDotScore]] = {
    "bahdanau": AdditiveScore,
    "scaled_dot": ScaledDotScore,
}
