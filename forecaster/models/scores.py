"""Bahdanau's additive score: how well a query matches a key, for every (query, key) pair of two sets.

It takes the keys projected once (``keys``) and score any number of queries against them, so a
step-by-step decoder projects the look-back once per window, not once per step. Leading axes
broadcast: (B, Tq, Dq) queries against (B, Tk, Dk) keys, or (Tq, Dq) against (Tk, Dk) for
scores every window shares (positions). It gives ``heads`` scores per pair, (..., heads, Tq, Tk):
several ways to weigh the same pairs (the recent past, the same hour on earlier days ...).
"""

from __future__ import annotations

import torch
from torch import nn


class AdditiveScore(nn.Module):
    """Bahdanau's e = v^T tanh(W q + U k): a tanh of ``size`` numbers per pair, so B x Tq x Tk x
    size work; it can peak where query and key agree in any learned sense (two phases that match,
    for instance), where a dot product is a bilinear form of limited rank."""

    def __init__(self, query_size: int, key_size: int, size: int, heads: int = 1) -> None:
        """The heads share the tanh features and read them with a v each: a head costs almost
        nothing here."""
        super().__init__()
        self.query_projection = nn.Linear(query_size, size, bias=False)  # W
        self.key_projection = nn.Linear(key_size, size)  # U (and the bias)
        self.score = nn.Linear(size, heads, bias=False)  # v, one per head

    def keys(self, keys: torch.Tensor) -> torch.Tensor:
        return self.key_projection(keys)  # (..., Tk, size)

    def forward(self, queries: torch.Tensor, projected_keys: torch.Tensor) -> torch.Tensor:
        """queries (..., Tq, Dq), projected_keys (..., Tk, size) -> scores (..., heads, Tq, Tk)."""
        projected = self.query_projection(queries).unsqueeze(-2)  # (..., Tq, 1, size)
        # the tanh in place on the sum: autograd keeps only its output, half the memory
        energy = (projected + projected_keys.unsqueeze(-3)).tanh_()  # (..., Tq, Tk, size)
        scores = self.score(energy)  # (..., Tq, Tk, heads)
        rank = scores.dim()  # axes named by position: an exporter misreads movedim's negative ones
        return scores.permute(*range(rank - 3), rank - 1, rank - 3, rank - 2)  # (..., heads, Tq, Tk)
