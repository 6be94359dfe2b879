"""Known-future covariates: every network reads their values for the H forecast steps, the data
path feeds them aligned with the targets, the predictor asks for them, and a model given a driver
it can see coming beats the same model without it by a wide margin."""

from __future__ import annotations

from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import prepare
from forecaster.data.source import load_from_config
from forecaster.evaluation import evaluate
from forecaster.models import build_network
from forecaster.predictor import Predictor
from forecaster.pyfunc import ForecastPyfunc, save_predictor_dir
from forecaster.training import train_model

B, L, H, F, K, KF = 8, 12, 5, 2, 4, 2


@pytest.mark.parametrize("calendar", [0, K])
def test_every_network_reads_the_future_covariates_of_each_step(model_config, calendar):
    torch.manual_seed(0)
    network = build_network(model_config, F, calendar, H, future_covariates=KF, lookback=L).eval()
    past = torch.randn(B, L, F + calendar)
    future = torch.randn(B, H, KF + calendar)
    base = network(past, future).mean
    assert base.shape == (B, H)
    changed = future.clone()
    changed[:, -1, 0] += 3.0  # the first future covariate at the last forecast step
    assert not torch.allclose(network(past, changed).mean, base)


def driver_frame(length: int = 900, seed: int = 0) -> pd.DataFrame:
    """Daily target = weekly wave + a jump on 'promo' days (known in advance, random) + noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    promo = (rng.random(length) < 0.2).astype(float)
    y = 20 + 3 * np.sin(2 * np.pi * t / 7) + 6 * promo + rng.normal(0, 0.3, length)
    return pd.DataFrame({"t": pd.date_range("2020-01-01", periods=length, freq="D"), "y": y, "promo": promo})


def driver_config(path: Path, future: list[str], **model) -> ForecastConfig:
    return ForecastConfig.model_validate(
        {
            "data": {"path": str(path), "time_column": "t", "target": "y", "future_covariates": future},
            "window": {"lookback": 21, "horizon": 7},
            "model": {"cell": "gru", "hidden_size": 32, "layers": 1, "dropout": 0.0, **model},
            "train": {
                "epochs": 15,
                "batch_size": 32,
                "learning_rate": 1e-2,
                "progress_bar": False,
                "seed": 3,
            },
        }
    )


@pytest.fixture
def driver_csv(tmp_path) -> Path:
    path = tmp_path / "driver.csv"
    driver_frame().to_csv(path, index=False)
    return path


def test_training_windows_carry_the_future_covariates_of_their_target_steps(driver_csv):
    config = driver_config(driver_csv, ["promo"])
    prepared = prepare(load_from_config(config.data), config)
    assert prepared.series.columns == ["y"] and prepared.series.future_covariates == ["promo"]
    windows = prepared.windows("train", scaled=True)
    item = prepared.dataset("train")[3]
    start = windows.starts[3]
    promo = prepared.series.frame["promo"].to_numpy()
    expected = prepared.future_scaler.transform(promo[start + 21 : start + 28, None])
    np.testing.assert_allclose(item["future"].numpy(), expected, rtol=1e-6)
    assert item["past"].shape == (21, 1)  # the past is the series' own columns
    raw = prepared.windows("test").future_covariates()
    assert raw.shape == (len(prepared.windows("test")), 7, 1) and set(np.unique(raw)) <= {0.0, 1.0}


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_a_known_future_driver_wins_by_a_wide_margin(driver_csv):
    """The promo jump (6) is a random 20% of days: without seeing it coming, the best a model can
    do is hedge; with it, the error falls to about the noise."""
    results = {}
    for future in ([], ["promo"]):
        config = driver_config(driver_csv, future, level_norm="mean")
        prepared = prepare(load_from_config(config.data), config)
        trained = train_model(config, prepared)
        results[bool(future)] = evaluate(trained.predictor, prepared, "test").metrics["model"]["mae"]
    print(f"test MAE without the driver {results[False]:.3f}, with it {results[True]:.3f}")
    assert results[True] < 0.5 * results[False]


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_the_predictor_and_pyfunc_take_future_values_and_refuse_a_forecast_without(driver_csv, tmp_path):
    config = driver_config(driver_csv, ["promo"])
    config.train.epochs = 1
    prepared = prepare(load_from_config(config.data), config)
    predictor = train_model(config, prepared).predictor
    windows = prepared.windows("test")
    past, ahead = windows.past()[:4, :, 0], windows.future_covariates()[:4]
    with pytest.raises(ValueError, match=r"needs the future covariates \['promo'\] for the 7 steps"):
        predictor.predict(past)
    with pytest.raises(ValueError, match=r"expected shape \(4, 7, 1\)"):
        predictor.predict(past, future=ahead[:, :5])
    expected = predictor.predict(past, future=ahead).mean
    np.testing.assert_allclose(predictor.predict(past, future=ahead[..., 0]).mean, expected)  # (N, H) for one
    reloaded = Predictor.load(predictor.save(tmp_path / "saved"))
    np.testing.assert_allclose(reloaded.predict(past, future=ahead).mean, expected, rtol=1e-6)
    model_path = tmp_path / "pyfunc"
    mlflow.pyfunc.save_model(
        model_path,
        python_model=ForecastPyfunc(),
        artifacts={"predictor": save_predictor_dir(predictor, tmp_path / "artifacts")},
    )
    loaded = mlflow.pyfunc.load_model(str(model_path))
    np.testing.assert_allclose(loaded.predict({"values": past, "future": ahead}), expected, rtol=1e-6)
