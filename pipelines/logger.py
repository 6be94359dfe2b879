"""Lightning's MLflow logger, with epochs as MLflow steps so the UI's curves read per epoch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytorch_lightning.loggers import MLFlowLogger
from pytorch_lightning.utilities import rank_zero_only


class EpochMLFlowLogger(MLFlowLogger):
    """Lightning logs with the global batch step; every metric here is per epoch, so the epoch
    Lightning attaches to each call becomes the step. Hyperparameters are not logged here: the
    pipeline logs the whole validated config instead, once."""

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        metrics = dict(metrics)
        epoch = metrics.pop("epoch", None)
        super().log_metrics(metrics, step=int(epoch) if epoch is not None else step)

    @rank_zero_only
    def log_hyperparams(self, params: Any) -> None:
        return None
