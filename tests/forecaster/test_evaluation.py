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
from forecaster.data.datamodule import prepare, prepare_series
from forecaster.data.source import load_from_config
from forecaster.evaluation import ATTENTION_EXAMPLES, RetrievalEffect, SplitWindows, evaluate, evaluate_panel
from forecaster.models.step_attention import StepAttention
from forecaster.onnx_export import export_network
from forecaster.predictor import Predictor
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
    result = evaluate(predictor, prepared, "test", retrieval=True)
    picks = result.attention_windows
    assert result.attention.shape == (ATTENTION_EXAMPLES, 8, 16)
    assert picks[0] == 0 and picks[-1] == result.windows - 1  # spread over the whole split
    every = predictor.predict(prepared.windows("test").past(), return_attention=True).attention
    np.testing.assert_allclose(result.attention, every[picks], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(result.attention.sum(-1), 1.0, rtol=1e-5)
    if decoder == "step by step":  # its RNN reads what is retrieved: zeroing it is no comparison
        assert not predictor.attention_is_residual and result.retrieval is None
    else:
        assert_the_retrieval_effect_is_measured(result, predictor, prepared)
        assert evaluate(predictor, prepared, "test").retrieval is None  # not asked for: no extra pass


def with_values_zeroed(predictor):
    """A copy of ``predictor`` whose attention's value projections are 0: every step retrieves 0."""
    zeroed = copy.deepcopy(predictor)
    with torch.no_grad():
        for layer in zeroed.network.modules():
            if isinstance(layer, StepAttention):
                for parameter in layer.values_parameters():
                    parameter.zero_()
    return zeroed


def assert_the_retrieval_effect_is_measured(result, predictor, prepared) -> None:
    """The evaluation's MSE with what the attention retrieves is its forecasts', and without it
    that of a copy of the network whose value projections are 0 (so every step retrieves 0)."""
    actual = prepared.windows("test").target()
    effect = result.retrieval
    assert effect.windows == result.windows
    assert effect.mse == pytest.approx(np.mean((actual - result.forecasts["model"]) ** 2), rel=1e-9)
    without = with_values_zeroed(predictor).predict(prepared.windows("test").past()).mean
    assert effect.mse_without == pytest.approx(np.mean((actual - without) ** 2), rel=1e-6)
    assert effect.mse != pytest.approx(effect.mse_without, rel=1e-6)  # the term does something
    assert effect.ratio == effect.mse / effect.mse_without


def segment_attention(tmp_path, panel: bool = False, layout: str = "lags"):
    """An untrained direct-decoder attention model (the `lags` layout: a residual one) on the
    hourly test file, its value projections drawn at random (`lags` starts them at 0), and its
    prepared data."""
    from tests.forecaster.test_model_inputs import config_for, hourly_file, untrained_predictor

    model = {"architecture": "seq2seq", "decoder": "direct", "cell": "gru", "segment_length": 4}
    config = config_for(
        hourly_file(tmp_path, panel=panel),
        {**model, "attention": "bahdanau", "attention_layout": layout},
        **({"id_column": "id"} if panel else {}),
    )
    prepared = prepare(load_from_config(config.data), config)
    predictor = untrained_predictor(config, prepared)
    torch.manual_seed(1)
    with torch.no_grad():
        for layer in predictor.network.modules():
            if isinstance(layer, StepAttention):
                for parameter in layer.values_parameters():
                    torch.nn.init.normal_(parameter)
    return predictor, prepared


@pytest.mark.parametrize("layout", ["steps", "states"])
def test_a_direct_decoder_whose_output_reads_the_attention_gets_no_retrieval_effect(tmp_path, layout):
    """The `steps` layout's output is its decoder state plus what is retrieved, never trained
    without it; the `states` layout's attention is its decoder's context: zeroing either would
    knock out part of the network, so neither is measured."""
    predictor, prepared = segment_attention(tmp_path, layout=layout)
    assert not predictor.attention_is_residual
    assert evaluate(predictor, prepared, "test", retrieval=True).retrieval is None


def test_the_forecast_without_retrieval_leaves_the_runtime_and_the_switch_as_they_were_when_it_fails(
    tmp_path,
):
    from forecaster.evaluation import forecasts_without_retrieval

    predictor, _ = segment_attention(tmp_path)
    runtime = predictor.runtime
    with pytest.raises(ValueError):  # a look-back shorter than the model's
        forecasts_without_retrieval(predictor, np.zeros((2, 3, 1)), None, None, None)
    assert predictor.runtime is runtime
    assert all(layer.retrieving for layer in predictor.network.modules() if isinstance(layer, StepAttention))


def test_a_model_run_by_onnx_runtime_gets_the_same_retrieval_effect_as_by_torch(tmp_path):
    """The forecast with nothing retrieved is torch's whatever runs the model (a graph has no
    switch), and the model goes on running as it did."""
    from tests.forecaster.test_onnx_export import held_out

    predictor, prepared = segment_attention(tmp_path)
    assert predictor.attention_is_residual
    directory = predictor.save(tmp_path / "model")
    export_network(predictor.network, held_out(prepared, np.arange(16)), directory)
    loaded = Predictor.load(directory).use_runtime("onnx")
    assert loaded.runtime.name == "onnx"
    onnx = evaluate(loaded, prepared, "test", retrieval=True).retrieval
    assert loaded.runtime.name == "onnx"  # restored
    torch_ = evaluate(loaded.use_runtime("torch"), prepared, "test", retrieval=True).retrieval
    assert onnx.mse_without == torch_.mse_without
    assert onnx.ratio == pytest.approx(torch_.ratio, rel=1e-4) and onnx.ratio != pytest.approx(1.0, abs=1e-3)


def test_a_panels_retrieval_effect_is_over_every_members_windows(tmp_path):
    """Forecast one window per call, so the members' windows are split across calls."""
    predictor, prepared = segment_attention(tmp_path, panel=True)
    assert predictor.attention_is_residual
    result = evaluate_panel(predictor, prepared, "test", windows_per_call=1, retrieval=True)
    members = list(result.per_series.values())
    assert len(members) == 2 and all(m.retrieval is not None for m in members)
    assert result.retrieval.windows == result.windows == sum(m.windows for m in members)
    actual = np.concatenate([m.actual for m in members])
    forecasts = np.concatenate([m.forecasts["model"] for m in members])
    assert result.retrieval.mse == pytest.approx(np.mean((actual - forecasts) ** 2), rel=1e-9)
    zeroed = with_values_zeroed(predictor)
    given = [SplitWindows.of(zeroed, part, "test") for part in prepared.members.values()]
    without = np.concatenate(
        [zeroed.predict(g.past, g.times, future=g.future, series_ids=g.ids).mean for g in given]
    )
    assert result.retrieval.mse_without == pytest.approx(np.mean((actual - without) ** 2), rel=1e-6)


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


def test_pooled_effects_weigh_each_part_by_its_windows_and_skip_parts_without_one():
    parts = [RetrievalEffect(1.0, 2.0, windows=10), None, RetrievalEffect(4.0, 5.0, windows=30)]
    assert RetrievalEffect.pooled(parts) == RetrievalEffect(mse=3.25, mse_without=4.25, windows=40)
    assert RetrievalEffect.pooled([None, None]) is None
