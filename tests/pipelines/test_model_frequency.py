"""`forecast predict` and `forecast evaluate` on a file at another frequency than the model's: one
line naming the file, the time column and both frequencies, exit code 2, instead of hourly readings
read (and forecast) as days. A file at the model's frequency with gaps is read with the fill policy
the model was trained with, as its own data was. A model whose config set its frequency
(data.frequency) forecasts from its own training file, however sparser than that frequency.

One tiny daily model (Melbourne, TINY), trained once for the module; one tiny hourly model trained
on 2-hourly readings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO, empty_tracking_store
from tests.pipelines.helpers import forecast, train_json

pytestmark = pytest.mark.slow  # trains a real model: in make test, not make test-fast

MODEL = "models:/daily/1"


@pytest.fixture(scope="module")
def daily_model(tmp_path_factory) -> tuple[str, Path]:
    """(tracking URI, a folder for data files): a daily model, lookback 14, registered."""
    root = tmp_path_factory.mktemp("model-frequency")
    uri = empty_tracking_store(root / "mlflow.db")
    cwd = os.getcwd()
    os.chdir(root)  # the run's artifacts land in the working directory's mlartifacts/
    try:
        train_json(uri, register="daily")
    finally:
        os.chdir(cwd)
    return uri, root


def temperatures(path: Path, times: pd.DatetimeIndex, time_format: str = "%Y-%m-%d %H:%M:%S") -> Path:
    frame = pd.DataFrame(
        {"Date": times.strftime(time_format), "Temp": 10.0 + (pd.Series(range(len(times))) % 7)}
    )
    frame.to_csv(path, index=False)
    return path


def run(command: str, uri: str, data: Path):
    return forecast(command, "--model-uri", MODEL, "--data", str(data), "--tracking-uri", uri)


@pytest.mark.parametrize(
    ("command", "freq", "rows", "data"),
    [
        ("predict", "h", 100, "hourly (h)"),
        ("predict", "W", 100, "weekly (7D)"),
        ("evaluate", "h", 1500, "hourly (h)"),
    ],
)
def test_data_at_another_frequency_is_refused_naming_both(daily_model, command, freq, rows, data):
    uri, root = daily_model
    path = temperatures(root / f"{command}-{freq}.csv", pd.date_range("1991-01-01", periods=rows, freq=freq))
    result = run(command, uri, path)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {path}: column 'Date': the data is {data}, but this model's data is daily (D); give "
        "data at the model's frequency, or train a model on this data"
    )


def test_the_training_file_with_its_gaps_is_read_with_the_models_fill_policy(daily_model):
    """The bundled Melbourne file, given as a file, misses 1984-12-31 and 1988-12-31: the model
    was trained on it interpolated (the dataset's policy), and forecasts from it so."""
    uri, root = daily_model
    path = shutil.copy(REPO / "data" / "daily-min-temperatures.csv", root / "melbourne.csv")
    result = run("predict", uri, Path(path))
    assert result.exit_code == 0, result.output
    assert "1991-01-01" in result.stdout and "1991-01-04" in result.stdout


def test_a_file_of_exactly_the_look_back_is_forecast(daily_model):
    uri, root = daily_model
    path = temperatures(root / "short.csv", pd.date_range("1991-03-01", periods=14, freq="D"), "%Y-%m-%d")
    result = run("predict", uri, path)
    assert result.exit_code == 0, result.output
    assert "1991-03-15" in result.stdout and "1991-03-18" in result.stdout


def test_a_model_set_to_hourly_on_two_hourly_data_forecasts_from_its_own_file(tmp_path, monkeypatch):
    """data.frequency=h with data.fill=interpolate read the 2-hourly file as hours, filling every
    other one: predict and evaluate read it so again, instead of refusing it as 2-hourly; a file of
    half-hourly readings is still off the hourly grid."""
    monkeypatch.chdir(tmp_path)  # the run's artifacts land in the working directory's mlartifacts/
    uri = empty_tracking_store(tmp_path / "mlflow.db")
    path = temperatures(tmp_path / "two-hourly.csv", pd.date_range("2016-07-01", periods=600, freq="2h"))
    file = ["data.dataset=null", f"data.path={path}", "data.time_column=Date", "data.target=Temp"]
    train_json(uri, *file, "data.frequency=h", "data.fill=interpolate", register="hourly")
    model = ("--model-uri", "models:/hourly/1", "--tracking-uri", uri)
    predicted = forecast("predict", *model, "--data", str(path))
    assert predicted.exit_code == 0, predicted.output
    assert "2016-08-19 23:00:00" in predicted.stdout  # an hour after the last 2-hourly stamp
    evaluated = forecast("evaluate", *model, "--data", str(path))
    assert evaluated.exit_code == 0, evaluated.output
    halves = temperatures(
        tmp_path / "half-hourly.csv", pd.date_range("2016-07-01", periods=600, freq="30min")
    )
    refused = forecast("predict", *model, "--data", str(halves))
    assert refused.exit_code == 2 and "(2016-07-01 00:30:00 is off its grid)" in refused.output, (
        refused.output
    )
