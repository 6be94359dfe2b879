"""Lightning's MLflow logger, with epochs as MLflow steps so the UI's curves read per epoch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytorch_lightning.loggers import MLFlowLogger
from pytorch_lightning.utilities import rank_zero_only


class EpochMLFlowLogger(MLFlowLogger):
    """Lightning logs with the global batch step; every metric here is per epoch, so the epoch
    Lightning attaches to each call becomes the step. Hyperparameters are not logged here: the
    pipeline logs the whole validated config instead, once. A resumed run passes the steps it
    already holds (``logged``): the epoch replayed after a kill adds no second point."""

    def __init__(self, *args: Any, logged: dict[str, set[int]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logged = logged or {}

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        metrics = dict(metrics)
        epoch = metrics.pop("epoch", None)
        step = int(epoch) if epoch is not None else step
        metrics = {k: v for k, v in metrics.items() if step not in self.logged.get(k, ())}
        if metrics:
            super().log_metrics(metrics, step=step)

    @rank_zero_only
    def log_hyperparams(self, params: Any) -> None:
        return None
