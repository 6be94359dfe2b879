"""The API's `attention` field (issue 41): an attention model answers H rows of L weights, one
row per forecast step and not one row repeated, with the direct decoder in segments too."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import TINY
from tests.service.conftest import serving, train_registered

pytestmark = pytest.mark.slow  # trains and serves real models: in make test, not make test-fast

MODELS = {  # the `steps` attention layout, the default of an attention model
    "rows-stepwise": ["model.architecture=seq2seq", "model.attention=bahdanau"],
    # one-week segments of the daily series: before issue 41 every step of a segment had one row
    "rows-segments": [
        "model.architecture=seq2seq",
        "model.decoder=direct",
        "model.segment_length=2",
        "model.attention=bahdanau",
    ],
}


@pytest.fixture(scope="module")
def attention_store(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("attention-store")
    return train_registered(root, {name: [*TINY, *settings] for name, settings in MODELS.items()})


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_attention_field_has_a_row_of_its_own_per_forecast_step(attention_store, name):
    with serving(attention_store, f"models:/{name}@champion") as client:
        info = client.get("/v1/model").json()
        lookback, horizon = info["lookback"], info["horizon"]
        rng = np.random.default_rng(0)
        series = [(11 + rng.normal(0, 2, lookback)).tolist() for _ in range(2)]
        body = {"series": [{"values": values} for values in series], "return_attention": True}
        response = client.post("/v1/predict", json=body)
        assert response.status_code == 200, response.text
        weights = np.asarray([forecast["attention"] for forecast in response.json()["forecasts"]])
    assert weights.shape == (2, horizon, lookback)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    for window in weights:
        for t in range(1, horizon):
            assert not np.allclose(window[t], window[t - 1], rtol=0, atol=1e-6), (name, t)
