"""`forecast retrain`'s data: the model's own, extended with the log's actuals after it ends. An
actual inside the data the model was trained on (the log takes any value on the series' grid)
does not replace the model's value there, and retrain says how many it left out."""

from __future__ import annotations

import pandas as pd
import pytest

from forecaster.errors import DataError
from pipelines.commands.monitoring import left_out_line, left_out_lines
from pipelines.retrain import Retraining, extended_series, nothing_new, write_series


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
    extension = extended_series(trained_on, latest)
    extended = extension.series
    assert extension.left_out == 2  # 1985-06-01, and 1990-12-31: the data's last day is the model's too
    assert extended["1985-06-01"] == 10.0 and extended["1990-12-31"] == 10.0
    assert extended["1991-01-01":].tolist() == [14.2, 15.1]
    assert len(extended) == len(trained_on) + 2 and extended.index.is_monotonic_increasing


def test_a_gap_between_the_data_and_the_actuals_is_left_for_the_fill_policy(trained_on):
    """Actuals taken on the grid where no forecast reached (forecasts began a week after the data
    ended): the series is extended with them, the days between left to the model's filling."""
    extension = extended_series(trained_on, actuals(d1991_01_08=13.0), "D")
    assert extension.left_out == 0 and extension.series.index[-1] == pd.Timestamp("1991-01-08")
    assert len(extension.series) == len(trained_on) + 1


def test_without_a_fill_policy_the_training_run_refuses_the_gap_naming_it(trained_on, tmp_path):
    """What the module's docstring promises for a model trained without data.fill: the extended
    file is read as its training run reads it, and the gap is an error naming its first step."""
    from forecaster.data.loading import load_series

    extension = extended_series(trained_on, actuals(d1991_01_08=13.0), "D")
    path = write_series(extension.series, "Temp", tmp_path, "gap")
    with pytest.raises(DataError, match=r"7 missing 'D' step\(s\), first at 1991-01-01"):
        load_series(path, "time", "Temp", frequency="D", fill=None)
    filled = load_series(path, "time", "Temp", frequency="D", fill="interpolate")
    assert filled.frame.index[-1] == pd.Timestamp("1991-01-08") and filled.frame["Temp"].notna().all()


def test_actuals_all_inside_the_training_data_leave_nothing_to_retrain_on_without_failing(trained_on):
    """A cron's `forecast retrain --if-degraded` failed (ConfigError, exit 1) when every actual
    lay inside the model's data: nothing new to retrain on is an answer, not an error."""
    latest = actuals(d1985_06_01=99.0, d1990_12_30=10.0)
    extension = extended_series(trained_on, latest, "D")
    assert extension.nothing_new and extension.series is trained_on
    result = nothing_new(
        Retraining("models:/m@champion", "1", "degraded", [], False), latest, trained_on.index[-1], extension
    )
    assert not result.retrained and result.note.startswith("nothing new to retrain on: every one of the 2")
    assert "at or before 1990-12-31T00:00:00, where the model's own data ends" in result.note
    assert (result.left_out, result.corrections) == (2, 1)


def test_corrections_inside_the_training_data_are_counted_apart_and_not_taken(trained_on):
    """Of the actuals inside the model's data, those that differ from its value there are
    corrections: said apart, with how to train on corrected data; the model's values stand."""
    latest = actuals(d1985_06_01=99.0, d1986_01_01=10.0, d1990_12_31=10.000000000001, d1991_01_01=14.2)
    extension = extended_series(trained_on, latest, "D")
    assert (extension.left_out, extension.corrections, extension.taken) == (3, 1, 1)
    assert extension.series["1985-06-01"] == 10.0
    line = left_out_line(3, "1990-12-31T00:00:00", corrections=1)
    assert "1 of them differ from the model's value there: corrections are not taken" in line
    assert "run `forecast train` on it" in line


def test_actuals_off_the_models_grid_after_its_data_are_left_out(trained_on):
    """The log takes a value at a logged step of any model of the series (an hourly version's
    23:00 beside a daily champion): off the daily model's grid it would stop its training run
    ("off the 'D' grid"), so retrain leaves it out and says so."""
    latest = pd.Series(
        [14.2, 3.0, 15.1], index=pd.DatetimeIndex(["1991-01-01", "1991-01-01T23:00", "1991-01-02"])
    )
    extension = extended_series(trained_on, latest, "D")
    assert (extension.taken, extension.off_grid) == (2, 1)
    assert pd.Timestamp("1991-01-01T23:00") not in extension.series.index
    result = Retraining("models:/m@champion", "1", "degraded", [], True, off_grid=1, data_end="1990-12-31")
    assert left_out_lines(result) == [
        "1 actuals after 1990-12-31 left out: off the model's grid (steps of another model's forecasts, "
        "which they score)"
    ]


def test_retrain_says_how_many_actuals_it_left_out_and_why():
    result = Retraining(
        "models:/m@champion", "1", "degraded", [], True, left_out=2, data_end="1990-12-31T00:00:00"
    )
    assert result.as_json()["left_out"] == 2 and result.as_json()["data_end"] == "1990-12-31T00:00:00"
    line = left_out_line(2, "1990-12-31T00:00:00")
    assert line.startswith("2 actuals from the log left out: at or before 1990-12-31T00:00:00")
    assert "inside the data the model was trained on" in line
