"""An evaluation keeps the attention weights of the few windows its heat map shows, the same
weights the predictor gives when asked for every window: not N x H x L numbers per split; and
what the attention's retrieved term does to the forecast, against the same network's forecast
with that term at zero."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from forecaster.evaluation import ATTENTION_EXAMPLES, evaluate
from forecaster.models.step_attention import StepAttention
from forecaster.training import train_model

DECODERS = {
    "step by step": {"decoder": "autoregressive"},
    "direct, segments": {"decoder": "direct", "segment_length": 4},
}


@pytest.mark.parametrize("decoder", sorted(DECODERS))
def test_the_evaluation_keeps_the_attention_of_its_example_windows(decoder):
    config = ForecastConfig.model_validate(
        {
            "data": {"dataset": "melbourne-temp"},
            "window": {"lookback": 16, "horizon": 8},
            "model": {
                "architecture": "seq2seq",
                "attention": "bahdanau",
                "hidden_size": 8,
                **DECODERS[decoder],
            },
            "train": {"epochs": 1, "limit_train_batches": 2, "progress_bar": False},
        }
    )
    prepared = prepare_series(load_from_config(config.data), config)
    predictor = train_model(config, prepared).predictor
    result = evaluate(predictor, prepared, "test")
    picks = result.attention_windows
    assert result.attention.shape == (ATTENTION_EXAMPLES, 8, 16)
    assert picks[0] == 0 and picks[-1] == result.windows - 1  # spread over the whole split
    every = predictor.predict(prepared.windows("test").past(), return_attention=True).attention
    np.testing.assert_allclose(result.attention, every[picks], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(result.attention.sum(-1), 1.0, rtol=1e-5)
    assert_the_retrieval_effect_is_measured(result, predictor, prepared)


def assert_the_retrieval_effect_is_measured(result, predictor, prepared) -> None:
    """The evaluation's MSE with what the attention retrieves is its forecasts', and without it
    that of a copy of the network whose value projections are 0 (so every step retrieves 0)."""
    actual = prepared.windows("test").target()
    effect = result.retrieval
    assert effect.windows == result.windows
    assert effect.mse == pytest.approx(np.mean((actual - result.forecasts["model"]) ** 2), rel=1e-9)
    zeroed = copy.deepcopy(predictor)
    with torch.no_grad():
        for layer in zeroed.network.modules():
            if isinstance(layer, StepAttention):
                for parameter in layer.values_parameters():
                    parameter.zero_()
    without = zeroed.predict(prepared.windows("test").past()).mean
    assert effect.mse_without == pytest.approx(np.mean((actual - without) ** 2), rel=1e-6)
    assert effect.mse != pytest.approx(effect.mse_without, rel=1e-6)  # the term does something
    assert effect.ratio == effect.mse / effect.mse_without


def test_a_model_without_attention_keeps_none():
    config = ForecastConfig.model_validate(
        {
            "data": {"dataset": "melbourne-temp"},
            "window": {"lookback": 16, "horizon": 8},
            "model": {"hidden_size": 8, "layers": 1},
            "train": {"epochs": 1, "limit_train_batches": 2, "progress_bar": False},
        }
    )
    prepared = prepare_series(load_from_config(config.data), config)
    result = evaluate(train_model(config, prepared).predictor, prepared, "test")
    assert result.attention is None and result.attention_windows is None
    assert result.retrieval is None
