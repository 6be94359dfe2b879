"""Quantile outputs: the pinball loss, and which output is the point forecast."""

from __future__ import annotations

import torch


def median_index(quantiles: list[float]) -> int:
    """The output used as point forecast: 0.5 when present, else the middle one."""
    return quantiles.index(0.5) if 0.5 in quantiles else len(quantiles) // 2


def pinball_loss(predicted: torch.Tensor, target: torch.Tensor, quantiles: torch.Tensor) -> torch.Tensor:
    """Mean pinball loss: ``predicted`` (B, H, Q), ``target`` (B, H), ``quantiles`` (Q,)."""
    error = target.unsqueeze(-1) - predicted  # (B, H, Q)
    return torch.maximum(quantiles * error, (quantiles - 1) * error).mean()
