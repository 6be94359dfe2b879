"""One default per setting, the config's: `forecast train --model seq2seq`, ``Forecaster(model="seq2seq")``
and a YAML's `architecture: seq2seq` build the same model, whose decoder is ModelConfig's default
(issue 42: the CLI once chose the direct decoder while the config said step by step)."""

from __future__ import annotations

from forecaster.api import Forecaster
from forecaster.config import ModelConfig
from forecaster.options import model_settings
from pipelines.config import validate


def validated_model(model: dict):
    return validate({"data": {"dataset": "melbourne-temp"}, "model": model}).model


def test_the_cli_and_the_api_add_nothing_to_what_was_asked():
    assert model_settings("seq2seq") == {"architecture": "seq2seq"}
    assert model_settings("seq2seq", decoder="direct") == {"architecture": "seq2seq", "decoder": "direct"}
    assert Forecaster(model="seq2seq", lookback=96, horizon=24).settings["model"] == {
        "architecture": "seq2seq"
    }


def test_seq2seq_gets_the_configs_decoder_from_every_entry_point():
    default = ModelConfig.model_fields["decoder"].default
    from_cli = validated_model(model_settings("seq2seq"))
    from_yaml = validated_model({"architecture": "seq2seq"})
    assert from_cli.decoder == from_yaml.decoder == default
    assert (from_cli.segment_length, from_cli.family) == (0, "seq2seq-lstm-bahdanau")


def test_asking_for_a_decoder_keeps_it():
    assert validated_model(model_settings("seq2seq", decoder="direct")).decoder == "direct"
    asked = validated_model({**model_settings("seq2seq", decoder="direct"), "segment_length": 4})
    assert (asked.decoder, asked.segment_length) == ("direct", 4)


def test_a_panel_defaults_to_window_scaling_in_the_config_not_the_cli():
    config = validate({"data": {"dataset": "stocks", "id_column": "Ticker"}})
    assert config.model.level_norm == "standard"
    assert validate({"data": {"dataset": "melbourne-temp"}}).model.level_norm == "last"
