"""The service answers, for a window, the forecast `forecast evaluate` computed for the same
window: for every architecture, with calendar features and known-future covariates on, and with
timestamps sent in UTC to a model trained on Berlin local time (they are put on its clock)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data.datamodule import prepare
from forecaster.data.source import load_from_config
from forecaster.evaluation import MODEL
from pipelines.evaluate import evaluations
from tests.forecaster.test_model_inputs import hourly_file
from tests.service.conftest import serving, train_registered

# the module's models are trained once (make test runs a module on one worker: --dist loadfile)
pytestmark = pytest.mark.slow

ARCHITECTURES = {
    "rnn": ["model.cell=rnn"],
    "lstm": ["model.cell=lstm"],
    "gru": ["model.cell=gru"],
    "bi-gru": ["model.cell=gru", "model.bidirectional=true"],
    "seq2seq": ["model.architecture=seq2seq", "model.attention=none"],
    "seq2seq-attention": ["model.architecture=seq2seq", "model.attention=bahdanau"],
    "seq2seq-direct-bi-attention": [
        "model.architecture=seq2seq",
        "model.decoder=direct",
        "model.attention=bahdanau",
        "model.bidirectional=true",
    ],
    "lstm-segments": ["model.cell=lstm", "model.segment_length=4"],
    "seq2seq-attention-quantiles": [
        "model.architecture=seq2seq",
        "model.attention=bahdanau",
        "model.quantiles=[0.1,0.5,0.9]",
        "train.loss=quantile",
    ],
}
ZONE = "Europe/Berlin"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One registered tiny model per architecture, trained on an hourly file written in Berlin
    local time with its offsets (data.timezone names the zone)."""
    root = tmp_path_factory.mktemp("parity-store")
    path = hourly_file(root, zone=ZONE)
    common = [
        f"data.path={path}",
        "data.time_column=t",
        "data.target=load",
        "data.covariates=[temp]",
        "data.future_covariates=[promo]",
        "data.calendar_features=true",
        f"data.timezone={ZONE}",
        "window.lookback=12",
        "window.horizon=4",
        "model.hidden_size=8",
        "model.layers=1",
        "train.epochs=1",
        "train.batch_size=64",
        "train.limit_train_batches=2",
        "train.progress_bar=false",
        "tracking.plots=false",  # not what is compared here (the ONNX export, which serves, is kept)
    ]
    return train_registered(
        root, {f"parity-{name}": [*common, *settings] for name, settings in ARCHITECTURES.items()}
    )


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_the_service_answers_what_forecast_evaluate_computed(store, name, monkeypatch):
    model_uri = f"models:/parity-{name}@champion"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    config, (test,) = evaluations(model_uri, {}, splits=("test",))
    windows = prepare(load_from_config(config.data), config).windows("test")
    picks = [0, len(windows) // 2, len(windows) - 1]
    past, times, ahead = windows.past(), windows.past_times(), windows.future_covariates()
    body = {
        "series": [
            {
                "values": past[i].tolist(),
                "timestamps": utc_text(times[i]),
                "future": {"promo": ahead[i, :, 0].tolist()},
            }
            for i in picks
        ]
    }
    with serving(store, model_uri) as client:
        response = client.post("/v1/predict", json=body)
    assert response.status_code == 200, response.text
    answered = np.array([forecast["values"] for forecast in response.json()["forecasts"]])
    np.testing.assert_allclose(answered, test.forecasts[MODEL][picks], rtol=1e-6, atol=1e-6)
    stamps = [forecast["timestamps"][0] for forecast in response.json()["forecasts"]]
    assert stamps == [str(pd.Timestamp(t)).replace(" ", "T") for t in windows.future_times()[picks, 0]]


def utc_text(local: np.ndarray) -> list[str]:
    """Berlin wall times -> the same instants as UTC ISO text with a Z."""
    instants = pd.DatetimeIndex(local).tz_localize(ZONE).tz_convert("UTC")
    return [stamp.strftime("%Y-%m-%dT%H:%M:%SZ") for stamp in instants]
