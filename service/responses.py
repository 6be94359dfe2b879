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
    spread = prediction.spread
    quantiles = {f"{q:g}": network_digits(values, spread) for q, values in prediction.quantiles.items()}
    forecasts = []
    for i, values in enumerate(network_digits(prediction.mean, spread)):
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


NETWORK_PRECISION = 1e-6  # float32 (eps 1.2e-7) on the z-scored scale, where |z| reaches ~10


def network_digits(values: np.ndarray, spread: np.ndarray | None) -> np.ndarray:
    """``values`` (N, H) rounded to what the network computed: it works in float32 on the z-scored
    scale, so an answer is exact to about ``NETWORK_PRECISION`` times the window's ``spread`` (N,)
    and the float64 digits past that are noise (``12.345679``, not ``12.345678901234``). Relative
    to the spread, not to the value: float32 of the value itself would round a series at 1e8 with
    a spread of 1 to units the network did resolve. Without a spread, float32 of the value. The
    one rounding for point forecasts and every quantile or interval bound in an answer; orjson
    writes each float64 in its shortest form, so the rounded ones print short."""
    if spread is None:
        return np.ascontiguousarray(values, dtype=np.float32)
    quantum = np.maximum(np.asarray(spread, dtype=np.float64), np.finfo(np.float64).tiny) * NETWORK_PRECISION
    decimals = np.ceil(-np.log10(quantum)).astype(int)  # (N,)
    return (
        np.stack([np.round(row, d) for row, d in zip(values, decimals, strict=True)])
        if len(values)
        else values
    )
