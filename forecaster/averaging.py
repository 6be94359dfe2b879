"""Exponential moving average of the weights (``train.ema_decay``), with Lightning's callback.

On a small, shifting series (ETTh1's validation loss bottoms out after two or three epochs of
~60 steps) the weights after any one step carry that step's noise: which epoch early stopping
keeps, and how the model generalises, then depends on where the last batches happened to push
it. The average over the last ~1/(1 - decay) steps is smoother. Lightning's callback swaps the
averaged weights in for every validation (so early stopping watches them) and saves them in the
full checkpoint beside the raw ones (so a resumed run continues both); the best-epoch checkpoint
(forecaster/checkpoints.py) asks this callback for them.
"""

from __future__ import annotations

import torch
from pytorch_lightning.callbacks import EMAWeightAveraging


class AveragedWeights(EMAWeightAveraging):
    """EMA of every parameter and buffer, updated after every optimizer step."""

    def __init__(self, decay: float) -> None:
        super().__init__(decay=decay)

    def averaged_state_dict(self) -> dict[str, torch.Tensor]:
        """The averaged weights under the LightningModule's own keys, detached on the CPU."""
        if self._average_model is None:
            raise RuntimeError("no averaged weights before training starts")
        return {k: v.detach().cpu().clone() for k, v in self._average_model.module.state_dict().items()}
