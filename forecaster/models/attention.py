"""Bahdanau (additive) attention: e_{t,i} = v^T tanh(W s_{t-1} + U h_i), alpha = softmax(e)."""

from __future__ import annotations

import torch
from torch import nn


class BahdanauAttention(nn.Module):
    def __init__(self, query_size: int, key_size: int, attention_size: int) -> None:
        super().__init__()
        self.query_projection = nn.Linear(query_size, attention_size, bias=False)  # W
        self.key_projection = nn.Linear(key_size, attention_size)  # U (and the bias)
        self.score = nn.Linear(attention_size, 1, bias=False)  # v

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """U h_i for every encoder state, computed once per sequence, not once per decoder step."""
        return self.key_projection(keys)  # (B, L, A)

    def forward(
        self,
        query: torch.Tensor,  # (B, Q): decoder state s_{t-1}
        keys: torch.Tensor,  # (B, L, K): encoder states h_i
        projected_keys: torch.Tensor,  # (B, L, A)
    ) -> tuple[torch.Tensor, torch.Tensor]:
        energy = torch.tanh(self.query_projection(query).unsqueeze(1) + projected_keys)  # (B,L,A)
        weights = torch.softmax(self.score(energy).squeeze(-1), dim=-1)  # (B, L), sums to 1
        context = torch.bmm(weights.unsqueeze(1), keys).squeeze(1)  # (B, K)
        return context, weights

    def attend_all(
        self,
        queries: torch.Tensor,  # (B, H, Q): s_{t-1} for every decoder step t, known in advance
        keys: torch.Tensor,  # (B, L, K): encoder states h_i
        projected_keys: torch.Tensor,  # (B, L, A)
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``forward`` for all H steps in one batched operation: same W, U, v, same numbers.

        Usable when every query is known before any context is needed (the direct decoder, whose
        states do not depend on the contexts); costs B*H*L*A memory instead of B*L*A per step,
        so the tanh runs in place on the sum (autograd keeps only its output) to halve that.
        """
        projected_queries = self.query_projection(queries).unsqueeze(2)  # (B, H, 1, A)
        energy = (projected_queries + projected_keys.unsqueeze(1)).tanh_()  # (B, H, L, A)
        weights = torch.softmax(self.score(energy).squeeze(-1), dim=-1)  # (B, H, L), sums to 1 over L
        contexts = torch.bmm(weights, keys)  # (B, H, K)
        return contexts, weights
