"""Live monitoring: forecasts logged by the service, actuals posted after them, the monitor's
figures against `forecast evaluate`'s on the same windows, and a log that fails without costing
a prediction."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, inspect, select

from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from forecaster.evaluation import evaluate
from pipelines.config import load_run_config
from pipelines.registry import load_predictor
from pipelines.train import run_training
from service.forecast_log import (
    ForecastLog,
    ForecastRecord,
    actuals,
    batch_rows,
    connect,
    create_tables,
    expand_steps,
    forecasts,
    insert_rows,
    prune,
    resolved_count,
    upsert_actuals,
    utc_now,
)
from service.metrics import ServiceMetrics
from service.monitor import Thresholds, figures, resolved_steps, status_of
from tests.conftest import TINY
from tests.postgres import postgres_server, why_unavailable
from tests.service.conftest import serving

MODEL = "models:/monitored@champion"


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request, tmp_path) -> Iterator[str]:
    """A fresh forecast-log database: an SQLite file, or a PostgreSQL server of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'forecasts.db'}"
        return
    reason = why_unavailable()
    if reason is not None:
        pytest.skip(f"PostgreSQL unavailable: {reason}")
    with postgres_server("forecasts") as url:
        yield url


@pytest.fixture(scope="module")
def monitored(tmp_path_factory) -> str:
    """Tracking URI of a store holding one tiny LSTM registered as `monitored` @champion."""
    root: Path = tmp_path_factory.mktemp("monitor-store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    cwd = os.getcwd()
    os.chdir(root)
    try:
        run_training(load_run_config(None, [*TINY, "tracking.registered_model=monitored"]), uri, quiet=True)
    finally:
        os.chdir(cwd)
    return uri


def stamps(times: np.ndarray) -> list[str]:
    return [str(t) for t in np.datetime_as_string(times, "s")]


def replay(client, past: np.ndarray, past_times: np.ndarray, actual: np.ndarray, future: np.ndarray) -> None:
    """Day by day: forecast from each origin, then post the value that became known (the first
    step's actual); after the last origin, the rest of its horizon."""
    for n in range(len(past)):
        request = {
            "series": [
                {"series_id": "melbourne", "values": past[n].tolist(), "timestamps": stamps(past_times[n])}
            ]
        }
        answer = client.post("/v1/predict", json=request)
        assert answer.status_code == 200, answer.text
        assert "x-request-id" in answer.headers
        known = {
            "series_id": "melbourne",
            "timestamps": stamps(future[n, :1]),
            "values": actual[n, :1].tolist(),
        }
        stored = client.post("/v1/actuals", json={"series": [known]})
        assert stored.status_code == 200, stored.text
    rest = {"series_id": "melbourne", "timestamps": stamps(future[-1, 1:]), "values": actual[-1, 1:].tolist()}
    assert client.post("/v1/actuals", json={"series": [rest]}).status_code == 200


def test_monitor_equals_forecast_evaluate_on_a_replayed_test_period(monitored, log_url):
    mlflow.set_tracking_uri(monitored)
    predictor = load_predictor("models:/monitored/1")
    prepared = prepare_series(load_from_config(predictor.config.data), predictor.config)
    offline = evaluate(predictor, prepared, "test")
    windows = prepared.windows("test")
    past, actual = windows.past()[:, :, 0], windows.target()
    past_times, future = windows.past_times(), windows.future_times()
    with serving(
        monitored, MODEL, forecast_log_url=log_url, monitor_window=10**6, monitor_min_steps=1
    ) as client:
        replay(client, past, past_times, actual, future)
        assert client.app.state.forecast_log.flush()
        document = client.get("/v1/monitor").json()
    assert document["status"] in ("ok", "degraded")
    (model,) = document["models"]
    assert (model["name"], model["version"], model["alias"], model["role"]) == (
        "monitored",
        "1",
        "champion",
        "champion",
    )
    horizon = predictor.horizon
    assert model["count"] == len(past) * horizon == document["overall"]["count"]
    # float32 precision: the service runs one window per forward pass, evaluate all of them in
    # one batch, and the network computes in float32 (the figures agree to ~1e-9 here)
    rtol = 1e-6
    assert model["mae"] == pytest.approx(offline.metrics["model"]["mae"], rel=rtol)
    assert model["rmse"] == pytest.approx(offline.metrics["model"]["rmse"], rel=rtol)
    assert model["skill_naive"] == pytest.approx(offline.skill("mae", "naive"), rel=rtol)
    assert model["skill_seasonal_naive"] == pytest.approx(offline.skill("mae", "seasonal_naive"), rel=rtol)
    level = predictor.interval_levels[0]
    assert model["interval_level"] == level
    assert model["coverage"] == pytest.approx(offline.intervals[level]["coverage"], rel=rtol)
    by_step = model["by_step"]
    assert [s["step"] for s in by_step] == list(range(1, horizon + 1))
    live_mae = np.array([s["mae"] for s in by_step])
    live_skill = np.array([s["skill_naive"] for s in by_step])
    offline_skill = 1 - offline.per_step_mae["model"] / offline.per_step_mae["naive"]
    np.testing.assert_allclose(live_mae, offline.per_step_mae["model"], rtol=rtol)
    np.testing.assert_allclose(live_skill, offline_skill, rtol=rtol)


def window_request(n: int = 0, series_id: str = "melbourne") -> dict:
    """A valid one-window request with a series id and daily timestamps (the tiny model: L=14)."""
    times = np.arange(np.datetime64("1990-01-01"), np.datetime64("1990-01-15")) + n
    values = (10 + 3 * np.sin(np.arange(14) / 2)).round(3).tolist()
    return {"series": [{"series_id": series_id, "values": values, "timestamps": stamps(times)}]}


def metric(text: str, name: str) -> float:
    """A sample's value from a Prometheus exposition (the first line starting with ``name``)."""
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


@pytest.mark.parametrize("series_id", ["a\u0000b", "tab\there", " padded", "padded ", ""])
def test_a_series_id_with_control_characters_or_blank_ends_is_a_422_naming_it(monitored, tmp_path, series_id):
    """A NUL in an id would fail the log's whole batch on PostgreSQL (other clients' forecasts
    with it): such ids are refused at the door, on both routes that take them."""
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    with serving(monitored, MODEL, forecast_log_url=log_url) as client:
        predicted = client.post("/v1/predict", json=window_request(series_id=series_id))
        posted = client.post(
            "/v1/actuals",
            json={"series": [{"series_id": series_id, "timestamps": ["1990-01-15"], "values": [1.0]}]},
        )
        assert client.app.state.forecast_log.flush()
        logged = client.app.state.forecast_log.health.written
    for response in (predicted, posted):
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["field"] == "series[0].series_id"
    assert logged == 0


def test_an_unreachable_log_costs_no_prediction(monitored, tmp_path):
    """The log's database cannot be opened: every prediction still answers 200, the failed writes
    are counted, /readyz stays ready and says the log is failing, and actuals are refused (503)
    rather than lost silently."""
    log_url = f"sqlite:///{tmp_path / 'no-such-folder' / 'forecasts.db'}"
    with serving(monitored, MODEL, forecast_log_url=log_url) as client:
        for n in range(20):
            answer = client.post("/v1/predict", json=window_request(n))
            assert answer.status_code == 200, answer.text
        assert client.app.state.forecast_log.flush()
        ready = client.get("/readyz")
        metrics = client.get("/metrics").text
        actual = {"series_id": "melbourne", "timestamps": ["1990-01-15T00:00:00"], "values": [11.0]}
        refused = client.post("/v1/actuals", json={"series": [actual]})
    assert ready.status_code == 200
    health = ready.json()["forecast_log"]
    assert health["status"] == "failing" and "unable to open database file" in health["error"]
    assert health["failed"] == 20 and health["written"] == 0
    assert metric(metrics, 'forecast_log_records_total{outcome="failed"}') == 20
    assert metric(metrics, "forecast_log_up") == 0
    assert refused.status_code == 503 and "nothing was stored" in refused.json()["detail"]


def test_a_hanging_log_drops_what_its_queue_cannot_hold(monitored):
    """A database that accepts the connection and never answers (a listening socket nobody
    serves), behind a queue of two and a writer taking one at a time: predictions answer 200 all the same, the records beyond the
    queue are dropped and counted, and /readyz shows it without the URL's password."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        port = silent.getsockname()[1]
        log_url = f"postgresql://monitor:s3cr3t-pw@127.0.0.1:{port}/forecasts"
        settings = {"forecast_log_url": log_url, "forecast_log_queue": 2, "forecast_log_batch": 1}
        with serving(monitored, MODEL, **settings) as client:
            for n in range(12):
                assert client.post("/v1/predict", json=window_request(n)).status_code == 200
            ready = client.get("/readyz")
            metrics = client.get("/metrics").text
    health = ready.json()["forecast_log"]
    assert ready.status_code == 200
    assert health["dropped"] >= 12 - 2 - 1  # the queue holds 2, the writer 1
    assert metric(metrics, 'forecast_log_records_total{outcome="dropped"}') == health["dropped"]
    assert "s3cr3t" not in ready.text


def stored_actuals(log_url: str) -> list[tuple]:
    engine = connect(log_url)
    with engine.connect() as connection:
        rows = connection.execute(select(actuals.c.series_id, actuals.c.time, actuals.c.value)).all()
    engine.dispose()
    return sorted(tuple(row) for row in rows)


def test_actuals_count_once_take_corrections_and_store_nothing_from_a_bad_request(monitored, log_url):
    first = {
        "series_id": "melbourne",
        "timestamps": ["1990-01-15T00:00:00", "1990-01-16"],
        "values": [11.0, 12.0],
    }
    with serving(monitored, MODEL, forecast_log_url=log_url, monitor_min_steps=1) as client:
        assert client.post("/v1/predict", json=window_request()).status_code == 200
        # no flush: the route itself waits for the forecasts answered before it to be written
        answers = [client.post("/v1/actuals", json={"series": [first]}) for _ in range(2)]
        assert [a.json() for a in answers] == [{"stored": 2, "resolved_steps": 2}] * 2
        twice = client.get("/v1/monitor").json()["models"][0]
        corrected = {"series_id": "melbourne", "timestamps": ["1990-01-16T00:00:00+00:00"], "values": [20.0]}
        assert client.post("/v1/actuals", json={"series": [corrected]}).status_code == 200
        after = client.get("/v1/monitor").json()["models"][0]
        bad = [
            {"series_id": "other", "timestamps": ["1990-01-17"], "values": [1.0]},
            {"series_id": "melbourne", "timestamps": ["1990-01-17"], "values": ["warm"]},
        ]
        refused = client.post("/v1/actuals", json={"series": bad})
        mismatch = client.post(
            "/v1/actuals",
            json={"series": [{"series_id": "x", "timestamps": ["1990-01-17"], "values": [1.0, 2.0]}]},
        )
        not_json = client.post("/v1/actuals", content=b"A\xffG", headers={"Content-Type": "application/json"})
        repeated = client.post(
            "/v1/actuals",
            json={
                "series": [
                    {"series_id": "x", "timestamps": ["1990-01-17", "1990-01-17"], "values": [1.0, 2.0]}
                ]
            },
        )
    assert twice["count"] == 2  # the same two values sent twice resolve two steps, not four
    assert after["count"] == 2 and after["mae"] != twice["mae"]  # the correction replaced the value
    assert refused.status_code == 422 and refused.json()["detail"][0]["field"] == "series[1].values[0]"
    assert mismatch.status_code == 422 and mismatch.json()["detail"][0]["field"] == "series[0].timestamps"
    assert repeated.status_code == 422 and repeated.json()["detail"][0]["field"] == "series[0].timestamps[1]"
    assert not_json.status_code == 422 and not_json.json()["detail"][0]["type"] == "json_invalid"
    assert [(s, v) for s, _, v in stored_actuals(log_url)] == [("melbourne", 11.0), ("melbourne", 20.0)]


def test_without_a_log_actuals_and_monitor_say_how_to_turn_it_on(monitored):
    with serving(monitored, MODEL) as client:
        answer = client.post("/v1/predict", json=window_request())
        monitor = client.get("/v1/monitor")
        ready = client.get("/readyz").json()
    assert answer.status_code == 200 and "x-request-id" not in answer.headers
    assert monitor.status_code == 404 and "FORECAST_LOG_URL" in monitor.json()["detail"]
    assert "forecast_log" not in ready


def logged_forecasts(engine, ages_in_days: list[float], horizon: int = 1) -> None:
    """One forecast of ``horizon`` steps per age, inserted in this order (ids grow along the list),
    as the writer does it."""
    now = utc_now()
    records = [forecast_record(horizon) for _ in ages_in_days]
    with engine.begin() as connection:
        for age, record in zip(ages_in_days, records, strict=True):
            insert_rows(connection, batch_rows([record], now - timedelta(days=age), engine.dialect.name))


def forecast_record(horizon: int) -> ForecastRecord:
    first = np.datetime64("2024-01-01T00:00", "us")
    return ForecastRecord(
        "r", "champion", "m", "1", "champion", "h", ["s"], np.arange(48.0)[None, :],
        [first + np.arange(horizon) * np.timedelta64(1, "h")], np.ones((1, horizon)), {}, [],
    )  # fmt: skip


def kept_ages(engine) -> list[int]:
    """The ages of the forecasts kept, by id."""
    now = utc_now()
    with engine.connect() as connection:
        stamps = connection.execute(select(forecasts.c.logged_at).order_by(forecasts.c.id)).scalars().all()
    return [round((now - stamp) / timedelta(days=1)) for stamp in stamps]


def test_a_batch_of_mixed_shapes_reads_back_exactly_as_it_was_forecast(log_url):
    """The writer's two paths (SQLite's executemany, PostgreSQL's binary COPY built by numpy) on
    one batch of two shapes: an hourly two-series request with a 90% interval, then a daily one
    without interval or whole season. Every value, time and NULL comes back where it belongs."""
    hours = np.datetime64("2024-03-01T05:00", "us") + np.arange(3) * np.timedelta64(1, "h")
    days = np.datetime64("1999-12-30T00:00", "us") + np.arange(2) * np.timedelta64(1, "D")
    hourly = ForecastRecord(
        "a" * 32, "champion", "m", "7", "champion", "h", ["north", "south"],
        np.array([np.arange(30.0), np.arange(30.0) * 2]), [hours, hours + np.timedelta64(1, "h")],
        np.array([[1.5, 2.5, 3.5], [-1.0, 0.0, 1e-300]]),
        {0.05: np.full((2, 3), -9.0), 0.95: np.full((2, 3), 9.0)}, [0.9],
    )  # fmt: skip
    daily = ForecastRecord(
        "b" * 32, "challenger", "m", "8", "", "D", ["west"], np.array([[4.0, 6.0, 5.0]]), [days],
        np.array([[7.25, 8.125]]), {}, [],
    )  # fmt: skip
    engine = connect(log_url)
    create_tables(engine)
    with engine.begin() as connection:
        insert_rows(connection, batch_rows([hourly, daily], utc_now(), engine.dialect.name))
    f = forecasts
    with engine.connect() as connection:
        heads = connection.execute(
            select(f.c.series_id, f.c.role, f.c.model_version, f.c.origin, f.c.horizon, f.c.level).order_by(
                f.c.id
            )
        ).all()
        logged = connection.execute(select(f).order_by(f.c.id))
        frame = pd.DataFrame(logged.all(), columns=list(logged.keys()))
    columns = ["series_id", "step", "target_time", "forecast", "lower", "upper", "naive", "seasonal_naive"]
    steps = [
        tuple(None if isinstance(v, float) and np.isnan(v) else v for v in row)
        for row in expand_steps(frame)[columns].astype(object).itertuples(index=False)
    ]
    engine.dispose()
    at = datetime.fromisoformat
    assert [tuple(row) for row in heads] == [
        ("north", "champion", "7", at("2024-03-01 04:00"), 3, 0.9),
        ("south", "champion", "7", at("2024-03-01 05:00"), 3, 0.9),
        ("west", "challenger", "8", at("1999-12-29 00:00"), 2, None),
    ]
    assert [tuple(row) for row in steps] == [
        ("north", 1, at("2024-03-01 05:00"), 1.5, -9.0, 9.0, 29.0, 6.0),
        ("north", 2, at("2024-03-01 06:00"), 2.5, -9.0, 9.0, 29.0, 7.0),
        ("north", 3, at("2024-03-01 07:00"), 3.5, -9.0, 9.0, 29.0, 8.0),
        ("south", 1, at("2024-03-01 06:00"), -1.0, -9.0, 9.0, 58.0, 12.0),
        ("south", 2, at("2024-03-01 07:00"), 0.0, -9.0, 9.0, 58.0, 14.0),
        ("south", 3, at("2024-03-01 08:00"), 1e-300, -9.0, 9.0, 58.0, 16.0),
        ("west", 1, at("1999-12-30 00:00"), 7.25, None, None, 5.0, None),
        ("west", 2, at("1999-12-31 00:00"), 8.125, None, None, 5.0, None),
    ]


def test_actuals_resolve_exactly_the_steps_forecast_for_their_series_and_times(log_url):
    """POST /v1/actuals' count goes through the forecasts' (series_id, last_target) index: it must
    agree with a plain count over every logged step, whatever the actuals' span."""
    engine = connect(log_url)
    create_tables(engine)
    hour = np.timedelta64(1, "h")
    start = np.datetime64("2024-01-01T00:00", "us")
    logged: list[tuple[str, np.datetime64]] = []  # (series, target time) of every step
    records = []
    for series_id in ("a", "b"):
        for origin in range(10):  # hourly forecasts of 4 steps, overlapping
            targets = start + (origin + 1 + np.arange(4)) * hour
            logged += [(series_id, t) for t in targets]
            record = forecast_record(4)
            record.series_ids, record.future_times = [series_id], [targets]
            records.append(record)
    with engine.begin() as connection:
        insert_rows(connection, batch_rows(records, utc_now(), engine.dialect.name))
    for series_id, hours in [
        ("a", [1]),
        ("a", [3, 4, 5]),
        ("b", [0, 7, 13]),
        ("a", [14, 20]),
        ("b", range(15)),
    ]:
        times = [start + h * hour for h in hours]
        rows = [{"series_id": series_id, "time": t.astype(datetime)} for t in times]
        expected = sum(1 for s, t in logged if s == series_id and t in times)
        assert resolved_count(engine, rows) == expected, (series_id, hours)
    engine.dispose()


def test_the_monitor_keeps_the_newest_resolved_steps_of_each_version_whatever_its_chunk(log_url):
    """resolved_steps reads the log a chunk of forecasts at a time and keeps the newest `window`
    steps of each version: any chunk size gives the steps a plain pass over every logged step
    and actual picks, newest first."""
    engine = connect(log_url)
    create_tables(engine)
    hour = np.timedelta64(1, "h")
    start = np.datetime64("2024-01-01T00:00", "us")
    records, logged = [], []  # logged: (id, version, series, step, target, forecast)
    for i in range(24):  # overlapping 4-step forecasts, two series, two versions, in id order
        series_id, version = "ab"[i % 2], "12"[i // 12]
        targets = start + (i // 2 + 1 + np.arange(4)) * hour
        record = forecast_record(4)
        record.series_ids, record.future_times, record.model_version = [series_id], [targets], version
        record.mean = np.arange(4.0)[None, :] + 10 * i
        records.append(record)
        logged += [(i + 1, version, series_id, k + 1, t, 10.0 * i + k) for k, t in enumerate(targets)]
    with engine.begin() as connection:
        insert_rows(connection, batch_rows(records, utc_now(), engine.dialect.name))
    known = {("a", start + h * hour): float(h) for h in range(0, 16, 2)}
    known |= {("b", start + h * hour): -float(h) for h in range(5, 12)}
    upsert_actuals(
        engine,
        [
            {"series_id": s, "time": t.astype(datetime), "value": v, "received_at": utc_now()}
            for (s, t), v in known.items()
        ],
    )
    window = 5
    resolved = sorted((r for r in logged if (r[2], r[4]) in known), key=lambda r: (r[4], r[0]), reverse=True)
    expected = []
    for version in "12":
        expected += [r for r in resolved if r[1] == version][:window]
    expected.sort(key=lambda r: (r[4], r[0]), reverse=True)
    for chunk in (1, 5, 20_000):
        frame = resolved_steps(engine, window, chunk=chunk)
        got = [
            (
                row.id,
                row.model_version,
                row.series_id,
                row.step,
                np.datetime64(row.target_time, "us"),
                row.forecast,
            )
            for row in frame.itertuples()
        ]
        assert got == expected, chunk
        assert frame["actual"].tolist() == [known[(r[2], r[4])] for r in expected]
    engine.dispose()


def test_a_step_array_of_the_wrong_length_is_refused_naming_its_forecast(log_url):
    """A row edited by hand or cut short must not shift its steps onto the next forecast."""
    engine = connect(log_url)
    create_tables(engine)
    logged_forecasts(engine, [0, 0], horizon=3)
    with engine.begin() as connection:
        connection.execute(
            forecasts.update()
            .where(forecasts.c.id == 1)
            .values(forecast=np.arange(2.0).astype("<f8").tobytes())
        )
        logged = connection.execute(select(forecasts).order_by(forecasts.c.id))
        frame = pd.DataFrame(logged.all(), columns=list(logged.keys()))
    engine.dispose()
    with pytest.raises(ValueError, match="forecast id 1 has a step array of 16 bytes, not 3 values"):
        expand_steps(frame)


def test_a_model_that_forecast_nan_is_degraded_not_ok():
    """NaN is below no threshold: without its own rule, a model answering NaN would look ok."""
    rows = pd.DataFrame(
        {
            "actual": np.ones(60), "forecast": np.r_[np.ones(59), np.nan], "naive": np.zeros(60),
            "seasonal_naive": np.zeros(60), "scale": np.ones(60), "level": np.full(60, np.nan),
        }
    )  # fmt: skip
    status, reasons = status_of(figures(rows), Thresholds(min_steps=50))
    assert status == "degraded"
    assert "not all finite over the last 60 resolved steps" in reasons[0]


def test_waiting_for_the_writer_is_bounded_and_ignores_what_is_queued_later(tmp_path):
    """POST /v1/actuals waits for the forecasts queued before it, never longer than its bound:
    a writer that is stuck (here: never started) costs the caller the bound, not a hang."""
    log = ForecastLog(f"sqlite:///{tmp_path / 'forecasts.db'}", ServiceMetrics(), wait_s=0.01)
    assert log.written_through(0.01)  # nothing queued yet
    log.submit(forecast_record(2))
    started = time.monotonic()
    assert not log.written_through(0.2)
    assert 0.2 <= time.monotonic() - started < 1.0
    log.start()
    assert log.written_through(5.0)
    assert log.health.written == 1
    assert log.stop()


def test_retention_deletes_what_was_logged_too_long_ago_and_the_oldest_beyond_the_cap(log_url):
    engine = connect(log_url)
    create_tables(engine)
    logged_forecasts(engine, [100, 10, 5, 1, 0], horizon=2)
    now = utc_now()
    with engine.begin() as connection:
        connection.execute(
            actuals.insert(),
            [
                {
                    "series_id": "s",
                    "time": now - timedelta(days=age),
                    "value": 1.0,
                    "received_at": now - timedelta(days=age),
                }
                for age in (100, 1)
            ],
        )
    prune(engine, timedelta(days=90), max_steps=6)  # 3 forecasts of 2 steps
    with engine.connect() as connection:
        kept_actuals = connection.execute(select(actuals.c.time)).all()
    assert kept_ages(engine) == [5, 1, 0]
    assert len(kept_actuals) == 1
    engine.dispose()


def test_retention_never_deletes_a_step_for_its_age_while_its_own_logged_at_is_recent(log_url):
    """Ids need not follow logged_at (a batch stamped before another committed first, a clock
    running ahead): a recent step below an expired one in id order is kept. PostgreSQL deletes
    the expired step all the same (by logged_at); SQLite, which bounds its scan by id (one file,
    one clock), may keep it until the steps below it expire."""
    engine = connect(log_url)
    create_tables(engine)
    logged_forecasts(engine, [1, 100, 0], horizon=3)
    prune(engine, timedelta(days=90), max_steps=1000)
    kept = kept_ages(engine)
    assert kept == ([1, 0] if engine.dialect.name == "postgresql" else [1, 100, 0])
    engine.dispose()


EARLIER_LAYOUTS = {  # an earlier version's log -> its tables and a row of each
    # the first layout: every column on each step row
    "one row per step": (
        "CREATE TABLE forecast_steps (id INTEGER PRIMARY KEY, series_id VARCHAR(200), step INTEGER)",
        "INSERT INTO forecast_steps VALUES (1, 's', 1)",
    ),
    # the second: steps without a key (its forecasts table moved away)
    "steps without a key": (
        "CREATE TABLE forecast_steps (forecast_id INTEGER, step INTEGER, target_time TIMESTAMP, "
        "forecast FLOAT, lower FLOAT, upper FLOAT, naive FLOAT, seasonal_naive FLOAT)",
        "INSERT INTO forecast_steps (forecast_id, step) VALUES (1, 1)",
    ),
    # the third: a forecasts table without the step arrays, a keyed row per step beside it
    "keyed step rows": (
        "CREATE TABLE forecasts (id INTEGER PRIMARY KEY, request_id VARCHAR(32), series_id VARCHAR(200), "
        "horizon INTEGER)",
        "INSERT INTO forecasts VALUES (1, 'r', 's', 1)",
        "CREATE TABLE forecast_steps (forecast_id INTEGER, step INTEGER, target_time TIMESTAMP, "
        "forecast FLOAT, PRIMARY KEY (forecast_id, step))",
        "INSERT INTO forecast_steps (forecast_id, step) VALUES (1, 1)",
    ),
    # ... with its step table moved away
    "a forecasts table without step arrays": (
        "CREATE TABLE forecasts (id INTEGER PRIMARY KEY, request_id VARCHAR(32), horizon INTEGER)",
        "INSERT INTO forecasts VALUES (1, 'r', 1)",
    ),
}


def tables_and_rows(engine) -> dict[str, tuple[list[str], int]]:
    inspector = inspect(engine)
    with engine.connect() as connection:
        return {
            table: (
                [c["name"] for c in inspector.get_columns(table)],
                connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one(),
            )
            for table in inspector.get_table_names()
        }


@pytest.mark.parametrize("layout", EARLIER_LAYOUTS)
def test_a_log_written_by_an_earlier_version_is_refused_by_name_and_left_as_it_was(log_url, layout):
    """A log of an earlier layout cannot be read as this layout's forecasts. The service says so
    (it shows in /readyz) and changes nothing."""
    engine = connect(log_url)
    with engine.begin() as connection:
        for statement in EARLIER_LAYOUTS[layout]:
            connection.exec_driver_sql(statement)
    before = tables_and_rows(engine)
    with pytest.raises(RuntimeError, match="written by an earlier version of the service") as refused:
        create_tables(engine)
    assert "FORECAST_LOG_URL" in str(refused.value)
    assert tables_and_rows(engine) == before
    engine.dispose()


def test_a_forecast_is_one_row_with_its_steps_as_arrays(log_url):
    """Each row costs every insert, so a forecast is one row whatever its horizon, its steps
    binary arrays in it. Actuals find their forecasts through one index entry per forecast;
    PostgreSQL gets a BRIN index for retention, and nothing else is indexed."""
    engine = connect(log_url)
    create_tables(engine)
    inspector = inspect(engine)
    assert sorted(inspector.get_table_names()) == ["actuals", "forecasts"]
    indexes = {index["name"] for index in inspector.get_indexes("forecasts")}
    expected = {"ix_forecasts_series_last_target"}
    if engine.dialect.name == "postgresql":
        expected.add("ix_forecasts_logged_brin")
    assert indexes == expected
    arrays = {c["name"]: c["type"].python_type for c in inspector.get_columns("forecasts")}
    for name in ("target_times", "forecast", "lower", "upper", "naive", "seasonal_naive"):
        assert arrays[name] is bytes, name
    logged_forecasts(engine, [0, 0], horizon=720)
    with engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(forecasts)).scalar_one() == 2
    engine.dispose()


def test_a_challenger_in_shadow_is_scored_on_the_same_requests(monitored, tmp_path):
    """The champion's own version served again as the challenger: scored on every request (its
    answers never returned), it must come out with exactly the champion's figures."""
    mlflow.set_tracking_uri(monitored)
    predictor = load_predictor("models:/monitored/1")
    prepared = prepare_series(load_from_config(predictor.config.data), predictor.config)
    windows = prepared.windows("test")
    n = 30
    past, actual = windows.past()[:n, :, 0], windows.target()[:n]
    past_times, future = windows.past_times()[:n], windows.future_times()[:n]
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    with serving(
        monitored,
        MODEL,
        forecast_log_url=log_url,
        challenger_model_uri="models:/monitored/1",
        monitor_min_steps=1,
    ) as client:
        state = client.app.state
        while state.shadow.store.current is None:  # the challenger loads in the background
            time.sleep(0.05)
        replay(client, past, past_times, actual, future)
        assert state.shadow.flush() and state.forecast_log.flush()
        document = client.get("/v1/monitor").json()
        metrics = client.get("/metrics").text
        one = client.post("/v1/predict", json=window_request()).json()
    champion, challenger = sorted(document["models"], key=lambda m: m["role"] != "champion")
    assert (champion["role"], challenger["role"]) == ("champion", "challenger")
    assert challenger["version"] == "1" and challenger["count"] == champion["count"] == n * predictor.horizon
    for figure in ("mae", "rmse", "skill_naive", "coverage"):
        assert challenger[figure] == pytest.approx(champion[figure], rel=1e-9)
    assert document["serving"] == {"name": "monitored", "version": "1"}
    assert metric(metrics, 'forecast_shadow_requests_total{outcome="scored",reason=""}') == n
    assert len(one["forecasts"]) == 1  # the challenger's forecast is not in the answer
