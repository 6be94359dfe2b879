"""One assembly of the network's inputs for training and serving: the batch the training dataset
hands the network and the predictor's own, for the same windows, give the same forecast, for every
architecture, with calendar features, future covariates and a panel's series embedding on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import prepare
from forecaster.data.frequency import seasonal_period
from forecaster.data.source import load_from_config
from forecaster.data.windows import as_batch
from forecaster.models import build_network
from forecaster.models.series_embedding import run_network
from forecaster.predictor import Predictor
from forecaster.training import predictor_for
from tests.forecaster.conftest import NETWORKS

LOOKBACK, HORIZON = 12, 4


def hourly_file(root: Path, zone: str | None = None, panel: bool = False) -> Path:
    """Three weeks of hourly load with a daily cycle and a promotion flag known in advance;
    ``zone``: timestamps written with that zone's offsets."""
    rng = np.random.default_rng(0)
    hours = pd.date_range("2021-05-01", periods=24 * 21, freq="h", tz=zone)
    frames = []
    for key, level in ({"a": 10.0, "b": 300.0} if panel else {"a": 10.0}).items():
        promo = (rng.random(len(hours)) < 0.2).astype(float)
        cycle = np.sin(2 * np.pi * hours.hour / 24)
        load = level * (1 + 0.2 * cycle) + 3 * promo + rng.normal(0, 0.3, len(hours))
        frames.append(
            pd.DataFrame(
                {"id": key, "t": hours, "load": load, "temp": rng.normal(0, 1, len(hours)), "promo": promo}
            )
        )
    name = "panel" if panel else "hourly"
    path = root / (f"{name}-{zone.replace('/', '-')}.csv" if zone else f"{name}.csv")
    pd.concat(frames).to_csv(path, index=False)
    return path


def config_for(path: Path, model: dict, **data) -> ForecastConfig:
    return ForecastConfig.model_validate(
        {
            "data": {
                "path": str(path),
                "time_column": "t",
                "target": "load",
                "covariates": ["temp"],
                "future_covariates": ["promo"],
                "calendar_features": True,
                **data,
            },
            "window": {"lookback": LOOKBACK, "horizon": HORIZON},
            "model": {"hidden_size": 8, "layers": 1, "dropout": 0.0, **model},
            "train": {"loss": "quantile"} if "quantiles" in model else {},
            "intervals": [],
        }
    )


def untrained_predictor(config: ForecastConfig, prepared) -> Predictor:
    """A network with its initial weights: the assembly is what is tested, not what it learnt."""
    torch.manual_seed(0)
    calendar = 0 if prepared.parts[0].calendar is None else prepared.parts[0].calendar.shape[1]
    network = build_network(
        config.model,
        series_features=len(prepared.series.columns),
        calendar_features=calendar,
        horizon=HORIZON,
        future_covariates=len(config.data.future_covariates),
        series_count=len(prepared.parts) if config.data.id_column else 0,
        lookback=config.window.lookback,
        season=seasonal_period(prepared.series.frequency),
    )
    return predictor_for(network.eval(), config, prepared)


def training_forecasts(predictor: Predictor, prepared) -> np.ndarray:
    """What the network forecasts for the test windows from the training dataset's batches, in
    the target's units (each series unscaled by its own training scaler)."""
    dataset = prepared.dataset("test")
    batch = as_batch(dataset.__getitems__(list(range(len(dataset)))))
    with torch.inference_mode():
        scaled = run_network(predictor.network, batch).mean.double().numpy()  # (N, H)
    scalers = [part.scaler for part in prepared.parts]
    sizes = [len(part.windows("test", scaled=True)) for part in prepared.parts]
    owner = np.repeat(np.arange(len(scalers)), sizes)
    mean = np.array([scalers[k].mean[0] for k in owner])[:, None]
    std = np.array([scalers[k].std[0] for k in owner])[:, None]
    return scaled * std + mean


def serving_forecasts(predictor: Predictor, prepared) -> np.ndarray:
    """The predictor's forecasts of the same windows from raw values, timestamps and future
    covariates, as the service and `forecast evaluate` call it."""
    forecasts = []
    for part in prepared.parts:
        windows = part.windows("test")
        ids = None if part.series.series_id is None else [part.series.series_id] * len(windows)
        prediction = predictor.predict(
            windows.past(), windows.past_times(), future=windows.future_covariates(), series_ids=ids
        )
        forecasts.append(prediction.mean)
    return np.concatenate(forecasts)


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_training_and_serving_feed_the_network_the_same_inputs(tmp_path, name):
    config = config_for(hourly_file(tmp_path), NETWORKS[name])
    prepared = prepare(load_from_config(config.data), config)
    predictor = untrained_predictor(config, prepared)
    np.testing.assert_allclose(
        serving_forecasts(predictor, prepared), training_forecasts(predictor, prepared), rtol=1e-6, atol=1e-6
    )


def test_a_panel_with_a_series_embedding_gets_the_same_inputs_too(tmp_path):
    """Each series scaled on its own training rows in training; by a stored series' scaler named
    by its id in serving: the same affine scaling, so the same forecast."""
    model = {"cell": "gru", "series_embedding": 3, "level_norm": "standard"}
    config = config_for(hourly_file(tmp_path, panel=True), model, id_column="id")
    prepared = prepare(load_from_config(config.data), config)
    predictor = untrained_predictor(config, prepared)
    np.testing.assert_allclose(
        serving_forecasts(predictor, prepared), training_forecasts(predictor, prepared), rtol=1e-6, atol=1e-5
    )


def test_the_inputs_follow_the_documented_order(tmp_path):
    """past = (values, calendar), future = (future covariates, calendar): a change of order in one
    place would change both sides of the test above, so the order itself is pinned here."""
    config = config_for(hourly_file(tmp_path), {"cell": "gru"})
    prepared = prepare(load_from_config(config.data), config)
    batch = prepared.dataset("test")[0]
    part = prepared.parts[0]
    windows = part.windows("test", scaled=True)
    calendar = part.calendar  # (T, K)
    start = windows.starts[0]
    np.testing.assert_allclose(batch["past"][:, :2].numpy(), windows.past()[0], rtol=1e-6)
    np.testing.assert_allclose(batch["past"][:, 2:].numpy(), calendar[start : start + LOOKBACK], rtol=1e-6)
    np.testing.assert_allclose(batch["future"][:, 0].numpy(), windows.future_covariates()[0, :, 0], rtol=1e-6)
    future_rows = slice(start + LOOKBACK, start + LOOKBACK + HORIZON)
    np.testing.assert_allclose(batch["future"][:, 1:].numpy(), calendar[future_rows], rtol=1e-6)
