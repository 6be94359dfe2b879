"""Live monitoring: forecasts logged by the service, actuals posted after them, the monitor's
figures against `forecast evaluate`'s on the same windows, and a log that fails without costing
a prediction."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from forecaster.evaluation import Evaluation, evaluate
from monitoring.database import open_for_reading
from monitoring.monitor import COLUMNS, finite, summarise
from monitoring.schema import actuals
from monitoring.scoring import Thresholds
from pipelines.config import load_run_config
from pipelines.registry import load_predictor
from pipelines.train import run_training
from tests.conftest import TINY, empty_tracking_store
from tests.monitoring.conftest import assert_same_document
from tests.monitoring.test_resolution import full_scan
from tests.service.conftest import serving
from tests.waiting import until

# serves real trained models: in make test, not make test-fast; the module's model is trained, and
# its shared app started, once (make test runs a module on one worker: --dist loadfile)
pytestmark = pytest.mark.slow

MODEL = "models:/monitored@champion"
OPEN = {"monitoring_open_without_api_key": True}  # these tests run without an API_KEY


@pytest.fixture(scope="module")
def monitored(tmp_path_factory) -> str:
    """Tracking URI of a store holding one tiny LSTM registered as `monitored` @champion."""
    root: Path = tmp_path_factory.mktemp("monitor-store")
    uri = empty_tracking_store(root / "mlflow.db")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        run_training(load_run_config(None, [*TINY, "tracking.registered_model=monitored"]), uri, quiet=True)
    finally:
        os.chdir(cwd)
    return uri


@pytest.fixture(scope="module")
def shared(monitored, tmp_path_factory) -> Iterator[tuple[TestClient, str]]:
    """One app with a forecast log, and its log's URL, for the tests that need no settings of their
    own (an app start costs a model load and two helper processes): each sends series of its own
    and judges only what its requests changed (counts before and after)."""
    log_url = f"sqlite:///{tmp_path_factory.mktemp('shared') / 'forecasts.db'}"
    with serving(monitored, MODEL, forecast_log_url=log_url, monitor_min_steps=1, **OPEN) as client:
        yield client, log_url


def written_forecasts(client: TestClient) -> int:
    """The forecasts the app's log has written so far, everything answered before included."""
    assert client.app.state.forecast_log.flush()
    return client.app.state.forecast_log.health.written


class ReplayedPeriod:
    """`monitored` v1 and its test period's windows, loaded once for the module's replays (and
    ``offline``, `forecast evaluate`'s figures on them, computed once when first asked for)."""

    def __init__(self, tracking_uri: str) -> None:
        mlflow.set_tracking_uri(tracking_uri)
        self.predictor = load_predictor("models:/monitored/1")
        self.prepared = prepare_series(load_from_config(self.predictor.config.data), self.predictor.config)
        windows = self.prepared.windows("test")
        self.past, self.actual = windows.past()[:, :, 0], windows.target()
        self.past_times, self.future = windows.past_times(), windows.future_times()

    @cached_property
    def offline(self) -> Evaluation:
        return evaluate(self.predictor, self.prepared, "test")


@pytest.fixture(scope="module")
def period(monitored) -> ReplayedPeriod:
    return ReplayedPeriod(monitored)


def stamps(times: np.ndarray) -> list[str]:
    return [str(t) for t in np.datetime_as_string(times, "s")]


def replay(
    client, past: np.ndarray, past_times: np.ndarray, actual: np.ndarray, future: np.ndarray, chunk: int = 91
) -> None:
    """A quarter of daily origins per request, as a daily job sends a backlog: forecast from each,
    then post the values that became known (each origin's first-step actual); after the last
    origin, the rest of its horizon. (Few requests: what the monitoring routes cost is mostly per
    request, in their helper process.)"""
    for first in range(0, len(past), chunk):
        origins = range(first, min(first + chunk, len(past)))
        request = {
            "series": [
                {"series_id": "melbourne", "values": past[n].tolist(), "timestamps": stamps(past_times[n])}
                for n in origins
            ]
        }
        answer = client.post("/v1/predict", json=request)
        assert answer.status_code == 200, answer.text
        assert "x-request-id" in answer.headers
        known = {
            "series_id": "melbourne",
            "timestamps": stamps(np.concatenate([future[n, :1] for n in origins])),
            "values": np.concatenate([actual[n, :1] for n in origins]).tolist(),
        }
        stored = client.post("/v1/actuals", json={"series": [known]})
        assert stored.status_code == 200, stored.text
    rest = {"series_id": "melbourne", "timestamps": stamps(future[-1, 1:]), "values": actual[-1, 1:].tolist()}
    assert client.post("/v1/actuals", json={"series": [rest]}).status_code == 200


def test_monitor_equals_forecast_evaluate_on_a_replayed_test_period(monitored, period, log_url):
    predictor, offline = period.predictor, period.offline
    past, actual, past_times, future = period.past, period.actual, period.past_times, period.future
    with serving(
        monitored, MODEL, forecast_log_url=log_url, monitor_window=10**6, monitor_min_steps=1, **OPEN
    ) as client:
        replay(client, past, past_times, actual, future)
        assert client.app.state.forecast_log.flush()
        document = client.get("/v1/monitor").json()
        # what the monitor answers from its resolved steps is what a scan of the whole log gives
        scanned = full_scan(client.app.state.forecast_log.database, 10**6)[list(COLUMNS)]
        thresholds = Thresholds(window=10**6, min_steps=1)
        assert_same_document(document, finite(summarise(scanned, thresholds, ("monitored", "1"))))
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
    # float32 precision: the service runs a request's windows per forward pass, evaluate all of them
    # in one batch, and the network computes in float32 (the figures agree to ~1e-9 here)
    rtol = 1e-6
    assert model["mae"] == pytest.approx(offline.metrics["model"]["mae"], rel=rtol)
    assert model["rmse"] == pytest.approx(offline.metrics["model"]["rmse"], rel=rtol)
    # one scale both ways: the training series' in-sample seasonal-naive MAE, stored with the model
    assert model["mase"] == pytest.approx(offline.metrics["model"]["mase"], rel=rtol)
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
def test_a_series_id_with_control_characters_or_blank_ends_is_a_422_naming_it(shared, series_id):
    """A NUL in an id would fail the log's whole batch on PostgreSQL (other clients' forecasts
    with it): such ids are refused at the door, on both routes that take them."""
    client, _ = shared
    written = written_forecasts(client)
    predicted = client.post("/v1/predict", json=window_request(series_id=series_id))
    posted = client.post(
        "/v1/actuals",
        json={"series": [{"series_id": series_id, "timestamps": ["1990-01-15"], "values": [1.0]}]},
    )
    logged = written_forecasts(client) - written
    for response in (predicted, posted):
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["field"] == "series[0].series_id"
    assert logged == 0


def test_an_unreachable_log_costs_no_prediction(monitored, tmp_path):
    """The log's database cannot be opened: every prediction still answers 200, the failed writes
    are counted, /readyz stays ready and says the log is failing, and actuals are refused (503)
    rather than lost silently."""
    log_url = f"sqlite:///{tmp_path / 'no-such-folder' / 'forecasts.db'}"
    with serving(monitored, MODEL, forecast_log_url=log_url, **OPEN) as client:
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
        settings = {
            "forecast_log_url": log_url,
            "forecast_log_queue": 2,
            "forecast_log_batch": 1,
            "forecast_log_drain_s": 0.5,  # what it holds at shutdown is counted, not waited for
        }
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
    """The log's actuals ([] when nothing ever created the log)."""
    if log_url.startswith("sqlite") and not Path(log_url.removeprefix("sqlite:///")).exists():
        return []
    engine = open_for_reading(log_url)
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
    with serving(monitored, MODEL, forecast_log_url=log_url, monitor_min_steps=1, **OPEN) as client:
        assert client.post("/v1/predict", json=window_request()).status_code == 200
        # no flush: the route itself waits for the forecasts answered before it to be written
        answers = [client.post("/v1/actuals", json={"series": [first]}) for _ in range(2)]
        assert [a.json() for a in answers] == [{"stored": 2, "resolved_steps": 2}] * 2
        twice = client.get("/v1/monitor").json()["models"][0]
        corrected = {"series_id": "melbourne", "timestamps": ["1990-01-16T00:00:00"], "values": [20.0]}
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


def test_without_a_log_actuals_and_monitor_say_how_to_turn_it_on(served):
    # any model serves for this: the session's shared app of a tiny LSTM, which has no log
    client = served("svc-lstm")
    answer = client.post("/v1/predict", json=window_request())
    monitor = client.get("/v1/monitor")
    ready = client.get("/readyz").json()
    assert answer.status_code == 200 and "x-request-id" not in answer.headers
    assert monitor.status_code == 404 and "FORECAST_LOG_URL" in monitor.json()["detail"]
    assert "forecast_log" not in ready


def test_a_challenger_in_shadow_is_scored_on_the_same_requests(monitored, period, tmp_path):
    """The champion's own version served again as the challenger: scored on every request (its
    answers never returned), it must come out with exactly the champion's figures."""
    predictor, n = period.predictor, 30
    past, actual = period.past[:n], period.actual[:n]
    past_times, future = period.past_times[:n], period.future[:n]
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    with serving(
        monitored,
        MODEL,
        forecast_log_url=log_url,
        challenger_model_uri="models:/monitored/1",
        monitor_min_steps=1,
        **OPEN,
    ) as client:
        state = client.app.state
        until(lambda: state.shadow.store.current is not None, "the challenger loaded (in the background)")
        replay(client, past, past_times, actual, future, chunk=1)  # n requests, each scored
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
    # the challenger's loads on /metrics, apart from the served model's (issue 42: once unexposed)
    assert metric(metrics, 'forecast_challenger_version{name="monitored"}') == 1
    assert metric(metrics, 'forecast_challenger_reloads_total{outcome="success"}') == 1
    assert metric(metrics, 'forecast_model_reloads_total{outcome="success"}') == 1
    assert len(one["forecasts"]) == 1  # the challenger's forecast is not in the answer


def actual_body(series_id: str = "melbourne", stamps: list | None = None, values: list | None = None) -> dict:
    stamps = ["1990-01-15"] if stamps is None else stamps
    return {
        "series": [{"series_id": series_id, "timestamps": stamps, "values": values or [11.0] * len(stamps)}]
    }


def test_strangers_can_neither_post_actuals_nor_read_the_monitor(monitored, tmp_path):
    """Without API_KEY, the monitoring routes are off unless explicitly opened: an anonymous
    actual would change a model's status and end up in `forecast retrain`'s training data. With a
    key, they need it like predict does."""
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    with serving(monitored, MODEL, forecast_log_url=log_url) as client:
        assert client.post("/v1/predict", json=window_request()).status_code == 200  # predict stays open
        posted = client.post("/v1/actuals", json=actual_body())
        read = client.get("/v1/monitor")
    for refused in (posted, read):
        assert refused.status_code == 403, refused.text
        assert (
            "API_KEY" in refused.json()["detail"]
            and "MONITORING_OPEN_WITHOUT_API_KEY" in refused.json()["detail"]
        )
    assert stored_actuals(log_url) == []
    with serving(monitored, MODEL, forecast_log_url=log_url, api_key="k3y") as client:
        key = {"X-API-Key": "k3y"}
        assert client.post("/v1/predict", json=window_request(), headers=key).status_code == 200
        assert client.post("/v1/actuals", json=actual_body()).status_code == 401
        assert client.get("/v1/monitor", headers={"X-API-Key": "wrong"}).status_code == 401
        assert client.post("/v1/actuals", json=actual_body(), headers=key).status_code == 200
        assert client.get("/v1/monitor", headers={"Authorization": "Bearer k3y"}).status_code == 200
    assert len(stored_actuals(log_url)) == 1


def test_actuals_of_a_series_never_forecast_are_a_422_naming_it(shared, monitored, tmp_path):
    client, shared_log = shared
    body = {"series": [actual_body()["series"][0], actual_body("melbourn")["series"][0]]}
    before = stored_actuals(shared_log)
    assert client.post("/v1/predict", json=window_request()).status_code == 200
    refused = client.post("/v1/actuals", json=body)
    assert refused.status_code == 422
    (problem,) = refused.json()["detail"]
    assert problem["field"] == "series[1].series_id" and "'melbourn'" in problem["msg"]
    assert "ACTUALS_ACCEPT_UNKNOWN_SERIES" in problem["msg"]
    assert stored_actuals(shared_log) == before  # all or nothing: melbourne's value is not stored either
    # the same forecast and body where unknown series are accepted: a log of its own
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    with serving(
        monitored, MODEL, forecast_log_url=log_url, actuals_accept_unknown_series=True, **OPEN
    ) as client:
        assert client.post("/v1/predict", json=window_request()).status_code == 200
        assert client.post("/v1/actuals", json=body).json() == {"stored": 2, "resolved_steps": 1}
        # accepting unknown series takes nothing else: off the grid or years ahead is refused still
        strays = client.post("/v1/actuals", json=actual_body(stamps=["1990-01-30T06:00:00", "1996-06-01"]))
    assert [p["type"] for p in strays.json()["detail"]] == ["off_grid", "beyond_forecasts"]


@pytest.mark.parametrize(
    ("content", "headers", "status", "field"),
    [
        (b'{"series": []}', {"Content-Type": "text/plain"}, 415, None),
        (b'{"series": []}', {}, 415, None),
        (b'{"series": []}', {"Content-Type": "text/plain;x=json"}, 415, None),  # a browser's no-preflight type
        (b'{"series": []}', {"Content-Type": "Application/JSON; charset=UTF-8"}, 422, "series"),
        (b'{"series": [{"series_id": "melbourne", "timestamps": [663897600], "values": [1.0]}]}',
         {"Content-Type": "application/json"}, 422, "series[0].timestamps[0]"),
        (b'{"series": [{"series_id": "melbourne", "timestamps": ["663897600"], "values": [1.0]}]}',
         {"Content-Type": "application/json"}, 422, "series[0].timestamps[0]"),
        (b'{"series": [{"series_id": "m", "timestamps": ["1990-01-15"], "values": [1.0]}, '
         b'{"series_id": "m", "timestamps": ["1990-01-15T00:00:00"], "values": [2.0]}]}',
         {"Content-Type": "application/json"}, 422, "series[1].timestamps[0]"),
    ],
)  # fmt: skip
def test_actuals_are_json_with_iso_timestamps_each_given_once(shared, content, headers, status, field):
    """A timestamp given as a number would be read as seconds since 1970: refused, as are bodies
    not declared JSON, and a value given twice for a series and time in one request."""
    client, log_url = shared
    before = stored_actuals(log_url)
    answer = client.post("/v1/actuals", content=content, headers=headers)
    assert answer.status_code == status, answer.text
    if field is not None:
        assert answer.json()["detail"][0]["field"] == field
    assert stored_actuals(log_url) == before  # nothing stored


def test_a_retried_predict_is_logged_once_and_the_same_forecast_twice_is_a_422(shared):
    client, _ = shared
    retry = {"Idempotency-Key": "3f1c9a7e-retry"}
    request = window_request(series_id="retried")
    written_forecasts(client)  # what other tests sent is written before the counts are taken
    before = client.get("/readyz").json()["forecast_log"]
    answers = [client.post("/v1/predict", json=request, headers=retry) for _ in range(3)]
    written_forecasts(client)
    health = client.get("/readyz").json()["forecast_log"]
    resolved = client.post(
        "/v1/actuals", json=actual_body("retried", stamps=["1990-01-15", "1990-01-16"])
    ).json()
    bad_key = client.post("/v1/predict", json=request, headers={"Idempotency-Key": "two words"})
    twice = window_request(series_id="retried")
    twice["series"].append(twice["series"][0])  # the same series from the same origin
    repeated = client.post("/v1/predict", json=twice)
    backlog = window_request(series_id="retried")
    backlog["series"].append(window_request(1, series_id="retried")["series"][0])  # a day later
    several_origins = client.post("/v1/predict", json=backlog)
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert (health["written"] - before["written"], health["duplicates"] - before["duplicates"]) == (1, 2)
    assert resolved["resolved_steps"] == 2  # one forecast's two steps, not three forecasts' six
    assert bad_key.status_code == 422 and bad_key.json()["detail"][0]["field"] == "headers.Idempotency-Key"
    assert repeated.status_code == 422
    assert repeated.json()["detail"][0]["field"] == "series[1].series_id"
    assert several_origins.status_code == 200


def test_actuals_off_the_grid_or_past_every_forecast_are_a_422_naming_each_and_nothing_is_stored(shared):
    """Off the daily grid, inside a forecast's span or a week past it (stopped `forecast retrain`
    for good), and years past every forecast (a gap across years in its data): a 422 naming the
    series and the timestamp. On the grid the log takes a value a forecast reaches or not: in
    the model's history (retrain keeps the model's own values there) or between two forecasts."""
    client, log_url = shared
    assert client.post("/v1/predict", json=window_request(series_id="strays")).status_code == 200
    before = stored_actuals(log_url)
    sent = ["1990-01-16", "1990-01-16T13:00:00", "1995-06-01", "1985-06-01", "1990-01-25T13:30:00"]
    refused = client.post("/v1/actuals", json=actual_body("strays", stamps=sent))
    assert refused.status_code == 422, refused.text
    problems = refused.json()["detail"]
    assert [(p["field"], p["type"]) for p in problems] == [
        ("series[0].timestamps[1]", "off_grid"),
        ("series[0].timestamps[2]", "beyond_forecasts"),
        ("series[0].timestamps[4]", "off_grid"),
    ]
    assert "1990-01-16T13:00:00 is off the grid of series 'strays' (daily (D)" in problems[0]["msg"]
    assert "nearest steps are 1990-01-16T00:00:00 and 1990-01-17T00:00:00" in problems[0]["msg"]
    assert "1995-06-01T00:00:00 is past every forecast of series 'strays'" in problems[1]["msg"]
    assert "nearest steps are 1990-01-25T00:00:00 and 1990-01-26T00:00:00" in problems[2]["msg"]
    assert stored_actuals(log_url) == before  # all or nothing: 1990-01-16 is not stored either
    stored = client.post("/v1/actuals", json=actual_body("strays", stamps=[sent[0], sent[3]])).json()
    assert stored == {"stored": 2, "resolved_steps": 1}
    assert client.post("/v1/predict", json=window_request(10, series_id="strays")).status_code == 200
    between = client.post("/v1/actuals", json=actual_body("strays", stamps=["1990-01-21"])).json()
    assert between == {"stored": 1, "resolved_steps": 0}  # after the steps 01-15..18, before 01-25


def test_actuals_in_the_future_are_a_422_naming_them(shared):
    """Later than now on the model's clock plus a step: not observed yet (a mistyped year). A
    series the log never forecast had no limit at all; a known one is refused as in the future
    before it is refused as past its forecasts."""
    client, log_url = shared
    assert client.post("/v1/predict", json=window_request(series_id="future")).status_code == 200
    before = stored_actuals(log_url)
    refused = client.post("/v1/actuals", json=actual_body("future", stamps=["1990-01-15", "2100-01-15"]))
    assert refused.status_code == 422, refused.text
    (problem,) = refused.json()["detail"]
    assert (problem["field"], problem["type"]) == ("series[0].timestamps[1]", "in_future")
    assert "2100-01-15T00:00:00 of series 'future' is in the future" in problem["msg"]
    assert stored_actuals(log_url) == before


def test_actuals_are_checked_against_the_model_they_were_parsed_for(shared, monkeypatch):
    """The served model was read twice, its clock before the body was parsed and its frequency
    after: a reload in between checked values parsed on one model's clock against another's
    grid. Read once, a model that goes away meanwhile does not change what the request is
    checked against (here: no 503 for a model that was there when it came in)."""
    import service.monitoring_routes as routes

    client, _ = shared
    store = client.app.state.store
    model = store.current
    original = routes.parse_body

    async def reloading(*args, **kwargs):
        parsed = await original(*args, **kwargs)
        store.current = None  # a reload under the request, after its body was parsed
        return parsed

    monkeypatch.setattr(routes, "parse_body", reloading)
    try:
        assert client.post("/v1/predict", json=window_request(series_id="once")).status_code == 200
        answer = client.post("/v1/actuals", json=actual_body("once"))
    finally:
        store.current = model
    assert answer.status_code == 200, answer.text


def test_many_values_off_the_grid_are_named_up_to_the_cap_and_counted(shared):
    client, log_url = shared
    assert client.post("/v1/predict", json=window_request(series_id="many-strays")).status_code == 200
    sent = [f"1990-01-{day:02d}T13:00:00" for day in range(1, 26)]
    refused = client.post("/v1/actuals", json=actual_body("many-strays", stamps=sent))
    assert refused.status_code == 422, refused.text
    problems = refused.json()["detail"]
    assert [p["field"] for p in problems[:19]] == [f"series[0].timestamps[{k}]" for k in range(19)]
    assert problems[19]["type"] == "too_many_problems" and "6 more problems" in problems[19]["msg"]


def test_actuals_wait_for_a_model_to_know_the_grid(monitored, tmp_path):
    """No model loaded, no frequency to check a value's time against: a 503 to retry, not a value
    that could be off the grid stored for good."""
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    with serving(
        monitored, "models:/nowhere@champion", ready=False, forecast_log_url=log_url, **OPEN
    ) as client:
        answer = client.post("/v1/actuals", json=actual_body())
    assert answer.status_code == 503 and answer.headers["retry-after"] == "5"
    assert "GET /readyz" in answer.json()["detail"]
    assert stored_actuals(log_url) == []


def test_the_same_forecast_sent_twice_without_a_key_counts_its_actuals_once(shared):
    """Two identical requests, the second without an Idempotency-Key (a client's own retry):
    the log held the forecast twice and the monitor counted each of its actuals twice."""
    client, _ = shared
    for _ in range(2):
        assert client.post("/v1/predict", json=window_request(series_id="sent-twice")).status_code == 200
    stored = client.post("/v1/actuals", json=actual_body("sent-twice", stamps=["1990-01-15", "1990-01-16"]))
    assert stored.json() == {"stored": 2, "resolved_steps": 2}, stored.text
    monitor = client.get("/v1/monitor", params={"series_id": "sent-twice"}).json()
    assert monitor["overall"]["count"] == 2


def test_a_bad_query_parameter_is_named_as_one_not_as_the_body(shared):
    client, _ = shared
    answer = client.get("/v1/monitor", params={"series_id": ""})
    assert answer.status_code == 422
    (problem,) = answer.json()["detail"]
    assert problem["loc"] == ["query", "series_id"] and problem["field"] == "query.series_id"


def test_a_large_actuals_body_is_checked_in_the_parser_helper_not_on_the_event_loop(shared, monkeypatch):
    client, _ = shared
    backlog = {"series": [window_request(n, series_id="large")["series"][0] for n in range(100)]}
    assert client.post("/v1/predict", json=backlog).status_code == 200  # its steps: 103 days from the 15th
    days = pd.date_range("1990-01-15", periods=103, freq="D").strftime("%Y-%m-%d").tolist()
    parser = client.app.state.parser
    offloaded = []
    real = parser._offload

    async def spy(body, parse_with):
        offloaded.append(len(body))
        return await real(body, parse_with)

    # the shared app's parser, for this test: bodies over 1 KiB go to its helper (PARSE_OFFLOAD_BYTES)
    monkeypatch.setattr(parser, "offload_bytes", 1024)
    monkeypatch.setattr(parser, "_offload", spy)
    small = client.post("/v1/actuals", json=actual_body("large"))
    large = client.post("/v1/actuals", json=actual_body("large", stamps=days))
    assert small.status_code == large.status_code == 200, large.text
    assert large.json()["stored"] == 103 and large.json()["resolved_steps"] == 400  # 100 forecasts of 4
    assert len(offloaded) == 1 and offloaded[0] > 1024  # the large one only


def test_a_log_file_deleted_under_the_service_is_reported_and_nothing_is_lost_silently(monitored, tmp_path):
    path = tmp_path / "forecasts.db"
    with serving(monitored, MODEL, forecast_log_url=f"sqlite:///{path}", **OPEN) as client:
        assert client.post("/v1/predict", json=window_request()).status_code == 200
        assert client.app.state.forecast_log.flush()
        path.unlink()
        at_once = client.get("/readyz").json()["forecast_log"]  # before any write tries it
        for n in range(1, 6):
            assert client.post("/v1/predict", json=window_request(n)).status_code == 200
        assert client.app.state.forecast_log.flush()
        ready = client.get("/readyz").json()
        refused = client.post("/v1/actuals", json=actual_body())
        monitor = client.get("/v1/monitor")
    assert at_once["status"] == "failing" and "was deleted" in at_once["error"]
    health = ready["forecast_log"]
    assert health["status"] == "failing" and "was deleted while the service ran" in health["error"]
    assert (health["written"], health["failed"]) == (1, 5)
    assert refused.status_code == 503 and "was deleted" in refused.json()["detail"]
    assert monitor.status_code == 503


def refreshed_monitor(client) -> dict | None:
    """Readiness's monitor section once it is no longer pending (None before)."""
    monitor = client.get("/readyz").json()["monitor"]
    return None if monitor["status"] == "pending" else monitor


def test_readiness_says_whether_the_monitor_gauges_are_current(monitored, tmp_path):
    log_url = f"sqlite:///{tmp_path / 'forecasts.db'}"
    with serving(monitored, MODEL, forecast_log_url=log_url, monitor_refresh_s=0.2, **OPEN) as client:
        monitor = until(lambda: refreshed_monitor(client), "the monitor's first refresh")
        metrics = client.get("/metrics").text
    assert monitor["status"] == "fresh" and monitor["error"] is None
    assert metric(metrics, "forecast_monitor_stale") == 0
    assert metric(metrics, 'forecast_monitor_refreshes_total{outcome="computed"}') >= 1
