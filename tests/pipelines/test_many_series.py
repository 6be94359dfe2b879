"""Hundreds of series: one model trained across a panel reports what fits a screen and keeps the
full per-series table in the run; `forecast predict` forecasts every series of a panel file in
batches, naming the ones it cannot forecast and why; on Spark it gives the same forecasts.

The model is trained once and the panel forecast in this process once (module fixtures): the
batch test checks that forecast, the Spark test compares its own with it."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest

from tests.conftest import REPO, empty_tracking_store
from tests.pipelines.helpers import forecast

sys.path.insert(0, str(REPO / "benchmarks"))
from panel_fixture import make_panel  # noqa: E402

# the module's models are trained once, on one worker
pytestmark = [
    pytest.mark.slow,
]  # trains real models: in make test, not make test-fast

SERIES, STEPS, HORIZON = 300, 120, 4
MODEL = "models:/stations@champion"
# Spark's driver JVM with the client compiler only and one GC thread: a job this small ends before
# the C2 compiler and a parallel collector pay back; measured 11 s of the JVM's CPU instead of 22-31
# (a third of the test's). The job, its plan and the Python workers are Spark's defaults.
SPARK_DRIVER = "--driver-java-options '-XX:TieredStopAtLevel=1 -XX:+UseSerialGC' pyspark-shell"


@pytest.fixture(scope="module")
def panel_store(tmp_path_factory) -> tuple[str, str, str]:
    """(tracking URI, the panel file, train's output): a GRU trained on 300 series, registered."""
    root = tmp_path_factory.mktemp("many-series")
    path = root / "stations.csv"
    make_panel(SERIES, STEPS).to_csv(path, index=False)
    uri = empty_tracking_store(root / "mlflow.db")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        trained = forecast(
            "train", "--data", path, "--id-column", "station", "--time-column", "date", "--target", "temp",
            "--model", "rnn", "--cell", "gru", "--lookback", "14", "--horizon", str(HORIZON), "--epochs", "1",
            "--set", "model.hidden_size=8", "--register", "stations", "--allow-worse-than-naive",
            "--tracking-uri", uri,
        )  # fmt: skip
    finally:
        os.chdir(cwd)
    assert trained.exit_code == 0, trained.output
    return uri, str(path), trained.output


def test_a_panel_of_hundreds_of_series_reports_what_fits_a_screen(panel_store):
    uri, _, output = panel_store
    lines = output.splitlines()
    assert len(lines) < 60, output
    assert "it/s" not in output and "Epoch 0" not in output  # no library's progress frames
    assert f"test MASE of {SERIES} series: the best, median and worst" in output
    assert "(best)" in output and "(median)" in output and "(worst)" in output
    assert "per_series.csv in run" in output and "registered stations v1" in output
    run_id = next(line.split()[1] for line in lines if line.startswith("run "))
    table = pd.read_csv(io.StringIO(mlflow.artifacts.load_text(f"runs:/{run_id}/per_series.csv")))
    assert len(table) == SERIES and table["series"].is_unique


def broken_panel(path: str, out) -> None:
    """The panel with one series too short, one with a gap and one with a value that is not a number."""
    frame = pd.read_csv(path, dtype=str)
    frame = frame[~((frame.station == "st001") & (frame.date > "2015-01-10"))]  # 10 days
    frame = frame[~((frame.station == "st002") & (frame.date == "2015-03-01"))]  # a missing day
    frame.loc[(frame.station == "st003") & (frame.date == "2015-02-01"), "temp"] = "n/a?"
    frame.to_csv(out, index=False)


def predict(uri: str, data, out, *extra: str):
    return forecast(
        "predict", "--model-uri", MODEL, "--data", data, "--id-column", "station", "--time-column", "date",
        "--target", "temp", "--output", out, "--tracking-uri", uri, *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def local_forecast(panel_store, tmp_path_factory) -> tuple[Path, Path, str]:
    """(the broken panel, its forecasts, the command's output): `forecast predict` in this process,
    once for the module; the Spark test compares its forecasts with these."""
    uri, path, _ = panel_store
    root = tmp_path_factory.mktemp("many-series-predict")
    data, out = root / "broken.csv", root / "next.parquet"
    broken_panel(path, data)
    result = predict(uri, data, out)
    assert result.exit_code == 0, result.output
    return data, out, result.output


def test_batch_predict_forecasts_every_series_and_names_those_it_cannot(
    panel_store, local_forecast, tmp_path
):
    uri = panel_store[0]
    data, out, output = local_forecast
    frame = pd.read_parquet(out)
    assert len(frame) == (SERIES - 3) * HORIZON
    assert frame.groupby("station").size().eq(HORIZON).all()
    assert list(frame.columns) == [
        "station",
        "date",
        "temp_forecast",
        "temp_q0.1",
        "temp_q0.9",
        "model_version",
    ]
    assert set(frame["model_version"]) == {"stations/1"}
    assert np.isfinite(frame[["temp_forecast", "temp_q0.1", "temp_q0.9"]].to_numpy()).all()
    assert "3 series not forecast" in output
    reasons = pd.read_csv(out.with_name("next.skipped.csv")).set_index("station")["reason"]
    assert "10 rows, the model needs the last 14" in reasons["st001"]
    assert "missing 'D' step(s), first at 2015-03-01" in reasons["st002"]
    assert "'n/a?' is not a number" in reasons["st003"]
    bad = predict(uri, data, tmp_path / "next.xlsx")
    assert bad.exit_code == 2 and "write a .csv or .parquet file" in bad.output


@pytest.fixture
def spark_engine(monkeypatch) -> Iterator[None]:
    """pyspark present (in CI, or a failure), the driver's JVM options (SPARK_DRIVER) for the
    session `forecast predict` starts in this process, and that session stopped after the test:
    its context's threads would otherwise run on beside the rest of the suite."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        if os.environ.get("FORECAST_CI"):
            raise
        pytest.skip("pyspark is not installed (pip install -c requirements.lock -e '.[spark]'; CI does)")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", SPARK_DRIVER)
    yield
    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()


def test_spark_gives_the_forecasts_the_process_gives(panel_store, local_forecast, tmp_path, spark_engine):
    """On Spark local[2], through the registered pyfunc shipped to the workers, one series per
    group: every forecast equals the in-process batch's (within 1e-5), and the same series are
    named as not forecast."""
    uri = panel_store[0]
    data, local, _ = local_forecast
    spark = tmp_path / "spark.parquet"
    result = predict(uri, data, spark, "--engine", "spark", "--spark-master", "local[2]")
    assert result.exit_code == 0, result.output
    here, there = pd.read_parquet(local), pd.read_parquet(spark)
    assert list(here.columns) == list(there.columns)
    pd.testing.assert_frame_equal(
        here[["station", "date", "model_version"]], there[["station", "date", "model_version"]]
    )
    values = ["temp_forecast", "temp_q0.1", "temp_q0.9"]
    np.testing.assert_allclose(there[values].to_numpy(), here[values].to_numpy(), rtol=1e-5, atol=1e-5)
    skipped = pd.read_csv(tmp_path / "spark.skipped.csv")
    assert list(skipped["station"]) == ["st001", "st002", "st003"]
