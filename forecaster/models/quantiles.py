"""Quantile outputs: the pinball loss, and which output is the point forecast."""

from __future__ import annotations

import torch


def median_of(outputs: torch.Tensor, quantiles: list[float]) -> torch.Tensor:
    """The point forecast from sorted quantile outputs ``(..., Q)`` -> ``(...)``: the 0.5 output
    when there is one, else the linear interpolation at 0.5 between the two levels around it
    (for [0.1, 0.9], their mean: not the 0.9 output), else the level nearest 0.5."""
    below = [i for i, q in enumerate(quantiles) if q <= 0.5]
    above = [i for i, q in enumerate(quantiles) if q >= 0.5]
    if not below or not above:
        nearest = min(range(len(quantiles)), key=lambda i: abs(quantiles[i] - 0.5))
        return outputs[..., nearest]
    lo, hi = below[-1], above[0]
    if lo == hi:
        return outputs[..., lo]
    share = (0.5 - quantiles[lo]) / (quantiles[hi] - quantiles[lo])
    return outputs[..., lo] + share * (outputs[..., hi] - outputs[..., lo])


def pinball_loss(predicted: torch.Tensor, target: torch.Tensor, quantiles: torch.Tensor) -> torch.Tensor:
    """Mean pinball loss: ``predicted`` (B, H, Q), ``target`` (B, H), ``quantiles`` (Q,)."""
    error = target.unsqueeze(-1) - predicted  # (B, H, Q)
    return torch.maximum(quantiles * error, (quantiles - 1) * error).mean()
