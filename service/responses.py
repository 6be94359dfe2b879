"""The 200 answer of /v1/predict, encoded straight from the model's numpy rows."""

from __future__ import annotations

import numpy as np
import orjson

from service.batching import Answer


def forecast_body(answer: Answer, future: list[np.ndarray | None]) -> bytes:
    """The PredictResponse document as JSON bytes, encoded by orjson straight from the numpy rows:
    validating our own output through pydantic, or ``tolist`` and the standard json module, cost
    as much as the forward pass of a small model. Values are finite here (checked per job)."""
    used, prediction = answer.model, answer.prediction
    quantiles = {f"{q:g}": float32_digits(values) for q, values in prediction.quantiles.items()}
    forecasts = []
    for i, values in enumerate(float32_digits(prediction.mean)):
        forecast: dict[str, object] = {"values": values}
        if future[i] is not None:
            forecast["timestamps"] = future[i].astype("datetime64[s]")
        if prediction.attention is not None:
            forecast["attention"] = prediction.attention[i]
        if quantiles:
            forecast["quantiles"] = {level: rows[i] for level, rows in quantiles.items()}
        forecasts.append(forecast)
    ref = used.ref
    document = {
        "model": {"name": ref.name, "version": ref.version, "uri": ref.shown_uri, "run_id": ref.run_id},
        "horizon": used.predictor.horizon,
        "forecasts": forecasts,
    }
    return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)


def float32_digits(values: np.ndarray) -> np.ndarray:
    """``values`` as float32, which orjson writes in float32's shortest form (``12.345679``, not
    ``12.345678901234``): the network computes in float32, so the float64 digits past its seven
    significant ones are noise. The one rounding for point forecasts and every quantile or interval
    bound in an answer."""
    return np.ascontiguousarray(values, dtype=np.float32)
