"""One request never hurts another: what a request can get wrong is refused before it joins a
batch (422 naming the field), and a batch that still fails is re-run one request at a time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from forecaster.predictor import Predictor
from tests.service.conftest import serving
from tests.service.test_http import pyfunc_forecast, window

pytestmark = pytest.mark.slow  # serves real trained models: in make test, not make test-fast

DAYS = np.datetime64("2001-03-01") + np.arange(14) * np.timedelta64(1, "D")


def stamps(start: str, step: str = "D", count: int = 14, zone: str = "") -> list[str]:
    times = np.datetime64(start) + np.arange(count) * np.timedelta64(1, step)
    return [f"{t}{zone}" for t in np.datetime_as_string(times, "s")]


def good_body(seed: int) -> dict:
    return {"series": [{"values": window(14, seed=seed), "timestamps": stamps("2001-03-01")}]}


def concurrently(client, bodies: list[dict]) -> list:
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(lambda body: client.post("/v1/predict", json=body), bodies))


def test_a_poison_request_among_sixteen_good_ones_fails_alone(model_store):
    """The issue's case: forecast timestamps past 2262-04-11 on a calendar model used to turn
    every request batched with it into a 500."""
    poison = {"series": [{"values": window(14), "timestamps": stamps("2262-03-28")}]}
    with serving(model_store, "models:/svc-calendar@champion", max_wait_ms=20) as client:
        for _ in range(5):
            answers = concurrently(client, [poison, *(good_body(seed) for seed in range(16))])
            assert [a.status_code for a in answers[1:]] == [200] * 16, [a.text for a in answers[1:]]
            assert answers[0].status_code == 422
            problem = answers[0].json()["detail"][0]
            assert problem["field"] == "series[0].timestamps[13]" and "2262-04-11" in problem["msg"]


def test_a_batch_that_fails_is_rerun_one_request_at_a_time(model_store, monkeypatch):
    """Whatever validation misses: here the network itself fails on one window (a value of 666)
    and returns NaN on another (777). Only those two requests fail, each with its own 422."""
    real = Predictor.predict

    def fragile(self, values, timestamps=None, return_attention=False, chunk_size=2048):
        flat = np.asarray(values).reshape(len(values), -1)
        if (flat == 666.0).any():
            raise RuntimeError("the network cannot take this window")
        prediction = real(self, values, timestamps, return_attention, chunk_size)
        prediction.mean[(flat == 777.0).any(axis=1)] = np.nan
        return prediction

    monkeypatch.setattr(Predictor, "predict", fragile)
    failing = {"series": [{"values": [*window(13), 666.0]}]}
    not_finite = {"series": [{"values": [*window(13), 777.0]}, {"values": window(14)}]}
    goods = [{"series": [{"values": window(14, seed=seed, level=5.0 + seed)}]} for seed in range(16)]
    expected = pyfunc_forecast(model_store, "svc-gru", np.array([g["series"][0]["values"] for g in goods]))
    with serving(model_store, "models:/svc-gru@champion", max_wait_ms=20) as client:
        for _ in range(3):
            answers = concurrently(client, [failing, not_finite, *goods])
            assert [a.status_code for a in answers[2:]] == [200] * 16, [a.text for a in answers[2:]]
            assert answers[0].status_code == 422 and "could not be forecast" in answers[0].text
            assert answers[1].status_code == 422
            assert [p["field"] for p in answers[1].json()["detail"]] == ["series[0].values"]
            forecasts = np.array([a.json()["forecasts"][0]["values"] for a in answers[2:]])
            assert np.isfinite(forecasts).all()
            # each caller still got its own rows
            np.testing.assert_allclose(forecasts, expected, rtol=1e-5)
        metrics = client.get("/metrics").text
    assert 'forecast_failed_requests_total{reason="ForecastFailedError"} 3.0' in metrics
    assert 'forecast_failed_requests_total{reason="NonFiniteForecastError"} 3.0' in metrics


def test_values_beyond_float32_are_refused_and_large_ones_never_500(served):
    client = served("svc-lstm")
    for value in (3.5e38, -1e300):
        response = client.post("/v1/predict", json={"series": [{"values": [*window(13), value]}]})
        assert response.status_code == 422, response.text
        assert response.json()["detail"][0]["field"] == "series[0].values[13]"
    for value in (1e38, 3e38, -3e38, 1e30):
        body = {"series": [{"values": [value] * 14}, {"values": window(14)}]}
        response = client.post("/v1/predict", json=body)
        assert response.status_code in (200, 422), response.text
        if response.status_code == 200:
            assert all(np.isfinite(f["values"]).all() for f in response.json()["forecasts"])
        else:
            assert {p["field"] for p in response.json()["detail"]} <= {
                "series[0].values",
                "series[0].values[0]",
            }


BAD_TIMESTAMPS = [
    (stamps("0001-01-01"), "series[0].timestamps[0]", "outside the range"),
    (stamps("9999-01-01"), "series[0].timestamps[0]", "outside the range"),
    (stamps("2262-03-28"), "series[0].timestamps[13]", "would run past 2262-04-11"),
    (stamps("2001-03-01", step="h"), "series[0].timestamps[1]", "this model's data is daily (D)"),
    (
        [*stamps("2001-03-01", count=7), *stamps("2001-03-09", count=7)],
        "series[0].timestamps[7]",
        "2 days 00:00:00 after the previous",
    ),
    (
        [*stamps("2001-03-01", count=13), "2001-03-13T00:00:00"],
        "series[0].timestamps[13]",
        "strictly increasing",
    ),
]


@pytest.mark.parametrize(
    ("times", "field", "message"), BAD_TIMESTAMPS, ids=[b[2] + b[1] for b in BAD_TIMESTAMPS]
)
@pytest.mark.parametrize("family", ["lstm", "calendar"])
def test_timestamps_the_model_cannot_use_are_refused_naming_the_index(served, family, times, field, message):
    response = served(f"svc-{family}").post(
        "/v1/predict", json={"series": [{"values": window(14), "timestamps": times}]}
    )
    assert response.status_code == 422, response.text
    problem = response.json()["detail"][0]
    assert problem["field"] == field and message in problem["msg"], problem


@pytest.mark.parametrize(
    ("times", "field"),
    [
        (stamps("2262-03-29T23:00", zone="-05:00"), "series[0].timestamps[13]"),
        (stamps("1677-09-21T12:00", zone="+14:00"), "series[0].timestamps[0]"),
    ],
)
def test_zone_aware_timestamps_that_leave_the_range_on_conversion_are_refused(served, times, field):
    # svc-calendar: a UTC clock
    response = served("svc-calendar").post(
        "/v1/predict", json={"series": [{"values": window(14), "timestamps": times}]}
    )
    assert response.status_code == 422, response.text
    problem = response.json()["detail"][0]
    assert problem["field"] == field and "outside the range" in problem["msg"], problem


def test_each_series_gets_its_own_forecast_timestamps(served):
    client = served("svc-lstm")
    body = {"series": [{"values": window(14), "timestamps": stamps("2001-03-01")}, {"values": window(14)}]}
    forecasts = client.post("/v1/predict", json=body).json()["forecasts"]
    assert forecasts[0]["timestamps"][0] == "2001-03-15T00:00:00" and "timestamps" not in forecasts[1]


def test_zone_aware_timestamps_are_converted_to_utc(served):
    """A model trained on a UTC clock sees UTC wall-clock time; forecasts come back in UTC."""
    client = served("svc-calendar")
    local = client.post(
        "/v1/predict",
        json={"series": [{"values": window(14), "timestamps": stamps("2001-03-01T02:00", zone="+02:00")}]},
    ).json()
    utc = client.post(
        "/v1/predict", json={"series": [{"values": window(14), "timestamps": stamps("2001-03-01T00:00")}]}
    ).json()
    assert local["forecasts"][0]["timestamps"][0] == "2001-03-15T00:00:00"
    assert local["forecasts"] == utc["forecasts"]
