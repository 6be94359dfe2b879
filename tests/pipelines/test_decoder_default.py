"""`forecast train --model seq2seq` gets the direct decoder, segmenting when L and H allow, unless a
decoder is asked for; what the CLI builds validates as a config."""

from __future__ import annotations

import pytest

from pipelines.cli import default_segment_length, model_settings, seq2seq_decoder, window_of
from pipelines.config import validate


def cli_model(*, decoder: str | None = None, yaml_model: dict | None = None, window: dict | None = None):
    """The model section `train` ends with for ``--model seq2seq`` (and ``--decoder``) over a YAML's."""
    settings = {"data": {"dataset": "melbourne-temp"}, "model": dict(yaml_model or {})}
    if window:
        settings["window"] = window
    settings["model"].update(model_settings("seq2seq", None, None, None, decoder))
    settings["model"] = seq2seq_decoder(settings["model"], *window_of(settings))
    return validate(settings).model


@pytest.mark.parametrize(
    ("lookback", "horizon", "segment"),
    [(96, 24, 24), (336, 720, 24), (96, 96, 24), (14, 4, 2), (96, 7, 0), (8, 8, 2), (6, 6, 0)],
)
def test_segment_divides_both_and_leaves_four_encoder_segments(lookback, horizon, segment):
    assert default_segment_length(lookback, horizon) == segment


def test_seq2seq_defaults_to_the_direct_decoder_segmented_when_the_lookback_allows():
    model = cli_model()  # the default window: L=96, H=24
    assert (model.decoder, model.segment_length) == ("direct", 24)
    assert model.family == "seq2seq-direct-lstm-bahdanau"
    unsegmented = cli_model(window={"lookback": 96, "horizon": 7})
    assert (unsegmented.decoder, unsegmented.segment_length) == ("direct", 0)


def test_asking_for_a_decoder_or_a_yaml_that_names_one_keeps_it():
    assert cli_model(decoder="autoregressive").decoder == "autoregressive"
    assert cli_model(decoder="autoregressive").segment_length == 0
    assert cli_model(yaml_model={"decoder": "autoregressive"}).decoder == "autoregressive"
    explicit = cli_model(decoder="direct", yaml_model={"segment_length": 12})
    assert (explicit.decoder, explicit.segment_length) == ("direct", 12)
