"""A trained network with everything needed to use it on raw data: config, fitted scaler, feature
names, frequency. This is what the MLflow pyfunc, the evaluation and the service all call, so the
same windows give the same numbers everywhere.

A panel model (trained across many series, each scaled on its own training rows) scales each
window by its own mean and spread at inference: its network normalises every window that way
(``level_norm: standard``), so the forecast is the same whichever affine scaling came first, and a
series never seen in training is forecast from its own window, with no statistics borrowed from
another series. ``series_ids`` may name a stored series scaler instead (same forecast)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from forecaster.config import ForecastConfig, with_attention_layout_of_its_time
from forecaster.conformal import interval_quantiles, lookback_volatility, volatility_span, window_volatility
from forecaster.data.calendar import calendar_feature_names, calendar_features, is_sub_daily
from forecaster.data.clock import LEGACY
from forecaster.data.frequency import seasonal_period, steps_after
from forecaster.data.model_inputs import model_inputs
from forecaster.data.scaling import StandardScaler
from forecaster.metrics import window_scales
from forecaster.models import build_network
from forecaster.models.series_embedding import SeriesEmbedded
from forecaster.models.step_attention import is_residual
from forecaster.onnx_export import ExportReport
from forecaster.runtime import NetworkRuntime, TorchNetwork, build_runtime, choose_runtime

WEIGHTS_FILE = "network.pt"
SINGLE_SERIES = ""  # the key of a single-series model's MASE scale
META_FILE = "predictor.json"


@dataclass
class Prediction:
    mean: np.ndarray  # (N, H), original units
    attention: np.ndarray | None = None  # (N, H, L)
    future_times: np.ndarray | None = None  # (N, H) datetime64, when timestamps were given
    quantiles: dict[float, np.ndarray] = field(default_factory=dict)  # level -> (N, H), original units
    spread: np.ndarray | None = None  # (N,) the target's scale per window: what float32 is relative to


def without_unused_highway(config: dict, state: dict[str, torch.Tensor]) -> dict:
    """A saved config as the saved weights were trained: before issue 34 a seq2seq network ignored
    ``model.highway`` (its weights have no skip), which is now built or refused; such a model
    loads as it ran, without one."""
    model = config.get("model", {})
    if (
        model.get("architecture") == "seq2seq"
        and model.get("highway")
        and not any(key.endswith("highway.weight") for key in state)
    ):
        return {**config, "model": {**model, "highway": 0}}
    return config


def with_retrieved_states_of_its_weights(config: dict, state: dict[str, torch.Tensor]) -> dict:
    """A saved `lags` config as its saved weights retrieve: a step-by-step model saved while issue
    41's fourth pass was under way (main at dbe9661) has ``attention_values: inputs`` and
    ``attention_retrieves_calendar`` in its config yet retrieved its encoder states; its weights
    hold the states' projection exactly when it did, so it loads as it ran."""
    model = config.get("model", {})
    if (
        model.get("attention_layout") == "lags"
        and model.get("attention_values") == "inputs"
        and any(key.endswith("attention.state_values.weight") for key in state)
    ):
        return {**config, "model": {**model, "attention_values": "states_and_inputs"}}
    return config


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
        # the calmest calibration window's volatility over its series' scale (None: saved before it
        # was kept, and those models keep their intervals as they were)
        self.volatility_floor: float | None = None
        # a panel model's, for a series it never saw: the same over each window's look-back volatility
        self.unseen_volatility_floor: float | None = None
        self.future_scaler: StandardScaler | None = None  # future covariates, fitted on train rows
        self.series_scalers: dict[str, StandardScaler] = {}  # a panel's, by series id
        self.clock = LEGACY  # forecaster.data.clock: the training timestamps' wall clock
        # MASE's scale per training series (a single series' under ""): the in-sample seasonal-naive
        # MAE of its training rows, the scale `forecast evaluate` divides by, kept so the service's
        # live MASE divides by the same number
        self.mase_scales: dict[str, float] = {}
        # what runs the network (forecaster/runtime.py): torch until a verified ONNX export is
        # loaded with the model; ``runtime_note`` says why it is torch when ONNX was the pick
        self.export = ExportReport(verified=False, reason="not exported")
        self.export_directory: Path | None = None
        self.runtime_choice = "auto"
        self.runtime: NetworkRuntime = TorchNetwork(self.network)
        self.runtime_note: str | None = None

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
    def future_covariates(self) -> list[str]:
        """Columns whose values for the H forecast steps every forecast needs."""
        return self.config.data.future_covariates

    @property
    def is_panel(self) -> bool:
        """Trained across many series: each window brings its own scaling."""
        return self.config.data.id_column is not None

    @property
    def has_attention(self) -> bool:
        model = self.config.model
        return model.architecture == "seq2seq" and model.attention != "none"

    @property
    def attention_is_residual(self) -> bool:
        """Its attention is a residual (``step_attention.is_residual``): the same network with
        nothing retrieved is a forecast it was trained around, so the two can be compared
        (forecaster/evaluation.py, ``RetrievalEffect``); elsewhere zeroing what is retrieved
        would knock out part of the network."""
        model = self.config.model
        return self.has_attention and is_residual(model.attention_layout, model.decoder)

    @functools.cached_property
    def volatility_span(self) -> int:
        """Steps of recent history that scale conformal intervals (one seasonal period). Cached:
        reading the frequency through pandas costs more per served batch than the arithmetic."""
        return volatility_span(self.lookback, seasonal_period(self.frequency))

    @property
    def quantile_levels(self) -> list[float]:
        """The keys of a Prediction's ``quantiles``: the network's own quantiles, or the bounds
        of each conformal interval."""
        if self.config.model.quantiles:
            return list(self.config.model.quantiles)
        return sorted({q for level in self.conformal for q in interval_quantiles(level)})

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
        return self.use_runtime(self.runtime_choice)

    def use_runtime(self, choice: str) -> Predictor:
        """Run the network with ``choice`` (auto, onnx, torch) where the device and the model's
        export allow; else with torch, and ``runtime_note`` says why."""
        self.runtime_choice = choice
        name, self.runtime_note = choose_runtime(choice, self.device, self.export, self.dtype)
        if name != self.runtime.name:
            self.runtime = build_runtime(name, self.network, self.export_directory, self.export)
        return self

    # -- inference ----------------------------------------------------------------------------
    def predict(
        self,
        values: np.ndarray,
        timestamps: np.ndarray | None = None,
        return_attention: bool = False,
        chunk_size: int = 2048,
        future: np.ndarray | None = None,
        series_ids: list[str | None] | None = None,
    ) -> Prediction:
        """``values``: (N, T, F) raw windows, or (N, T) for a univariate model, T >= L (the last
        L steps are used). ``timestamps`` (N, T) are required for calendar models; ``future``
        (N, H, Kf) raw values of the future covariates over the forecast steps, for models that
        have them. ``series_ids`` (panel models): a stored series' scaler per window, or None."""
        past = self._as_windows(values)  # (N, L, F)
        ahead = self._as_future(future, len(past))  # (N, H, Kf) or None
        times = None if timestamps is None else np.asarray(timestamps)[:, -self.lookback :]
        if self.uses_calendar and times is None:
            raise ValueError("this model uses calendar features: timestamps are required")
        future_times = None if times is None else self.future_times(times[:, -1])
        centre, spread = self.scales(past, series_ids)  # (N, 1, F) each
        known = self._series_indices(series_ids, len(past))  # (N,) or None
        means: list[np.ndarray] = []
        weights: list[np.ndarray | None] = []
        chunked: list[np.ndarray | None] = []  # the network's own quantiles, per chunk
        for lo in range(0, len(past), chunk_size):
            hi = lo + chunk_size
            chunk_times = None if times is None else times[lo:hi]
            chunk_future = None if future_times is None else future_times[lo:hi]
            chunk_ahead = None if ahead is None else ahead[lo:hi]
            chunk_known = None if known is None else known[lo:hi]
            mean, attention, quantile = self._forward(
                past[lo:hi],
                chunk_times,
                chunk_future,
                chunk_ahead,
                centre[lo:hi],
                spread[lo:hi],
                chunk_known,
                return_attention and self.has_attention,
            )
            means.append(mean)
            weights.append(attention)
            chunked.append(quantile)
        attention = None
        if return_attention and self.has_attention:
            attention = np.concatenate(weights) if weights else None
        mean = np.concatenate(means) if means else np.empty((0, self.horizon))
        native = np.concatenate(chunked) if chunked and chunked[0] is not None else None
        quantiles = self._quantiles(
            mean, native, past[:, :, 0], self._volatility_floors(past, spread, series_ids)
        )
        return Prediction(mean, attention, future_times, quantiles, np.asarray(spread)[:, 0, 0])

    def _volatility_floors(
        self, past: np.ndarray, spread: np.ndarray, series_ids: list[str | None] | None
    ) -> np.ndarray | None:
        """(N,) the least volatility each window's interval is scaled by, raw units: the calmest
        calibration window's, over the series' training standard deviation where the model stored
        one, else (a panel's series it never saw) over the window's whole look-back volatility,
        which a recent flat stretch keeps while its standard deviation goes to 0. None: a model
        saved before."""
        if self.volatility_floor is None:
            return None
        floors = self.volatility_floor * np.asarray(spread[:, 0, 0], dtype=np.float64)
        if self.is_panel and self.unseen_volatility_floor is not None:
            ids = series_ids or [None] * len(past)
            unseen = np.array([key is None or key not in self.series_scalers for key in ids])
            by_lookback = self.unseen_volatility_floor * lookback_volatility(past[:, :, 0])
            floors = np.where(unseen, by_lookback, floors)
        return floors

    def _quantiles(
        self, mean: np.ndarray, native: np.ndarray | None, past_target: np.ndarray, floor: np.ndarray | None
    ) -> dict[float, np.ndarray]:
        """The network's own quantiles, or conformal interval bounds around the point forecast;
        ``floor`` (N,): each window's least volatility (``_volatility_floors``)."""
        if native is not None:
            return {q: native[..., i] for i, q in enumerate(self.config.model.quantiles)}
        bounds = {}
        volatility = window_volatility(past_target, self.volatility_span, floor) if self.conformal else None
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

    def _as_future(self, future: np.ndarray | None, windows: int) -> np.ndarray | None:
        names = self.future_covariates
        if not names:
            if future is not None and np.size(future):
                raise ValueError("this model takes no future covariates")
            return None
        if future is None:
            raise ValueError(f"this model needs the future covariates {names} for the {self.horizon} steps")
        ahead = np.asarray(future, dtype=np.float64)
        if ahead.ndim == 2 and len(names) == 1:
            ahead = ahead[..., None]
        expected = (windows, self.horizon, len(names))
        if ahead.shape != expected:
            raise ValueError(f"future covariates {names}: expected shape {expected}, got {ahead.shape}")
        return ahead

    def scales(
        self, past: np.ndarray, series_ids: list[str | None] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per window (N, 1, F): the centre and spread its values are scaled by. One fitted scaler
        for a single-series model; for a panel model a stored series' scaler where ``series_ids``
        names one, else the window's own mean and standard deviation."""
        count, features = len(past), past.shape[2]
        if not self.is_panel:
            return (
                np.broadcast_to(self.scaler.mean, (count, 1, features)),
                np.broadcast_to(self.scaler.std, (count, 1, features)),
            )
        centre = past.mean(axis=1, keepdims=True)  # (N, 1, F)
        spread = past.std(axis=1, keepdims=True)
        spread = np.where(spread > 1e-12, spread, 1.0)
        for i, key in enumerate(series_ids or []):
            stored = self.series_scalers.get(key) if key is not None else None
            if stored is not None:
                centre[i, 0], spread[i, 0] = stored.mean, stored.std
        return centre, spread

    def _series_indices(self, series_ids: list[str | None] | None, count: int) -> np.ndarray | None:
        """For a model with a series embedding: each window's series position, -1 when unknown."""
        if not isinstance(self.network, SeriesEmbedded):
            return None
        positions = {key: i for i, key in enumerate(self.series_scalers)}
        ids = series_ids or [None] * count
        return np.array([positions.get(key, -1) if key is not None else -1 for key in ids], dtype=np.int64)

    def mase_scales_for(self, series_ids: list[str], past_target: np.ndarray) -> np.ndarray:
        """(n,) MASE scales of n windows (``past_target`` (n, L), raw): a single-series model's
        training scale for every window (its windows are taken to be of its series), a panel's by
        series id; the window's own for a panel series never trained on, or for a model saved
        before scales were stored."""
        if not self.is_panel and SINGLE_SERIES in self.mase_scales:
            return np.full(len(past_target), self.mase_scales[SINGLE_SERIES])
        scales = window_scales(past_target, seasonal_period(self.frequency))
        for i, key in enumerate(series_ids):
            if key in self.mase_scales:
                scales[i] = self.mase_scales[key]
        return scales

    def future_times(self, last: np.ndarray) -> np.ndarray:
        """(N,) last timestamps -> (N, H) future timestamps at the model's frequency."""
        return steps_after(last, self.frequency, self.horizon)

    def _calendar(self, times: np.ndarray) -> np.ndarray:
        flat = pd.DatetimeIndex(times.reshape(-1))
        return calendar_features(flat, is_sub_daily(self.frequency)).reshape(*times.shape, -1)

    def _forward(
        self,
        past: np.ndarray,  # (n, L, F) raw
        times: np.ndarray | None,  # (n, L)
        future_times: np.ndarray | None,  # (n, H)
        ahead: np.ndarray | None,  # (n, H, Kf) raw future covariates
        centre: np.ndarray,  # (n, 1, F)
        spread: np.ndarray,  # (n, 1, F)
        series: np.ndarray | None = None,  # (n,) positions for a series embedding, -1 unknown
        return_attention: bool = False,
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        calendar = None
        if self.uses_calendar:
            window_times = np.concatenate([times, future_times], axis=1)  # (n, L+H)
            calendar = self._tensor(self._calendar(window_times))  # (n, L+H, K)
        batch = model_inputs(
            past=self._tensor((past - centre) / spread),  # (n, L, F)
            calendar=calendar,
            ahead=None if ahead is None else self._tensor(self.future_scaler.transform(ahead)),  # (n, H, Kf)
            series=None if series is None else torch.as_tensor(series, device=self.device),  # (n,)
        )
        with torch.inference_mode():
            out = self.runtime(batch)  # torch, or ONNX Runtime on the exported graph
            weights = out.attention_per_step() if return_attention else None  # (n, H, L)
        target_centre, target_spread = centre[:, :, 0], spread[:, :, 0]  # (n, 1)
        mean = out.mean.float().cpu().numpy().astype(np.float64) * target_spread + target_centre
        attention = None if weights is None else weights.float().cpu().numpy()
        quantiles = None
        if out.quantiles is not None:  # (n, H, Q)
            raw = out.quantiles.float().cpu().numpy().astype(np.float64)
            quantiles = raw * target_spread[..., None] + target_centre[..., None]
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
            "volatility_floor": self.volatility_floor,
            "unseen_volatility_floor": self.unseen_volatility_floor,
            "future_scaler": None if self.future_scaler is None else self.future_scaler.to_dict(),
            "series_scalers": {key: scaler.to_dict() for key, scaler in self.series_scalers.items()},
            "clock": self.clock,
            "mase_scales": self.mase_scales,
        }
        (directory / META_FILE).write_text(json.dumps(meta, indent=2))
        return directory

    @classmethod
    def load(cls, directory: str | Path, runtime: str = "auto") -> Predictor:
        """``runtime``: what runs the network (``use_runtime``)."""
        directory = Path(directory)
        meta = json.loads((directory / META_FILE).read_text())
        state = torch.load(directory / WEIGHTS_FILE, map_location="cpu", weights_only=True)
        saved = with_attention_layout_of_its_time(without_unused_highway(meta["config"], state))
        saved = with_retrieved_states_of_its_weights(saved, state)
        config = ForecastConfig.model_validate(saved)
        calendar = calendar_feature_names(is_sub_daily(meta["frequency"]))
        network = build_network(
            config.model,
            series_features=len(meta["features"]),
            calendar_features=len(calendar) if config.data.calendar_features else 0,
            horizon=config.window.horizon,
            future_covariates=len(config.data.future_covariates),
            series_count=len(meta.get("series_scalers", {})),
            lookback=config.window.lookback,
            season=seasonal_period(meta["frequency"]),
        )
        network.load_state_dict(state)
        predictor = cls(
            network, config, StandardScaler.from_dict(meta["scaler"]), meta["features"], meta["frequency"]
        )
        predictor.conformal = {float(k): np.asarray(v) for k, v in meta.get("conformal", {}).items()}
        predictor.volatility_floor = meta.get("volatility_floor")
        predictor.unseen_volatility_floor = meta.get("unseen_volatility_floor")
        if meta.get("future_scaler"):
            predictor.future_scaler = StandardScaler.from_dict(meta["future_scaler"])
        predictor.series_scalers = {
            key: StandardScaler.from_dict(value) for key, value in meta.get("series_scalers", {}).items()
        }
        predictor.clock = meta.get("clock", LEGACY)
        predictor.mase_scales = {key: float(value) for key, value in meta.get("mase_scales", {}).items()}
        predictor.export, predictor.export_directory = ExportReport.load(directory), directory
        return predictor.use_runtime(runtime)
