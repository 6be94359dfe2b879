"""The Python API's arguments, as a notebook user mistypes them: each mistake is a ConfigError in
the user's own terms (the argument they wrote, the closest one meant), before any training;
nothing here trains, so these run in make test-fast (tests/test_api.py trains)."""

from __future__ import annotations

import pandas as pd
import pytest

from forecaster import Forecaster
from forecaster.config import ForecastConfig
from forecaster.errors import ConfigError


def frame() -> pd.DataFrame:
    return pd.DataFrame({"date": pd.date_range("2020-01-01", periods=400, freq="D"), "y": range(400)})


def prepared_config(forecaster: Forecaster) -> ForecastConfig:
    """The validated config ``forecaster`` would train with on ``frame()`` (read, not trained)."""
    forecaster.prepare_data(frame(), time_column="date", target="y")
    assert forecaster.config is not None
    return forecaster.config


@pytest.mark.parametrize(
    ("arguments", "meant"),
    [({"model": "seq2seq", "lookbak": 5}, "lookback"), ({"epoch": 3}, "epochs"), ({"trian": {}}, "train")],
    ids=["argument", "another-argument", "section"],
)
def test_a_misspelt_argument_is_named_with_the_one_meant(arguments, meant):
    """Before: ``TypeError: 'int' object is not iterable`` (the stray keyword read as a section)."""
    wrong = next(name for name in arguments if name != "model")
    with pytest.raises(
        ConfigError, match=rf"Forecaster\({wrong}=\.\.\.\): unknown argument; did you mean `{meant}`\?"
    ):
        Forecaster(**arguments)


def test_a_section_that_is_not_a_mapping_is_named():
    with pytest.raises(ConfigError, match=r"Forecaster\(train=\.\.\.\): the train section is a mapping"):
        Forecaster(train=5)


def test_sections_and_intervals_reach_the_config():
    config = prepared_config(Forecaster(train={"batch_size": 16}, intervals=[0.5, 0.9]))
    assert config.train.batch_size == 16 and config.intervals == [0.5, 0.9]


@pytest.mark.parametrize(
    ("columns", "missing"),
    [
        ({}, "`time_column` and `target`"),
        ({"target": "y"}, "`time_column`"),
        ({"time_column": "date"}, "`target`"),
    ],
)
def test_a_dataframe_without_its_columns_named_is_told_which_fit_argument_is_missing(columns, missing):
    """Before: "a file given by `path` needs ...", to a caller who gave no file."""
    with pytest.raises(ConfigError) as raised:
        Forecaster().fit(frame(), **columns)
    message = str(raised.value)
    assert f"a DataFrame needs {missing}:" in message and "fit(df, time_column=" in message, message
    assert "path" not in message, message


@pytest.mark.parametrize("model", ["transformer", "lsmt"])
def test_a_model_that_is_none_is_named_as_given_with_the_choices(model):
    """Before: ``model.cell: Input should be 'rnn', 'lstm' or 'gru'``, a field never typed."""
    with pytest.raises(ConfigError) as raised:
        Forecaster(model)
    message = str(raised.value)
    assert message.startswith(f"Forecaster(model={model!r}): not a model"), message
    assert "rnn, lstm, gru" in message and "seq2seq" in message and "model.cell" not in message, message
    assert ("did you mean `lstm`?" in message) == (model == "lsmt"), message


@pytest.mark.parametrize("model", ["rnn", "lstm", "gru", "seq2seq", None])
def test_every_model_choice_is_taken_with_its_own_attention(model):
    config = prepared_config(Forecaster(model))
    seq2seq = model == "seq2seq"
    assert config.model.architecture == ("seq2seq" if seq2seq else "many_to_one")
    assert config.model.attention == ("bahdanau" if seq2seq else "none")
