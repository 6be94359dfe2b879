"""Learning on real data: a few epochs of an LSTM must beat the naive forecast."""

import numpy as np

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from forecaster.evaluation import evaluate
from forecaster.training import train_model


def test_lstm_beats_naive_on_melbourne_validation_mae():
    config = ForecastConfig.model_validate(
        {
            "data": {"dataset": "melbourne-temp"},
            "window": {"lookback": 28, "horizon": 7},
            "model": {"cell": "lstm", "hidden_size": 32, "layers": 1, "level_norm": "mean"},
            "train": {
                "epochs": 6,
                "batch_size": 64,
                "learning_rate": 3e-3,
                "progress_bar": False,
                "seed": 1,
            },
        }
    )
    prepared = prepare_series(load_from_config(config.data), config)
    trained = train_model(config, prepared)
    result = evaluate(trained.predictor, prepared, split="val")
    model, naive = result.metrics["model"]["mae"], result.metrics["naive"]["mae"]
    assert np.isfinite(model)
    print(f"LSTM val MAE {model:.3f}, naive {naive:.3f}")
    assert model < 0.95 * naive, f"LSTM val MAE {model:.3f} vs naive {naive:.3f}"
