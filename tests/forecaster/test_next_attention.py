"""``Forecaster.attention``: the weights of the next forecast, labelled by time, as the service's
``return_attention`` gives them: a row per forecast step summing to 1, a column per look-back step;
refused, by name, for a model without attention."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster import Forecaster
from forecaster.errors import ConfigError
from tests.conftest import REPO

pytestmark = pytest.mark.slow  # trains two tiny models

TINY = {
    "lookback": 14,
    "horizon": 4,
    "hidden_size": 8,
    "layers": 1,
    "epochs": 1,
    "train": {"batch_size": 128, "limit_train_batches": 2, "progress_bar": False},
    "data": {"frequency": "D", "fill": "interpolate"},
}


def melbourne() -> pd.DataFrame:
    return pd.read_csv(REPO / "data" / "daily-min-temperatures.csv")


def test_the_next_forecasts_weights_by_forecast_and_look_back_time():
    df = melbourne()
    f = Forecaster("seq2seq", decoder="direct", **TINY).fit(df, time_column="Date", target="Temp")
    weights = f.attention()
    forecast = f.predict()
    assert weights.shape == (4, 14)
    assert list(weights.index) == list(pd.to_datetime(forecast["Date"]))  # predict's steps
    assert weights.columns[-1] == pd.Timestamp(df["Date"].iloc[-1])  # the last observed day
    assert weights.index.name == "forecast time" and weights.columns.name == "look-back time"
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)
    earlier = f.attention(df.iloc[:-30], time_column="Date", target="Temp")  # another end: other rows
    assert earlier.columns[-1] == pd.Timestamp(df["Date"].iloc[-31])


def test_a_model_without_attention_says_so():
    f = Forecaster("gru", **TINY).fit(melbourne(), time_column="Date", target="Temp")
    with pytest.raises(ConfigError, match="this model has no attention"):
        f.attention()


def test_a_panels_next_forecasts_weights_under_each_series_id():
    """Fit on a long DataFrame: predict() and attention() with no data read it as the panel it is
    (they used to read the two series' rows as one, unsorted, series)."""
    df = melbourne()
    long = pd.concat([df.assign(id="a"), df.assign(id="b", Temp=df["Temp"] * 2).iloc[:-10]])  # b ends earlier
    f = Forecaster("seq2seq", decoder="direct", **TINY).fit(
        long, time_column="Date", target="Temp", id_column="id"
    )
    assert f.predict().shape[0] == 2 * 4
    weights = f.attention()
    assert weights.index.names == ["id", "forecast time"] and weights.shape == (2 * 4, 14)
    assert list(weights.columns) == list(range(14, 0, -1)) and weights.columns.name == "steps back"
    assert not weights.isna().any().any()  # one set of columns though the series end apart
    assert list(weights.index.get_level_values("id").unique()) == ["a", "b"]
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)
