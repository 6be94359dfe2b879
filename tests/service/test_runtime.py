"""The service answers the same forecasts, intervals and attention weights whether ONNX Runtime or
torch runs the network (INFERENCE_RUNTIME), says which in /v1/model and /metrics, and serves a
version without a verified export (one registered before exports existed) with torch, saying so."""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import mlflow
import numpy as np
import pytest
import torch

from forecaster.onnx_export import ONNX_FILE, REPORT_FILE
from tests.conftest import TINY
from tests.service.conftest import serving, train_registered
from tests.waiting import until

# the module's models are trained once (make test runs a module on one worker: --dist loadfile)
pytestmark = pytest.mark.slow

MODELS = {
    # a GRU encoder-decoder stepping through the horizon, attending, with quantile outputs
    "rt-seq2seq": [
        "model.architecture=seq2seq",
        "model.attention=bahdanau",
        "model.cell=gru",
        "model.quantiles=[0.1,0.5,0.9]",
        "train.loss=quantile",
    ],
    "rt-lstm": ["model.cell=lstm"],  # many-to-one with conformal intervals
    "rt-old": ["model.cell=gru"],  # its export is deleted below: as registered before exports
}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("runtime-store")
    uri = train_registered(root, {name: [*TINY, *settings] for name, settings in MODELS.items()})
    for file in (ONNX_FILE, REPORT_FILE):  # rt-old's model as saved before this change
        model_file(uri, root, "rt-old", file).unlink()
    return uri


def model_file(uri: str, root: Path, name: str, file: str) -> Path:
    """A file of the registered version's predictor directory in the local artifact store."""
    client = mlflow.MlflowClient(uri)
    version = client.get_model_version_by_alias(name, "champion")
    location = url2pathname(urlparse(client.get_model_version_download_uri(name, version.version)).path)
    (path,) = (root / Path(location)).rglob(f"predictor/{file}")  # root / an absolute path is that path
    return path


def body(windows: int = 5, attention: bool = False) -> dict:
    rng = np.random.default_rng(0)
    series = [{"values": (12 + 3 * rng.standard_normal(14)).tolist()} for _ in range(windows)]
    return {"series": series, "return_attention": attention}


def answer(store: str, model: str, runtime: str) -> tuple[dict, list[dict], str]:
    with serving(store, f"models:/{model}@champion", inference_runtime=runtime) as client:
        response = client.post("/v1/predict", json=body(attention=model == "rt-seq2seq"))
        assert response.status_code == 200, response.text
        return client.get("/v1/model").json(), response.json()["forecasts"], counted_metrics(client)


def counted_metrics(client) -> str:
    """/metrics once the reloader has counted the load (just after the model is ready)."""

    def counted() -> str | None:
        text = client.get("/metrics").text
        return text if "forecast_model_runtime{" in text else None

    return until(counted, "the load counted in /metrics")


def assert_same_forecasts(onnx: list[dict], eager: list[dict]) -> None:
    for got, want in zip(onnx, eager, strict=True):
        np.testing.assert_allclose(got["values"], want["values"], rtol=0, atol=1e-5)
        assert got.get("quantiles") and got["quantiles"].keys() == want["quantiles"].keys()
        for level in got["quantiles"]:
            np.testing.assert_allclose(got["quantiles"][level], want["quantiles"][level], rtol=0, atol=1e-5)
        if want.get("attention") is not None:
            np.testing.assert_allclose(got["attention"], want["attention"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("model", ["rt-seq2seq", "rt-lstm"])
def test_onnx_and_torch_answer_the_same_forecasts(store, model):
    onnx_model, onnx, onnx_metrics = answer(store, model, "onnx")
    torch_model, eager, torch_metrics = answer(store, model, "torch")
    assert (onnx_model["runtime"], onnx_model["runtime_note"]) == ("onnx", None)
    assert (torch_model["runtime"], torch_model["runtime_note"]) == ("torch", None)
    assert 'forecast_model_runtime{runtime="onnx"} 1.0' in onnx_metrics
    assert 'forecast_model_runtime{runtime="torch"} 1.0' in torch_metrics
    assert_same_forecasts(onnx, eager)
    if model == "rt-seq2seq":
        assert all(len(f["attention"]) == 4 for f in onnx)  # H rows, from the ONNX graph


def test_auto_serves_the_verified_export_on_a_cpu(store):
    model, _, metrics = answer(store, "rt-lstm", "auto")
    assert model["runtime"] == "onnx" and model["device"] == "cpu"
    assert 'forecast_model_runtime{runtime="onnx"} 1.0' in metrics


def test_a_version_without_an_export_serves_with_torch_and_says_so(store, caplog):
    with caplog.at_level(logging.WARNING, logger="service.model"):
        model, forecasts, metrics = answer(store, "rt-old", "onnx")
    assert model["runtime"] == "torch"
    assert "no verified ONNX export (saved without an ONNX export)" in model["runtime_note"]
    assert 'forecast_model_runtime{runtime="torch"} 1.0' in metrics
    assert any("INFERENCE_RUNTIME=onnx but" in r.getMessage() for r in caplog.records)
    _, eager, _ = answer(store, "rt-old", "torch")
    assert_same_forecasts(forecasts, eager)


def test_the_registered_versions_say_which_runtimes_they_carry(store):
    client = mlflow.MlflowClient(store)
    version = client.get_model_version_by_alias("rt-seq2seq", "champion")
    assert version.tags["runtimes"] == "torch,onnx" and "onnx_export" not in version.tags
    assert client.get_run(version.run_id).data.tags["runtimes"] == "torch,onnx"


def test_onnx_runtime_takes_the_services_thread_count(store):
    """TORCH_THREADS is the serving process's thread count for either runtime."""
    before = torch.get_num_threads()
    try:
        model = "models:/rt-lstm@champion"
        with serving(store, model, inference_runtime="onnx", torch_threads=2) as client:
            session = client.app.state.store.current.predictor.runtime.session
            assert session.get_session_options().intra_op_num_threads == 2
    finally:
        torch.set_num_threads(before)


def test_a_window_whose_last_week_is_flat_gets_the_calmest_calibration_windows_interval(store):
    """A stuck sensor's window: the interval is the conformal score times the calmest selection
    window's volatility, not a 1e-6 sliver around the forecast."""
    rng = np.random.default_rng(1)
    # L=14: the last 8 values flat, so the week of changes the volatility reads is all zeros
    values = [*(12 + 3 * rng.standard_normal(6)).tolist(), *[14.0] * 8]
    with serving(store, "models:/rt-lstm@champion", inference_runtime="torch") as client:
        predictor = client.app.state.store.current.predictor
        response = client.post("/v1/predict", json={"series": [{"values": values}]})
    assert response.status_code == 200, response.text
    (forecast,) = response.json()["forecasts"]
    floor = predictor.volatility_floor * float(predictor.scaler.std[0])
    assert floor > 1e-3
    half_width = (np.array(forecast["quantiles"]["0.9"]) - np.array(forecast["quantiles"]["0.1"])) / 2
    np.testing.assert_allclose(half_width, predictor.conformal[0.8] * floor, rtol=1e-4)
