"""Drift: the level of a replayed series shifts half way through; the monitor turns `degraded`
within a few resolved steps, `forecast retrain --if-degraded` registers a model trained on the
shifted actuals, the service hot-reloads it, and its own status comes back `ok`.

A real model and a real replay: an LSTM without level normalisation (so a level shift hurts it)
is trained on Melbourne's minimum temperatures of 1981-1984, then 1985-1990 is replayed through the
service a quarter of origins per request (one forecast per day, as a daily job would send a
backlog), with every value from 1988 on raised by SHIFT degrees, actuals posted after each
request; across the shift one origin per request, so that the detection is counted step by step."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from pipelines.config import load_run_config
from pipelines.train import run_training
from service.main import create_app
from service.settings import ServiceSettings
from tests.conftest import REPO, TINY, empty_tracking_store
from tests.pipelines.helpers import forecast
from tests.service.conftest import wait_ready

pytestmark = pytest.mark.slow  # serves real trained models: in make test, not make test-fast

SHIFT = 8.0  # degrees C, from 1988-01-01
LOOKBACK = 14
WINDOW = 200  # resolved steps per model version (50 daily origins x H=4)
DETECTED_WITHIN = 60  # resolved steps after the first shifted actual
MODEL = "models:/drifting@champion"
# Full batches, few epochs at a higher rate: each epoch publishes its checkpoints to MLflow (most
# of an epoch's cost here), and five at 3e-3 reach the skill twenty at the default rate had (v1's
# skill against naive before the shift 0.113, was 0.097; v2's after it 0.178, was 0.139).
SETTINGS = [
    *TINY,
    "model.level_norm=none",
    "model.hidden_size=16",
    "train.epochs=5",
    "train.learning_rate=3e-3",
    "train.limit_train_batches=null",
]
RETRAIN_EPOCHS = 8  # five, on the longer and shifted series, left v2 below naive (skill -0.012)
CHUNK = 91  # daily origins per request: what the monitoring routes cost is mostly per request


def melbourne() -> pd.Series:
    frame = pd.read_csv(REPO / "data/daily-min-temperatures.csv", parse_dates=["Date"])
    return frame.set_index("Date")["Temp"].asfreq("D").interpolate()  # as the bundled dataset fills


@pytest.fixture
def drifting(tmp_path, monkeypatch) -> str:
    """A store with `drifting` v1 @champion, trained on 1981-1984 only."""
    monkeypatch.chdir(tmp_path)
    early = melbourne()[:"1984-12-31"].rename_axis("Date").reset_index()
    early.to_csv(tmp_path / "early.csv", index=False)
    uri = empty_tracking_store(tmp_path / "mlflow.db")
    config = load_run_config(
        None, [*SETTINGS, f"data.path={tmp_path / 'early.csv'}", "tracking.registered_model=drifting"]
    )
    run_training(config, uri, quiet=True)
    return uri


def stamps(index: pd.DatetimeIndex) -> list[str]:
    return [t.strftime("%Y-%m-%dT%H:%M:%S") for t in index]


class Replay:
    """Sends the live series through the service, a chunk of daily origins per request."""

    def __init__(self, client: TestClient, series: pd.Series) -> None:
        self.client, self.series = client, series

    def run(self, first: str | pd.Timestamp, last: str, chunk: int = CHUNK) -> None:
        """Every origin from ``first`` to ``last``, ``chunk`` of them per request."""
        origins = pd.date_range(first, last, freq="D")
        for i in range(0, len(origins), chunk):
            self.chunk(origins[i : i + chunk])

    def chunk(self, origins: pd.DatetimeIndex) -> None:
        """Forecast from each origin, then post the values that became known (the next days)."""
        windows = [self.series[:origin].iloc[-LOOKBACK:] for origin in origins]
        request = {
            "series": [
                {"series_id": "melbourne", "values": w.tolist(), "timestamps": stamps(w.index)}
                for w in windows
            ]
        }
        answer = self.client.post("/v1/predict", json=request)
        assert answer.status_code == 200, answer.text
        known = self.series[origins[0] + pd.Timedelta(days=1) : origins[-1] + pd.Timedelta(days=1)]
        posted = {"series_id": "melbourne", "timestamps": stamps(known.index), "values": known.tolist()}
        assert self.client.post("/v1/actuals", json={"series": [posted]}).status_code == 200

    def monitor(self) -> dict:
        assert self.client.app.state.forecast_log.flush()
        return self.client.get("/v1/monitor").json()


def serving_version(client: TestClient) -> str | None:
    return client.get("/readyz").json()["version"]


def test_a_level_shift_degrades_and_retraining_recovers(drifting, tmp_path):
    live = melbourne()["1985-01-01":].copy()
    live["1988-01-01":] += SHIFT
    history = melbourne()[:"1984-12-31"]
    series = pd.concat([history, live])
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    # `forecast retrain` reads the log and the thresholds from the service's settings (environment)
    environment = {"FORECAST_LOG_URL": log_url, "MONITOR_WINDOW": str(WINDOW), "MONITOR_MIN_STEPS": "40"}
    os.environ.update(environment)
    settings = ServiceSettings(
        mlflow_tracking_uri=drifting,
        model_uri=MODEL,
        reload_interval_s=0,  # reloaded below by the reloader's own step, when the alias moved
        forecast_log_url=log_url,
        monitor_window=WINDOW,
        monitor_min_steps=40,
        monitoring_open_without_api_key=True,  # no API_KEY in this test
    )
    try:
        with TestClient(create_app(settings)) as client:
            wait_ready(client)
            replay = Replay(client, series)
            replay.run("1984-12-31", "1987-12-30")
            before = replay.monitor()
            assert before["status"] == "ok", before["reasons"]
            # day by day across the shift: count resolved steps until the status turns
            detected_after = None
            for origin in pd.date_range("1987-12-31", "1988-03-31", freq="D"):
                replay.chunk(pd.DatetimeIndex([origin]))
                document = replay.monitor()
                if document["status"] == "degraded":
                    detected_after = resolved_since(tmp_path, "1988-01-01")
                    break
            assert detected_after is not None, "never degraded"
            assert detected_after <= DETECTED_WITHIN, f"degraded only after {detected_after} resolved steps"
            replay.run(origin + pd.Timedelta(days=1), "1989-12-30")
            quiet_result = forecast(
                "retrain", "--if-degraded", "--model-uri", MODEL, "--tracking-uri", drifting,
                "--split", "0.9,0.07,0.03", "--data-dir", tmp_path / "retrain-data", "--quiet",
                # the selection period alone: over the default two folds (this short validation's
                # two halves) this tiny model is not below naive (naive's MAE 2.1850) and the gate
                # rightly refuses it; this test is about the drift loop, not the selection rule
                "--set", "split.selection_folds=1", "--set", f"train.epochs={RETRAIN_EPOCHS}",
            )  # fmt: skip
            assert quiet_result.exit_code == 0, quiet_result.output
            assert "registered drifting v2; now holds @champion" in quiet_result.output
            changed, _ = client.portal.call(client.app.state.reloader.reload_now)
            assert changed and serving_version(client) == "2"
            replay.run("1989-12-31", "1990-12-30")
            after = replay.monitor()
    finally:
        for name in environment:
            os.environ.pop(name, None)
    assert after["serving"] == {"name": "drifting", "version": "2"}
    assert after["status"] == "ok", after["reasons"]
    v1 = next(m for m in after["models"] if m["version"] == "1")
    assert v1["status"] == "degraded"


def resolved_since(tmp_path: Path, day: str) -> int:
    """Resolved forecast steps whose target is on or after ``day``, counted from the database's
    own rows (each forecast's target times, little-endian int64 microseconds since 1970)."""
    import sqlite3

    with sqlite3.connect(tmp_path / "forecasts.db") as db:
        known = set(db.execute("SELECT series_id, time FROM actuals").fetchall())
        logged = db.execute("SELECT series_id, target_times FROM forecasts").fetchall()
    since = np.datetime64(day, "us")
    count = 0
    for series_id, blob in logged:
        targets = np.frombuffer(blob, "<i8").astype("datetime64[us]")
        stamps = np.datetime_as_string(targets[targets >= since], unit="us")
        count += sum((series_id, stamp.replace("T", " ")) in known for stamp in stamps)
    return count
