"""What a training run ends with (`forecast train`, its sweep and retrain, and ``Forecaster.log``):
what `forecast train` prints and its --json document."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.registry import Promotion


@dataclass
class TrainingOutcome:
    run_id: str
    run_name: str
    model_uri: str
    family: str
    metrics: dict[str, dict[str, float]]  # forecaster name -> metric -> value (test split)
    selection_metrics: dict[str, dict[str, float]]  # the same on the selection score's folds (mean)
    test_windows: int
    seconds: float
    epochs: int
    registered_name: str | None = None
    registered_version: str | None = None
    promotion: Promotion | None = None
    test_forecasts: np.ndarray | None = field(default=None, repr=False)  # (N, H) as computed here
    intervals: dict[str, dict[str, float]] = field(default_factory=dict)  # "80" -> coverage, width
    per_series: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # a panel's, test
    selection_by_fold: list[dict[str, dict[str, float]]] = field(default_factory=list)  # fold 1 first
    model_metadata: dict[str, Any] | None = field(default=None, repr=False)  # the logged model's
    # attention models: the alignment of test windows' weights (forecaster/alignment.py), reported only
    alignment: dict[str, float] | None = None
    # attention models: MSE with / without what the attention retrieves, "selection" and "test"
    # (forecaster/evaluation.py, ``RetrievalEffect``; test reported only)
    retrieval: dict[str, float] | None = None
    # the fit alone (``seconds``: the whole command, evaluation and logging too; after a --resume
    # both count from the resume, docs/training.md); benchmarks/ett_benchmark.py reads it
    train_seconds: float = 0.0

    def as_json(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "model_uri": self.model_uri,
            "registered_name": self.registered_name,
            "registered_version": self.registered_version,
            "promoted": None if self.promotion is None else self.promotion.promoted,
            "family": self.family,
            "test_windows": self.test_windows,
            "seconds": round(self.seconds, 2),
            "metrics": self.metrics,
            "selection_metrics": self.selection_metrics,
            "intervals": self.intervals,
            **({"alignment": self.alignment} if self.alignment else {}),
            **({"attention_retrieved_mse_ratio": self.retrieval} if self.retrieval else {}),
            **({"per_series": self.per_series} if self.per_series else {}),
        }
