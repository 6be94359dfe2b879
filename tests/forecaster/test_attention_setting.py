"""Only seq2seq networks have attention, and the config says so: with nothing set a many-to-one
network's ``model.attention`` is `none` (what its run logs) and a seq2seq one's `bahdanau`;
attention asked of a network without it is refused by name instead of ignored; and a many-to-one
model saved when every config said `bahdanau` still loads, as the network it always was."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from forecaster import Forecaster
from forecaster.config import ForecastConfig
from forecaster.data.scaling import StandardScaler
from forecaster.errors import ConfigError
from forecaster.models import build_network
from forecaster.predictor import META_FILE, Predictor

L, H, HOURLY = 12, 4, 24
DATA = {"path": "x.csv", "time_column": "t", "target": "y"}


def config_of(**model) -> ForecastConfig:
    return ForecastConfig.model_validate({"data": DATA, "model": model})


def test_with_nothing_set_each_architecture_has_its_own_attention():
    assert config_of().model.attention == "none"
    assert config_of(cell="gru").model.attention == "none"
    assert config_of(architecture="seq2seq").model.attention == "bahdanau"
    assert config_of(architecture="seq2seq", attention="none").model.attention == "none"
    assert config_of(attention="none").model.attention == "none"  # explicitly none: fine


@pytest.mark.parametrize(
    "arguments",
    [
        {"attention": "bahdanau"},
        {"model": "gru", "attention": "bahdanau"},
        {"model": {"attention": "bahdanau"}},
    ],
    ids=["default-model", "named-cell", "model-section"],
)
def test_attention_asked_of_a_many_to_one_network_is_refused_by_name(arguments):
    """Before: a plain LSTM trained without a word, logged as model.attention=bahdanau."""
    with pytest.raises(ConfigError) as raised:
        Forecaster(**arguments).prepare_data("melbourne-temp")
    message = str(raised.value)
    assert "model.attention" in message and "--attention" in message, message
    assert "--model seq2seq" in message and "architecture: seq2seq" in message, message


def saved_many_to_one(directory) -> Predictor:
    config = ForecastConfig.model_validate(
        {"data": DATA, "window": {"lookback": L, "horizon": H}, "model": {"hidden_size": 8, "layers": 1}}
    )
    torch.manual_seed(0)
    network = build_network(config.model, 1, 0, H, lookback=L, season=HOURLY)
    predictor = Predictor(
        network, config, StandardScaler(mean=np.array([10.0]), std=np.array([2.0])), ["y"], "h"
    )
    predictor.save(directory)
    return predictor


def test_a_many_to_one_model_saved_saying_bahdanau_loads_and_forecasts_as_it_did(tmp_path):
    """Every many-to-one model saved before this change has model.attention: bahdanau in its
    config (the field's default then, never built): it must load, not be refused by the rule
    above, and read `none`, what its network has."""
    before = saved_many_to_one(tmp_path / "lstm")
    meta = json.loads((tmp_path / "lstm" / META_FILE).read_text())
    assert meta["config"]["model"]["attention"] == "none"  # saved now: what it has
    meta["config"]["model"]["attention"] = "bahdanau"  # as saved before
    (tmp_path / "lstm" / META_FILE).write_text(json.dumps(meta))

    loaded = Predictor.load(tmp_path / "lstm")
    assert loaded.config.model.architecture == "many_to_one"
    assert loaded.config.model.attention == "none" and not loaded.has_attention
    windows = np.random.default_rng(0).normal(10, 2, size=(5, L))
    np.testing.assert_array_equal(loaded.predict(windows).mean, before.predict(windows).mean)


def test_a_config_file_logged_before_reads_its_many_to_one_attention_as_none(tmp_path):
    """A run's config.yaml from before the rule says `bahdanau` of its LSTM: training from it again
    (`forecast train --config`, a sweep's base) reads it as the network it was, not refused."""
    from pipelines.config import load_run_config

    logged = tmp_path / "config.yaml"
    logged.write_text("data: {dataset: etth1}\nmodel: {architecture: many_to_one, attention: bahdanau}\n")
    assert load_run_config(logged).model.attention == "none"
    with pytest.raises(ConfigError, match="only seq2seq has attention"):  # asked for now: refused
        load_run_config(logged, ["model.attention=bahdanau"])


def test_a_seq2seq_config_given_a_cell_model_is_that_many_to_one_network(tmp_path):
    """`--config seq2seq.yaml --model lstm`: the cell's network, without the file's attention;
    `--attention bahdanau` beside it is refused."""
    from forecaster.options import merge, model_settings, read_yaml

    path = tmp_path / "seq2seq.yaml"
    path.write_text("data: {dataset: etth1}\nmodel: {architecture: seq2seq, attention: bahdanau}\n")
    settings = merge(read_yaml(path), "model", model_settings("lstm"))
    assert ForecastConfig.model_validate(settings).model.attention == "none"
    asked = merge(read_yaml(path), "model", model_settings("lstm", attention="bahdanau"))
    with pytest.raises(ValueError, match="only seq2seq has attention"):
        ForecastConfig.model_validate(asked)


def test_a_cell_model_over_a_direct_decoder_config_drops_the_decoder_too(tmp_path):
    from forecaster.options import merge, model_settings, read_yaml

    path = tmp_path / "direct.yaml"
    path.write_text("data: {dataset: etth1}\nmodel: {architecture: seq2seq, decoder: direct}\n")
    config = ForecastConfig.model_validate(merge(read_yaml(path), "model", model_settings("lstm")))
    assert (config.model.architecture, config.model.decoder) == ("many_to_one", "autoregressive")
