"""The Python API as a notebook uses it, nothing else imported from this project: fit on a pandas
DataFrame, evaluate beside the baselines, log and register to MLflow, load the champion back and
forecast; and the same figures as the CLI's on the same data, seed and tiny settings (TINY)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from forecaster import Forecaster
from forecaster.errors import ConfigError
from tests.conftest import REPO
from tests.pipelines.helpers import forecast, train_json

pytestmark = pytest.mark.slow  # trains real models: in make test, not make test-fast

# tests/conftest.py's TINY, as a notebook writes it (the data as a DataFrame, not a bundled name)
TINY_ARGS = {
    "lookback": 14,
    "horizon": 4,
    "hidden_size": 8,
    "layers": 1,
    "epochs": 2,
    "train": {"batch_size": 128, "limit_train_batches": 4, "progress_bar": False},
}
TINY_FILE = {"data": {"frequency": "D", "fill": "interpolate"}}  # what the bundled dataset says


def melbourne() -> pd.DataFrame:
    return pd.read_csv(REPO / "data" / "daily-min-temperatures.csv")


def test_fit_evaluate_log_load_predict_as_a_notebook_does(tracking_uri):
    df = melbourne()
    f = Forecaster("gru", **TINY_ARGS, **TINY_FILE).fit(df, time_column="Date", target="Temp")

    scores = f.evaluate()
    assert list(scores.index) == ["model", "naive", "seasonal_naive"]
    assert {"mae", "rmse", "mase", "selection_mae"} <= set(scores.columns)
    assert scores.attrs["windows"] > 0 and scores.attrs["split"] == "test"

    forecasts = f.predict(df)
    assert list(forecasts.columns) == ["Date", "Temp_forecast", "Temp_q0.1", "Temp_q0.9"]
    assert len(forecasts) == 4 and forecasts["Date"].iloc[0] == pd.Timestamp("1991-01-01")
    assert (forecasts["Temp_q0.1"] <= forecasts["Temp_forecast"]).all()

    logged = f.log(experiment="notebook", register="notebook-gru", allow_worse_than_naive=True)
    assert logged.registered_version == "1" and logged.promoted, logged.reason
    assert logged.metrics["model"]["mae"] == pytest.approx(scores.loc["model", "mae"])

    champion = Forecaster.load("models:/notebook-gru@champion")
    pd.testing.assert_frame_equal(champion.predict(df), forecasts)
    # the same series under another column name, named by target=: the forecasts under that name
    renamed = champion.predict(df.rename(columns={"Temp": "temp_c"}), target="temp_c")
    pd.testing.assert_frame_equal(renamed, forecasts.rename(columns=lambda c: c.replace("Temp", "temp_c")))
    again = champion.evaluate(df, time_column="Date", target="Temp")
    pd.testing.assert_frame_equal(again, scores, check_exact=False, rtol=1e-6)


def test_the_api_and_the_cli_give_the_same_figures_on_the_same_data(tracking_uri, tmp_path):
    cli = train_json(tracking_uri, "model.cell=gru", register="cli-gru")
    df = melbourne()
    f = Forecaster("gru", **TINY_ARGS, **TINY_FILE).fit(df, time_column="Date", target="Temp")
    scores = f.evaluate()
    for name in ("model", "naive", "seasonal_naive"):
        for metric in ("mae", "rmse"):
            assert scores.loc[name, metric] == pytest.approx(cli["metrics"][name][metric], rel=1e-6), (
                name,
                metric,
            )
        assert scores.loc[name, "selection_mae"] == pytest.approx(
            cli["selection_metrics"][name]["mae"], rel=1e-6
        )
    out = tmp_path / "next.csv"
    result = forecast("predict", "--model-uri", "models:/cli-gru/1", "--data", "melbourne-temp",
                      "--output", out, "--tracking-uri", tracking_uri)  # fmt: skip
    assert result.exit_code == 0, result.output
    from_cli = pd.read_csv(out, parse_dates=["Date"]).drop(columns="model_version")
    pd.testing.assert_frame_equal(f.predict(df), from_cli, check_dtype=False)


def test_bad_input_is_named_not_a_traceback():
    from forecaster.errors import ForecasterError

    with pytest.raises(ForecasterError, match="Temperature"):
        Forecaster("gru", **TINY_ARGS).fit(melbourne(), time_column="Date", target="Temperature")
    with pytest.raises(ForecasterError, match=r"Forecaster\(model='transformer'\): not a model"):
        Forecaster("transformer", **TINY_ARGS).fit(melbourne(), time_column="Date", target="Temp")
    with pytest.raises(ForecasterError, match="fit the Forecaster first"):
        Forecaster("gru").predict(melbourne())
    assert json.dumps(Forecaster("seq2seq", lookback=96, horizon=24).settings)  # plain settings


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (melbourne()["Temp"].to_numpy(), "not a numpy.ndarray: pd.DataFrame("),
        (melbourne()["Temp"], "not a pandas.Series: series.to_frame()"),
        ([1.0, 2.0, 3.0], "not a list"),
    ],
)
def test_data_that_is_not_a_frame_file_or_dataset_is_named_by_its_type(data, said):
    with pytest.raises(ConfigError, match="data is a DataFrame, a CSV/Parquet file") as raised:
        Forecaster("gru", **TINY_ARGS).fit(data, time_column="Date", target="Temp")
    assert said in str(raised.value) and "file not found" not in str(raised.value)


def test_data_at_another_frequency_than_the_models_is_refused_naming_both():
    """A daily model given hourly or weekly readings would read them as days and forecast days."""
    from forecaster.errors import DataError

    f = Forecaster("gru", **TINY_ARGS, data={"fill": "interpolate"}).fit(
        melbourne(), time_column="Date", target="Temp"
    )
    for freq, data in {"h": "hourly (h)", "W": "weekly (7D)"}.items():
        times = pd.date_range("1991-01-01", periods=400, freq=freq)
        other = pd.DataFrame({"Date": times, "Temp": 10.0 + times.dayofweek})
        refused = (
            f"DataFrame: column 'Date': the data is {data}, but this model's data is daily (D); give data "
            "at the model's frequency, or train a model on this data"
        )
        for use in (f.predict, f.evaluate, f.attention):
            with pytest.raises(DataError) as error:
                use(other)
            assert str(error.value) == refused, use


def test_a_model_set_to_daily_on_weekdays_predicts_and_evaluates_on_its_own_data():
    """data.frequency=D with a fill policy read weekday-only readings as days, weekends filled:
    the same DataFrame, given back, is read so (not refused as business days); hourly readings
    are still refused, off the daily grid."""
    from forecaster.errors import DataError

    df = melbourne()
    weekdays = df[pd.to_datetime(df["Date"]).dt.dayofweek < 5]
    f = Forecaster("gru", **TINY_ARGS, **TINY_FILE).fit(weekdays, time_column="Date", target="Temp")
    forecasts = f.predict(weekdays)
    assert forecasts["Date"].tolist() == list(pd.date_range("1991-01-01", periods=4))  # days, not weekdays
    assert list(f.evaluate(weekdays).index) == ["model", "naive", "seasonal_naive"]
    hourly = pd.DataFrame({"Date": pd.date_range("1991-01-01", periods=400, freq="h"), "Temp": 10.0})
    with pytest.raises(
        DataError, match=r"hourly \(h\), but this model's data is daily \(D\) \(1991-01-01 01:00:00 is off"
    ):
        f.predict(hourly)
