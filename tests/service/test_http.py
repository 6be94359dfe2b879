"""The HTTP contract against real registered models."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import mlflow
import numpy as np
import pytest

from tests.service.conftest import FAMILIES, serving
from tests.waiting import until

pytestmark = pytest.mark.slow  # serves real trained models: in make test, not make test-fast


def window(length: int, features: int = 1, seed: int = 0, level: float = 11.0) -> list:
    rng = np.random.default_rng(seed)
    values = level + rng.normal(0, 2, size=(length, features))
    return values[:, 0].tolist() if features == 1 else values.tolist()


def pyfunc_forecast(tracking_uri: str, name: str, windows: np.ndarray, timestamps=None) -> np.ndarray:
    mlflow.set_tracking_uri(tracking_uri)
    model = mlflow.pyfunc.load_model(f"models:/{name}@champion")
    if timestamps is None:
        return model.predict(windows)
    seconds = np.asarray(timestamps, dtype="datetime64[s]").astype(np.int64)
    return model.predict({"values": windows, "timestamps": seconds})


def target_scale(tracking_uri: str, name: str) -> float:
    """The spread the model's target is z-scored by (its fitted scaler's), in original units."""
    mlflow.set_tracking_uri(tracking_uri)
    model = mlflow.pyfunc.load_model(f"models:/{name}@champion")
    return float(model.unwrap_python_model().predictor.scaler.std[0])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_round_trips_and_matches_pyfunc(family, model_store, served):
    # the family's shared app: this test only sends a request and reads the answer
    client = served(f"svc-{family}")
    info = client.get("/v1/model").json()
    lookback, horizon, features = info["lookback"], info["horizon"], len(info["features"])
    series = [window(lookback + 3, features, seed=s, level=100 if features > 1 else 11) for s in range(3)]
    attends = info["attention"] == "bahdanau"
    body = {"series": [{"values": v} for v in series], "return_attention": attends}
    timestamps = None
    if info["calendar_features"]:
        stamps = np.datetime64("1989-06-01") + np.arange(lookback + 3) * np.timedelta64(1, "D")
        timestamps = np.stack([stamps[-lookback:]] * 3)
        for item in body["series"]:
            item["timestamps"] = [str(t) for t in stamps]
    response = client.post("/v1/predict", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["horizon"] == horizon and answer["model"]["version"] == "1"
    assert answer["model"]["name"] == f"svc-{family}"
    got = np.array([f["values"] for f in answer["forecasts"]])
    windows = np.asarray(series)[:, -lookback:]
    expected = pyfunc_forecast(model_store, f"svc-{family}", windows, timestamps)
    # the network's digits (float32 on the z-scored scale: 1e-6 of the target's scale, which
    # rounding moves by at most half that) and no float64 noise past them
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * target_scale(model_store, f"svc-{family}"))
    assert all(float(f"{v:.10g}") == v for v in got.ravel()), got
    attention = [f.get("attention") for f in answer["forecasts"]]
    if attends:
        weights = np.asarray(attention)
        assert weights.shape == (3, horizon, lookback)
        np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    else:
        assert attention == [None] * 3
    bounds = answer["forecasts"][0]["quantiles"]
    assert {"0.1", "0.9"} <= set(bounds), bounds.keys()
    assert all(lo <= hi for lo, hi in zip(bounds["0.1"], bounds["0.9"], strict=True))
    assert all(float(f"{v:.10g}") == v for v in [*bounds["0.1"], *bounds["0.9"]]), bounds
    assert info["interval_levels"] == [0.8]
    if timestamps is not None:
        assert answer["forecasts"][0]["timestamps"][0].startswith(str(stamps[-1] + np.timedelta64(1, "D")))


def test_timestamps_give_future_timestamps(served):
    client = served("svc-lstm")
    stamps = [f"1990-01-{d:02d}T00:00:00" for d in range(1, 15)]
    response = client.post("/v1/predict", json={"series": [{"values": window(14), "timestamps": stamps}]})
    assert response.status_code == 200, response.text
    assert response.json()["forecasts"][0]["timestamps"] == [
        f"1990-01-{d:02d}T00:00:00" for d in range(15, 19)
    ]


def test_a_model_trained_on_local_time_takes_a_zoned_stamps_wall_time_as_written(served):
    """Its training file had no zone, so there is none to convert an offset to: 10:00+01:00 is
    10:00 on its clock (read as UTC it would be 09:00, every calendar feature an hour off)."""
    client = served("svc-lstm")
    assert client.get("/v1/model").json()["clock"] == "local"
    answers = [
        client.post(
            "/v1/predict",
            json={
                "series": [
                    {
                        "values": window(14),
                        "timestamps": [f"1990-01-{d:02d}T10:00:00{zone}" for d in range(1, 15)],
                    }
                ]
            },
        )
        for zone in ("+01:00", "")
    ]
    assert [a.status_code for a in answers] == [200, 200], answers[0].text
    assert answers[0].json()["forecasts"] == answers[1].json()["forecasts"]
    assert answers[0].json()["forecasts"][0]["timestamps"][0] == "1990-01-15T10:00:00"


BAD = [
    ({"series": [{"values": [1.0] * 5}]}, "series[0].values", "5 steps; the model needs at least 14"),
    ({"series": [{"values": [1.0] * 13 + ["x"]}]}, "series[0].values[13]", '"x" is not a number'),
    ({"series": [{"values": [1.0] * 13 + [True]}]}, "series[0].values[13]", "true is not a number"),
    ({"series": [{"values": [1.0] * 13 + [None]}]}, "series[0].values[13]", "null is not a number"),
    ({"series": [{"values": [1.0] * 13 + [1e39]}]}, "series[0].values[13]", "beyond +-3.4e38"),
    (
        {"series": [{"values": [1.0] * 14}], "return_attention": "yes"},
        "return_attention",
        "not true or false",
    ),
    ({"series": [{"values": [1.0] * 14}], "return_attention": 1}, "return_attention", "not true or false"),
    ({"series": [{"values": [1.0] * 14}], "return_attention": None}, "return_attention", "null is not true"),
    (
        {"series": [{"values": [[1.0, 2.0]] * 14}]},
        "series[0].values",
        "rows have 2 number(s); the model expects 1 number per step",
    ),
    (
        {"series": [{"values": [1.0] * 14}], "return_attention": True},
        "return_attention",
        "this model has no attention (only seq2seq models with model.attention: bahdanau have one)",
    ),
    ({"series": [{"values": [[1.0], [2.0, 3.0]]}]}, "series[0].values", "ragged rows"),
    ({"series": [{"values": [1.0, [2.0]]}]}, "series[0].values[1]", "mix of numbers and rows"),
    ({"series": []}, "series", "at least 1 item"),
    ({"series": [{"values": [1.0] * 14, "extra": 1}]}, "series[0].extra", "unknown field"),
    ({"series": [{"values": [1.0] * 14}], "foo": 1}, "foo", "unknown field"),
    (
        {"series": [{"values": [1.0] * 14, "timestamps": ["2024-01-01"]}]},
        "series[0].timestamps",
        "1 timestamps for 14",
    ),
    ({}, "series", "Field required"),
]


@pytest.mark.parametrize(("body", "field", "message"), BAD, ids=[b[2][:30] for b in BAD])
def test_bad_input_is_a_422_naming_series_and_field(body, field, message, served):
    response = served("svc-lstm").post("/v1/predict", json=body)
    assert response.status_code == 422, response.text
    problems = response.json()["detail"]
    assert any(p["field"] == field and message in p["msg"] for p in problems), problems
    assert all(set(p) == {"loc", "field", "msg", "type"} for p in problems), problems


def test_nan_infinity_non_json_and_content_type(served):
    client = served("svc-lstm")
    headers = {"Content-Type": "application/json"}
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = '{"series": [{"values": [' + ",".join(["1.0"] * 13 + [literal]) + "]}]}"
        response = client.post("/v1/predict", content=body, headers=headers)
        assert response.status_code == 422, response.text
        problem = response.json()["detail"][0]
        assert problem["field"] == "series[0].values[13]" and "only finite numbers" in problem["msg"]
    huge_integer = '{"series": [{"values": [' + ",".join(["1"] * 13 + ["1" * 401]) + "]}]}"
    response = client.post("/v1/predict", content=huge_integer, headers=headers)
    assert response.status_code == 422 and response.json()["detail"][0]["field"] == "series[0].values[13]"
    broken = client.post("/v1/predict", content="{not json", headers=headers)
    assert broken.status_code == 422 and "not valid JSON" in broken.json()["detail"][0]["msg"]
    plain = client.post("/v1/predict", content='{"series": []}', headers={"Content-Type": "text/plain"})
    assert plain.status_code == 415 and "application/json" in plain.json()["detail"]


def test_size_limits(model_store):
    with serving(
        model_store, "models:/svc-lstm@champion", max_series_per_request=3, max_body_bytes=4096
    ) as client:
        many = {"series": [{"values": window(14)} for _ in range(4)]}
        response = client.post("/v1/predict", json=many)
        assert response.status_code == 422 and "at most 3 per request" in response.text
        huge = {"series": [{"values": window(2000)}]}
        response = client.post("/v1/predict", json=huge)
        assert response.status_code == 413 and "larger than 4096 bytes" in response.text


def test_api_key(model_store):
    body = {"series": [{"values": window(14)}]}
    with serving(model_store, "models:/svc-lstm@champion", api_key="s3cret") as client:
        assert client.post("/v1/predict", json=body).status_code == 401
        assert client.post("/v1/predict", json=body, headers={"X-API-Key": "wrong"}).status_code == 401
        assert client.post("/v1/predict", json=body, headers={"X-API-Key": "s3cret"}).status_code == 200
        assert (
            client.post("/v1/predict", json=body, headers={"Authorization": "Bearer s3cret"}).status_code
            == 200
        )
        assert client.post("/v1/admin/reload").status_code == 401
        assert client.get("/healthz").status_code == 200  # probes stay open


def test_concurrent_requests_are_batched_and_each_caller_gets_its_own_forecast(model_store):
    with serving(model_store, "models:/svc-gru@champion", max_wait_ms=50) as client:
        levels = [5.0 + i for i in range(16)]
        windows = [window(14, seed=i, level=level) for i, level in enumerate(levels)]

        def call(values):
            return client.post("/v1/predict", json={"series": [{"values": values}]}).json()

        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(call, windows))
        got = np.array([a["forecasts"][0]["values"] for a in answers])
        expected = pyfunc_forecast(model_store, "svc-gru", np.asarray(windows))
        # float32 kernels round differently for different batch sizes (~1e-7 relative); windows
        # sit 1 degC apart, so a caller given another caller's row would miss by far more
        np.testing.assert_allclose(got, expected, rtol=1e-5)
        metrics = client.get("/metrics").text
    count = float(
        next(
            line.split()[-1]
            for line in metrics.splitlines()
            if line.startswith("forecast_batch_windows_count")
        )
    )
    total = float(
        next(
            line.split()[-1] for line in metrics.splitlines() if line.startswith("forecast_batch_windows_sum")
        )
    )
    assert total == 16 and count < 16, f"{count} forward passes for 16 requests"


def metric(text: str, name: str) -> float:
    """The sum of the samples whose line starts with ``name`` in a Prometheus exposition."""
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name))


def all_in(metrics: str) -> float:
    """Predict requests in the batcher (taken into the blocked batch or queued: a window each)
    or refused with a 503."""
    refused = metric(metrics, 'forecast_http_requests_total{route="/v1/predict",status="503"}')
    return metric(metrics, "forecast_batch_windows_sum") + metric(metrics, "forecast_queue_depth") + refused


def test_full_queue_answers_503_with_retry_after(model_store):
    with serving(
        model_store,
        "models:/svc-lstm@champion",
        max_queued_windows=2,
        max_series_per_request=2,
        max_wait_ms=0,
    ) as client:
        gate = threading.Event()
        client.app.state.batcher.executor.submit(gate.wait)  # the forward pass thread is busy
        body = {"series": [{"values": window(14)}]}
        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(client.post, "/v1/predict", json=body) for _ in range(6)]
            # all six are in: taken for the blocked batch, queued (two windows at most), or refused
            until(lambda: all_in(client.get("/metrics").text) == 6, "all six requests in")
            gate.set()
            done = [f.result(timeout=60) for f in futures]
    codes = sorted(r.status_code for r in done)
    assert codes.count(503) >= 1 and codes.count(200) >= 1, codes
    refused = next(r for r in done if r.status_code == 503)
    assert refused.headers["Retry-After"] == "1"


def test_readiness_before_and_after_load_and_503_without_model(writable_store):
    admin = {"X-API-Key": "k"}
    with serving(writable_store, "models:/svc-late@champion", ready=False, api_key="k") as client:
        assert client.get("/healthz").status_code == 200
        not_ready = client.get("/readyz")
        assert not_ready.status_code == 503 and not_ready.json()["status"] == "not ready"
        response = client.post("/v1/predict", json={"series": [{"values": window(14)}]}, headers=admin)
        assert response.status_code == 503 and "Retry-After" in response.headers
        registry = mlflow.MlflowClient(writable_store)
        source = registry.get_model_version_by_alias("svc-lstm", "champion")
        registry.create_registered_model("svc-late")
        late = registry.create_model_version("svc-late", source.source, run_id=source.run_id)
        registry.set_registered_model_alias("svc-late", "champion", late.version)
        assert client.post("/v1/admin/reload", headers=admin).json()["changed"] is True
        assert client.get("/readyz").status_code == 200
        answer = client.post("/v1/predict", json={"series": [{"values": window(14)}]}, headers=admin)
        assert answer.status_code == 200


def test_hot_reload_to_a_new_version_and_refusal_of_a_broken_one(writable_store):
    registry = mlflow.MlflowClient(writable_store)
    registry.create_registered_model("svc-hot")
    lstm = registry.get_model_version_by_alias("svc-lstm", "champion")
    gru = registry.get_model_version_by_alias("svc-gru", "champion")
    v1 = registry.create_model_version("svc-hot", lstm.source, run_id=lstm.run_id)
    registry.set_registered_model_alias("svc-hot", "champion", v1.version)
    body = {"series": [{"values": window(14)}]}
    with serving(writable_store, "models:/svc-hot@champion", api_key="k") as client:
        client.headers["X-API-Key"] = "k"
        first = client.post("/v1/predict", json=body).json()
        assert first["model"]["version"] == "1"
        v2 = registry.create_model_version("svc-hot", gru.source, run_id=gru.run_id)
        registry.set_registered_model_alias("svc-hot", "champion", v2.version)
        reload = client.post("/v1/admin/reload")
        assert reload.json() == {"changed": True, "message": "now serving models:/svc-hot/2", "version": "2"}
        second = client.post("/v1/predict", json=body).json()
        assert second["model"]["version"] == "2"
        assert second["forecasts"] != first["forecasts"]
        broken = registry.create_model_version("svc-hot", "/nonexistent/model", run_id=None)
        registry.set_registered_model_alias("svc-hot", "champion", broken.version)
        refused = client.post("/v1/admin/reload")
        assert refused.status_code == 502 and "still serving version 2" in refused.json()["detail"]
        assert client.post("/v1/predict", json=body).json()["model"]["version"] == "2"
        assert client.get("/readyz").status_code == 200
        status = client.get("/v1/admin/status").json()
        assert status["last_error"] and status["consecutive_failures"] == 1
        metrics = client.get("/metrics").text
    assert 'forecast_model_reloads_total{outcome="failure"} 1.0' in metrics
    assert 'forecast_model_reloads_total{outcome="success"} 2.0' in metrics
    assert 'forecast_model_version{name="svc-hot"} 2.0' in metrics


def test_metrics_and_docs(model_store):
    with serving(model_store, "models:/svc-lstm@champion") as client:
        client.post("/v1/predict", json={"series": [{"values": window(14)}]})
        client.post("/v1/predict", json={"series": []})
        metrics = client.get("/metrics").text
        assert 'forecast_http_requests_total{route="/v1/predict",status="200"} 1.0' in metrics
        assert 'forecast_http_requests_total{route="/v1/predict",status="422"} 1.0' in metrics
        assert "forecast_http_request_duration_seconds_bucket" in metrics
        assert "forecast_batch_windows_bucket" in metrics
        assert client.get("/docs").status_code == 200
        schema = client.get("/openapi.json").json()
        example = schema["components"]["schemas"]["PredictRequest"]["examples"][0]
        assert len(example["series"][0]["values"]) == 14  # the served model's look-back
        assert client.post("/v1/predict", json=example).status_code == 200
        assert "securitySchemes" not in schema["components"]


def test_the_published_schema_follows_the_model_and_the_key(model_store):
    with serving(model_store, "models:/svc-calendar@champion", api_key="k") as client:
        schema = client.get("/openapi.json").json()
        series = schema["components"]["schemas"]["SeriesIn"]
        assert series["required"] == ["values", "timestamps"]  # a calendar model needs them
        example = schema["components"]["schemas"]["PredictRequest"]["examples"][0]
        answer = client.post("/v1/predict", json=example, headers={"X-API-Key": "k"})
        assert answer.status_code == 200, answer.text
        assert schema["components"]["securitySchemes"]["APIKey"] == {
            "type": "apiKey",
            "in": "header",
            "name": "X-API-Key",
        }
        assert schema["paths"]["/v1/predict"]["post"]["security"] == [{"APIKey": []}]
        assert "security" not in schema["paths"]["/readyz"]["get"]
