"""`forecast retrain`'s data: the model's own, extended with the log's actuals after it ends. An
actual inside the data the model was trained on (the log takes any value on the series' grid)
does not replace the model's value there, and retrain says how many it left out."""

from __future__ import annotations

import pandas as pd
import pytest

from forecaster.errors import ConfigError
from pipelines.commands.monitoring import left_out_line
from pipelines.retrain import Retraining, extended_series


@pytest.fixture
def trained_on() -> pd.Series:
    """A daily series to 1990-12-31, as the model's data is loaded."""
    days = pd.date_range("1981-01-01", "1990-12-31", freq="D")
    return pd.Series(10.0, index=days, name="Temp")


def actuals(**values: float) -> pd.Series:
    """The log's actuals of a series (monitoring.actuals.observed): day=value."""
    index = pd.DatetimeIndex([pd.Timestamp(day.removeprefix("d").replace("_", "-")) for day in values])
    return pd.Series(list(values.values()), index=index, dtype=float)


def test_an_actual_inside_the_training_data_does_not_replace_it(trained_on):
    """1985-06-01 posted as 99 (a replay of the history, a mistyped year) replaced the value the
    model was trained on, silently: a new version trained on a history nobody observed."""
    latest = actuals(d1985_06_01=99.0, d1990_12_31=50.0, d1991_01_01=14.2, d1991_01_02=15.1)
    extended, left_out = extended_series(trained_on, latest)
    assert left_out == 2  # 1985-06-01, and 1990-12-31: the data's last day is the model's too
    assert extended["1985-06-01"] == 10.0 and extended["1990-12-31"] == 10.0
    assert extended["1991-01-01":].tolist() == [14.2, 15.1]
    assert len(extended) == len(trained_on) + 2 and extended.index.is_monotonic_increasing


def test_a_gap_between_the_data_and_the_actuals_is_left_for_the_fill_policy(trained_on):
    """Actuals taken on the grid where no forecast reached (forecasts began a week after the data
    ended): the series is extended with them, the days between left to the model's filling."""
    extended, left_out = extended_series(trained_on, actuals(d1991_01_08=13.0))
    assert left_out == 0 and extended.index[-1] == pd.Timestamp("1991-01-08")
    assert len(extended) == len(trained_on) + 1


def test_actuals_all_inside_the_training_data_leave_nothing_to_retrain_on(trained_on):
    with pytest.raises(
        ConfigError, match="at or before 1990-12-31T00:00:00, where the model's own data ends"
    ):
        extended_series(trained_on, actuals(d1985_06_01=99.0))


def test_retrain_says_how_many_actuals_it_left_out_and_why():
    result = Retraining(
        "models:/m@champion", "1", "degraded", [], True, left_out=2, data_end="1990-12-31T00:00:00"
    )
    assert result.as_json()["left_out"] == 2 and result.as_json()["data_end"] == "1990-12-31T00:00:00"
    line = left_out_line(2, "1990-12-31T00:00:00")
    assert line.startswith("2 actuals from the log left out: at or before 1990-12-31T00:00:00")
    assert "inside the data the model was trained on" in line
