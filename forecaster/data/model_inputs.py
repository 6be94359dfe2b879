"""The network's inputs for a batch of windows, assembled in one place for training, evaluation
and serving.

Why one function: the training dataset (``WindowDataset.gather``) and the predictor
(``Predictor._forward``) each used to put the blocks together themselves; they agreed, but only
because two pieces of code happened to. A model trained on one column order and served with
another would forecast nonsense without any error, so both now call ``model_inputs``.

The blocks, all scaled, float32, on the network's device:
  past      (B, L, F)   the series' values over the look-back, target first
  calendar  (B, L+H, K) calendar features of the look-back and the forecast steps, or None
  ahead     (B, H, Kf)  future covariates over the forecast steps, or None
  series    (B,)        a panel member's position for a series embedding (-1 unknown), or None
and the network takes ``past`` (B, L, F+K) with the calendar appended, ``future`` (B, H, Kf+K)
with the future covariates first and then the calendar (absent when neither exists), and
``series``."""

from __future__ import annotations

import torch


def model_inputs(
    past: torch.Tensor,  # (B, L, F)
    calendar: torch.Tensor | None = None,  # (B, L+H, K)
    ahead: torch.Tensor | None = None,  # (B, H, Kf)
    series: torch.Tensor | None = None,  # (B,)
) -> dict[str, torch.Tensor]:
    """The batch the network (and the Lightning module's step) reads: keys ``past``, and
    ``future`` / ``series`` when the model has them."""
    lookback = past.shape[1]
    known = []  # what is known for the forecast steps: future covariates, then calendar
    if ahead is not None:
        known.append(ahead)  # (B, H, Kf)
    if calendar is not None:
        past = torch.cat([past, calendar[:, :lookback]], dim=-1)  # (B, L, F+K)
        known.append(calendar[:, lookback:])  # (B, H, K)
    batch = {"past": past}
    if known:
        batch["future"] = torch.cat(known, dim=-1)  # (B, H, Kf+K)
    if series is not None:
        batch["series"] = series  # (B,)
    return batch
