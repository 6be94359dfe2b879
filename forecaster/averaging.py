"""Exponential moving average of the weights (``train.ema_decay``), with Lightning's callback.

On a small, shifting series (ETTh1's validation loss bottoms out after two or three epochs of
~60 steps) the weights after any one step carry that step's noise: which epoch early stopping
keeps, and how the model generalises, then depends on where the last batches happened to push
it. An average over many steps is smoother. Lightning's callback swaps the averaged weights in for
every validation (so early stopping watches them) and saves them in the full checkpoint beside
the raw ones (so a resumed run continues both); the best-epoch checkpoint
(forecaster/checkpoints.py) asks this callback for them.

What the average is (torch's ``AveragedModel`` with an EMA function, no warm-up): it starts as a
copy of the weights after the first optimizer step, then each step keeps ``decay`` of it and adds
``1 - decay`` of the new weights. The first step's weights therefore keep a share of
``decay ** n`` after n steps: with 0.99, a fifth after 160 steps (two and a half epochs of the
ETTh1 benchmark at look-back 336, where early stopping kept epoch 3 to 6). So early in training
the average also holds the model near those first weights; the benchmark chose the decay on the
selection window with that included.
"""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import EMAWeightAveraging


class AveragedWeights(EMAWeightAveraging):
    """EMA of every parameter, updated after every optimizer step."""

    def __init__(self, decay: float) -> None:
        # The networks' only buffers are constants (a quantile model's levels): copied, not averaged
        # (averaging would nudge 0.7 to 0.7000006).
        super().__init__(decay=decay, use_buffers=False)

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Lightning builds the averaged copy in ``setup``, before the strategy moves the module to
        its device: move the copy along, or every step on a GPU would average into a CPU copy."""
        if self._average_model is not None:
            self._average_model.to(pl_module.device)

    def averaged_state_dict(self) -> dict[str, torch.Tensor]:
        """The averaged weights under the LightningModule's own keys, detached on the CPU."""
        if self._average_model is None:
            raise RuntimeError("no averaged weights before training starts")
        return {k: v.detach().cpu().clone() for k, v in self._average_model.module.state_dict().items()}
