"""A trained network with everything needed to use it on raw data: config, fitted scaler, feature
names, frequency. This is what the MLflow pyfunc, the evaluation and the service all call, so the
same windows give the same numbers everywhere."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from forecaster.config import ForecastConfig
from forecaster.conformal import interval_quantiles, volatility_span, window_volatility
from forecaster.data.calendar import calendar_feature_names, calendar_features, is_sub_daily
from forecaster.data.frequency import seasonal_period, step_of
from forecaster.data.scaling import StandardScaler
from forecaster.models import build_network

WEIGHTS_FILE = "network.pt"
META_FILE = "predictor.json"


@dataclass
class Prediction:
    mean: np.ndarray  # (N, H), original units
    attention: np.ndarray | None = None  # (N, H, L)
    future_times: np.ndarray | None = None  # (N, H) datetime64, when timestamps were given
    quantiles: dict[float, np.ndarray] = field(default_factory=dict)  # level -> (N, H), original units


class Predictor:
    def __init__(
        self,
        network: nn.Module,
        config: ForecastConfig,
        scaler: StandardScaler,
        features: list[str],
        frequency: str,
    ) -> None:
        self.network = network.eval()
        self.config = config
        self.scaler = scaler
        self.features = features  # target first
        self.frequency = frequency
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.conformal: dict[float, np.ndarray] = {}  # level -> (H,) score quantiles (x volatility)

    # -- what the model expects -------------------------------------------------------------
    @property
    def lookback(self) -> int:
        return self.config.window.lookback

    @property
    def horizon(self) -> int:
        return self.config.window.horizon

    @property
    def uses_calendar(self) -> bool:
        return self.config.data.calendar_features

    @property
    def calendar_names(self) -> list[str]:
        return calendar_feature_names(is_sub_daily(self.frequency)) if self.uses_calendar else []

    @property
    def has_attention(self) -> bool:
        model = self.config.model
        return model.architecture == "seq2seq" and model.attention == "bahdanau"

    @functools.cached_property
    def volatility_span(self) -> int:
        """Steps of recent history that scale conformal intervals (one seasonal period). Cached:
        reading the frequency through pandas costs more per served batch than the arithmetic."""
        return volatility_span(self.lookback, seasonal_period(self.frequency))

    @property
    def interval_levels(self) -> list[float]:
        """Central interval levels this model can give: its conformal ones, or those its quantile
        outputs bracket."""
        if self.conformal:
            return sorted(self.conformal)
        available = set(self.config.model.quantiles)
        return [lvl for lvl in self.config.intervals if set(interval_quantiles(lvl)) <= available]

    def to(self, device: str | torch.device, dtype: torch.dtype = torch.float32) -> Predictor:
        self.device = torch.device(device)
        self.dtype = dtype
        self.network.to(device=self.device, dtype=dtype)
        return self

    # -- inference ----------------------------------------------------------------------------
    def predict(
        self,
        values: np.ndarray,
        timestamps: np.ndarray | None = None,
        return_attention: bool = False,
        chunk_size: int = 2048,
    ) -> Prediction:
        """``values``: (N, T, F) raw windows, or (N, T) for a univariate model, T >= L (the last
        L steps are used). ``timestamps`` (N, T) are required for calendar models."""
        past = self._as_windows(values)  # (N, L, F)
        times = None if timestamps is None else np.asarray(timestamps)[:, -self.lookback :]
        if self.uses_calendar and times is None:
            raise ValueError("this model uses calendar features: timestamps are required")
        future_times = None if times is None else self.future_times(times[:, -1])
        means, weights, quantiles = [], [], []
        for lo in range(0, len(past), chunk_size):
            hi = lo + chunk_size
            chunk_times = None if times is None else times[lo:hi]
            chunk_future = None if future_times is None else future_times[lo:hi]
            mean, attention, quantile = self._forward(
                past[lo:hi], chunk_times, chunk_future, return_attention and self.has_attention
            )
            means.append(mean)
            weights.append(attention)
            quantiles.append(quantile)
        attention = None
        if return_attention and self.has_attention:
            attention = np.concatenate(weights) if weights else None
        mean = np.concatenate(means) if means else np.empty((0, self.horizon))
        native = np.concatenate(quantiles) if quantiles and quantiles[0] is not None else None
        return Prediction(mean, attention, future_times, self._quantiles(mean, native, past[:, :, 0]))

    def _quantiles(
        self, mean: np.ndarray, native: np.ndarray | None, past_target: np.ndarray
    ) -> dict[float, np.ndarray]:
        """The network's own quantiles, or conformal interval bounds around the point forecast."""
        if native is not None:
            return {q: native[..., i] for i, q in enumerate(self.config.model.quantiles)}
        bounds = {}
        volatility = window_volatility(past_target, self.volatility_span) if self.conformal else None
        for level, score in sorted(self.conformal.items()):
            lower, upper = interval_quantiles(level)
            width = score * volatility  # (N, H)
            bounds[lower], bounds[upper] = mean - width, mean + width
        return dict(sorted(bounds.items()))

    def _as_windows(self, values: np.ndarray) -> np.ndarray:
        past = np.asarray(values, dtype=np.float64)
        if past.ndim == 2 and len(self.features) == 1:
            past = past[..., None]
        if past.ndim != 3 or past.shape[2] != len(self.features):
            raise ValueError(
                f"expected windows of shape (N, {self.lookback}, {len(self.features)}) "
                f"for features {self.features}, got {past.shape}"
            )
        if past.shape[1] < self.lookback:
            raise ValueError(f"windows need at least {self.lookback} steps, got {past.shape[1]}")
        return past[:, -self.lookback :]

    def future_times(self, last: np.ndarray) -> np.ndarray:
        """(N,) last timestamps -> (N, H) future timestamps at the model's frequency."""
        offset = step_of(self.frequency)
        stamps = pd.DatetimeIndex(last)
        return np.stack([(stamps + h * offset).values for h in range(1, self.horizon + 1)], axis=1)

    def _calendar(self, times: np.ndarray) -> np.ndarray:
        flat = pd.DatetimeIndex(times.reshape(-1))
        return calendar_features(flat, is_sub_daily(self.frequency)).reshape(*times.shape, -1)

    def _forward(
        self,
        past: np.ndarray,
        times: np.ndarray | None,
        future_times: np.ndarray | None,
        return_attention: bool = False,
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        x = self.scaler.transform(past)  # (n, L, F)
        future = None
        if self.uses_calendar:
            x = np.concatenate([x, self._calendar(times)], axis=-1)  # (n, L, F+K)
            future = self._tensor(self._calendar(future_times))  # (n, H, K)
        with torch.inference_mode():
            out = self.network(self._tensor(x), future)
        mean = self.scaler.inverse_target(out.mean.float().cpu().numpy().astype(np.float64))
        weights = out.attention_per_step() if return_attention else None  # (n, H, L)
        attention = None if weights is None else weights.float().cpu().numpy()
        quantiles = None
        if out.quantiles is not None:
            quantiles = self.scaler.inverse_target(out.quantiles.float().cpu().numpy().astype(np.float64))
        return mean, attention, quantiles

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array, dtype=self.dtype, device=self.device)

    # -- persistence --------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu().float() for k, v in self.network.state_dict().items()}
        torch.save(state, directory / WEIGHTS_FILE)
        meta = {
            "config": self.config.model_dump(mode="json"),
            "scaler": self.scaler.to_dict(),
            "features": self.features,
            "frequency": self.frequency,
            "conformal": {str(level): width.tolist() for level, width in self.conformal.items()},
        }
        (directory / META_FILE).write_text(json.dumps(meta, indent=2))
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> Predictor:
        directory = Path(directory)
        meta = json.loads((directory / META_FILE).read_text())
        config = ForecastConfig.model_validate(meta["config"])
        calendar = calendar_feature_names(is_sub_daily(meta["frequency"]))
        network = build_network(
            config.model,
            series_features=len(meta["features"]),
            calendar_features=len(calendar) if config.data.calendar_features else 0,
            horizon=config.window.horizon,
        )
        state = torch.load(directory / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        network.load_state_dict(state)
        predictor = cls(
            network, config, StandardScaler.from_dict(meta["scaler"]), meta["features"], meta["frequency"]
        )
        predictor.conformal = {float(k): np.asarray(v) for k, v in meta.get("conformal", {}).items()}
        return predictor
