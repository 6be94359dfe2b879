"""Per-column z-score scaling, fitted on training rows only and stored with the model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class StandardScaler:
    mean: np.ndarray  # (F,)
    std: np.ndarray  # (F,)

    @classmethod
    def fit(cls, values: np.ndarray) -> StandardScaler:
        """``values`` (T, F): training rows only; a constant column keeps std 1 to avoid 0/0."""
        std = values.std(axis=0)
        return cls(mean=values.mean(axis=0), std=np.where(std > 1e-12, std, 1.0))

    def transform(self, values: np.ndarray) -> np.ndarray:
        return (values - self.mean) / self.std

    def to_dict(self) -> dict[str, list[float]]:
        return {"mean": self.mean.tolist(), "std": self.std.tolist()}

    @classmethod
    def from_dict(cls, data: dict[str, list[float]]) -> StandardScaler:
        return cls(mean=np.asarray(data["mean"]), std=np.asarray(data["std"]))
