"""`forecast train/backtest/predict/evaluate` on a panel (long format, --id-column), with a
future covariate: per-series figures in --json and MLflow, aggregate MASE, promotion; series at
another frequency than the model's refused, or in a panel file left out and named."""

from __future__ import annotations

import io
import json

import mlflow
import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO
from tests.conftest import TINY as CONFTEST_TINY
from tests.pipelines.helpers import forecast

pytestmark = pytest.mark.slow  # trains real models: in make test, not make test-fast

TINY = [setting for setting in CONFTEST_TINY if not setting.startswith("data.")]  # the panel is the data


def settings(*extra: str) -> list[str]:
    out = []
    for item in [*TINY, *extra]:
        out += ["--set", item]
    return out


@pytest.fixture
def long_csv(tmp_path):
    """Three shops of different sizes and start dates; sales jump on promotion days."""
    rng = np.random.default_rng(1)
    frames = []
    for k, (shop, size) in enumerate({"north": 10.0, "south": 100.0, "west": 1000.0}.items()):
        days = pd.date_range("2022-01-01", periods=260 - 30 * k, freq="D") + pd.Timedelta(days=30 * k)
        promo = (rng.random(len(days)) < 0.25).astype(int)
        sales = size * (3 + np.sin(np.arange(len(days)) * 2 * np.pi / 7) + 1.5 * promo)
        frames.append(pd.DataFrame({"shop": shop, "day": days.date, "sales": sales.round(3), "promo": promo}))
    path = tmp_path / "shops.csv"
    pd.concat(frames).to_csv(path, index=False)
    return path


def train(tracking_uri, *args: str) -> dict:
    result = forecast("train", *args, "--tracking-uri", tracking_uri, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_panel_with_a_future_covariate_trains_reports_per_series_and_promotes(
    tracking_uri, long_csv, tmp_path
):
    common = [
        "--data", str(long_csv), "--time-column", "day", "--target", "sales",
        "--id-column", "shop", "--future-covariates", "promo", *settings(),
    ]  # fmt: skip
    result = train(tracking_uri, *common, "--register", "shops")
    assert set(result["per_series"]) == {"north", "south", "west"}
    for figures in result["per_series"].values():
        assert set(figures) == {"model", "naive", "seasonal_naive"}
        assert np.isfinite(figures["model"]["mase"])
    mases = [result["per_series"][s]["model"]["mase"] for s in result["per_series"]]
    assert result["metrics"]["model"]["mase"] == pytest.approx(np.mean(mases))
    assert result["metrics"]["model"]["mase_median"] == pytest.approx(np.median(mases))
    client = mlflow.MlflowClient(tracking_uri)
    run = client.get_run(result["run_id"])
    assert run.data.metrics["test_mase"] == pytest.approx(np.mean(mases))
    assert run.data.metrics["test_mase_median"] == pytest.approx(np.median(mases))
    assert run.data.params["data.id_column"] == "shop" and run.data.params["dataset.series"] == "3"
    assert run.data.params["data.future_covariates"] == "promo"
    assert run.data.params["model.level_norm"] == "standard"  # what --id-column sets
    table = pd.read_csv(io.StringIO(mlflow.artifacts.load_text(f"runs:/{run.info.run_id}/per_series.csv")))
    assert list(table["series"]) == ["north", "south", "west"]
    np.testing.assert_allclose(table["model_test_mase"], mases, rtol=1e-3)
    assert {"naive_test_mase", "seasonal_naive_test_mase"} <= set(table.columns)
    provenance = mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/dataset.json")
    assert set(provenance["series"]) == {"north", "south", "west"}
    # a second version goes through the promotion gate on the panel's selection windows
    again = train(tracking_uri, *common, "--set", "train.seed=5", "--register", "shops")
    assert again["promoted"] is not None
    refused = forecast("predict", "--model-uri", "models:/shops/1", "--data", str(long_csv),
                       "--time-column", "day", "--target", "sales", "--tracking-uri", tracking_uri)  # fmt: skip
    assert refused.exit_code == 2 and "needs the future covariates ['promo']" in refused.output


def test_backtest_and_predict_on_the_bundled_panel(tracking_uri, tmp_path):
    config = tmp_path / "panel.yaml"
    config.write_text("data: {dataset: stocks, id_column: Ticker}\nmodel: {level_norm: standard}\n")
    backtest = forecast(
        "backtest", "--config", config, "--folds", "2", *settings(), "--json", "--tracking-uri", tracking_uri
    )
    assert backtest.exit_code == 0, backtest.output
    summary = json.loads(backtest.stdout.strip().splitlines()[-1])
    assert len(summary["folds"]) == 2 and "mase_median" in summary["folds"][0]["model"]
    result = train(tracking_uri, "--config", str(config), *settings(), "--register", "stocks")
    assert set(result["per_series"]) == {"AAPL", "GOOG", "IBM"}
    out = tmp_path / "next.csv"
    predicted = forecast("predict", "--model-uri", "models:/stocks@champion", "--data", "stocks",
                         "--output", out, "--tracking-uri", tracking_uri)  # fmt: skip
    assert predicted.exit_code == 0, predicted.output
    frame = pd.read_csv(out)
    assert list(frame.columns[:3]) == ["Ticker", "Date", "Adj Close_forecast"]
    assert frame.groupby("Ticker").size().to_dict() == {"AAPL": 4, "GOOG": 4, "IBM": 4}
    assert (frame["Date"] == "2013-03-04").sum() == 3  # the next trading day after 2013-03-01
    # a series it never saw in training, alone in its own file, on business days as the model's
    unseen = forecast("evaluate", "--model-uri", "models:/stocks@champion", "--data", "ibm",
                      "--json", "--tracking-uri", tracking_uri)  # fmt: skip
    assert unseen.exit_code == 0, unseen.output
    scores = json.loads(unseen.stdout.strip().splitlines()[-1])
    assert np.isfinite(scores["metrics"]["model"]["mase"])
    daily = forecast("evaluate", "--model-uri", "models:/stocks@champion", "--data", "melbourne-temp",
                     "--tracking-uri", tracking_uri)  # fmt: skip
    assert daily.exit_code == 2 and "the data is daily (D), but this model's data is business days (B)" in (
        daily.output
    )
    mixed = mixed_frequencies(tmp_path / "mixed.csv")
    out = tmp_path / "mixed-next.csv"
    predicted = forecast("predict", "--model-uri", "models:/stocks@champion", "--data", mixed,
                         "--id-column", "Ticker", "--output", out, "--tracking-uri", tracking_uri)  # fmt: skip
    assert predicted.exit_code == 0, predicted.output
    assert set(pd.read_csv(out)["Ticker"]) == {"BDAYS"}
    reasons = pd.read_csv(out.with_name("mixed-next.skipped.csv")).set_index("Ticker")["reason"]
    assert {key: reason.split(": ", 2)[2].split(",")[0] for key, reason in reasons.items()} == {
        "FIFTH": "the data is weekly (7D)",
        "HOURLY": "the data is hourly (h)",
        "WEEKLY": "the data is weekly (7D)",
    }


def mixed_frequencies(path):
    """IBM's last closes four times over: on business days, every fifth business day, hourly, and
    weekly; only the first is at the stocks model's frequency."""
    ibm = pd.read_csv(REPO / "data" / "IBM.csv", dtype=str).tail(200)[["Date", "Adj Close"]]
    hours = pd.date_range("2013-01-02", periods=100, freq="h").strftime("%Y-%m-%d %H:%M:%S")
    weeks = pd.date_range("2012-01-02", periods=60, freq="W-MON").strftime("%Y-%m-%d")
    pd.concat([
        ibm.assign(Ticker="BDAYS"), ibm.iloc[::5].assign(Ticker="FIFTH"),
        ibm.tail(100).assign(Ticker="HOURLY", Date=hours), ibm.tail(60).assign(Ticker="WEEKLY", Date=weeks),
    ]).to_csv(path, index=False)  # fmt: skip
    return path


def test_the_forecast_plot_shows_the_best_median_and_worst_series():
    from forecaster.evaluation import Evaluation, pool
    from pipelines.plots import forecast_vs_actual, series_picks

    def result(mase: float, seed: int) -> Evaluation:
        rng = np.random.default_rng(seed)
        actual = rng.normal(size=(6, 3))
        forecasts = {"model": actual + mase, "naive": actual + 1.0}
        metrics = {name: {"mae": 1.0, "rmse": 1.0, "smape": 1.0, "mase": mase, "directional_accuracy": 0.5}
                   for name in forecasts}  # fmt: skip
        times = np.datetime64("2024-01-01") + np.arange(18).reshape(6, 3).astype("timedelta64[D]")
        return Evaluation("test", 6, metrics, {}, forecasts, actual, rng.normal(size=(6, 5)), times, None)

    panel = pool({"c": result(3.0, 0), "a": result(0.5, 1), "d": result(9.0, 2), "b": result(1.0, 3)})
    labels = [label for label, _ in series_picks(panel)]
    assert labels == [
        "best series a (MASE 0.500)",
        "median series b (MASE 1.000)",
        "worst series d (MASE 9.000)",
    ]
    figure = forecast_vs_actual(panel, "panel")
    assert [ax.get_title().split(":")[0] for ax in figure.axes] == labels
