"""The 200 answer of /v1/predict, encoded straight from the model's numpy rows."""

from __future__ import annotations

import math
import sys

import numpy as np
import orjson

from service.batching import Answer


def forecast_body(answer: Answer, future: list[np.ndarray | None]) -> bytes:
    """The PredictResponse document as JSON bytes, encoded by orjson straight from the numpy rows:
    validating our own output through pydantic, or ``tolist`` and the standard json module, cost
    as much as the forward pass of a small model. Values are finite here (checked per job)."""
    used, prediction = answer.model, answer.prediction
    decimals = decimals_for(prediction.spread)  # once for the forecasts and every quantile
    quantiles = {f"{q:g}": rounded(values, decimals) for q, values in prediction.quantiles.items()}
    forecasts = []
    for i, values in enumerate(rounded(prediction.mean, decimals)):
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


Decimals = int | np.ndarray | None  # one count for every row, (N, 1) counts, or float32's own


def network_digits(values: np.ndarray, spread: np.ndarray | None) -> np.ndarray:
    """``values`` (N, H) rounded to what the network computed: it works in float32 on the z-scored
    scale, so an answer is exact to about ``NETWORK_PRECISION`` times the window's ``spread`` (N,)
    and the float64 digits past that are noise (``12.345679``, not ``12.345678901234``). Relative
    to the spread, not to the value: float32 of the value itself would round a series at 1e8 with
    a spread of 1 to units the network did resolve. Without a spread, float32 of the value. The
    one rounding for point forecasts and every quantile or interval bound in an answer; orjson
    writes each float64 in its shortest form, so the rounded ones print short."""
    return rounded(values, decimals_for(spread))


def decimals_for(spread: np.ndarray | None) -> Decimals:
    """How many decimals each row keeps: computed once per answer (for the forecasts and every
    quantile), and a single count when every row has the same spread, as every window of a
    single-series model has (its fitted scaler's): a per-row rounding was 9% of a request's CPU."""
    if spread is None:
        return None
    spread = np.asarray(spread, dtype=np.float64)
    if len(spread) and (spread == spread[0]).all():
        return count_for(float(spread[0]))
    return np.array([count_for(float(s)) for s in spread])[:, None]  # (N, 1)


def count_for(spread: float) -> int:
    """Decimals for one spread, clamped to +-22, where 10**d is still exact in float64."""
    quantum = max(spread, sys.float_info.min) * NETWORK_PRECISION
    return min(22, max(-22, math.ceil(-math.log10(quantum))))


def rounded(values: np.ndarray, decimals: Decimals) -> np.ndarray:
    """``np.round(row, d)`` per row: scale by 10**d, round half to even, scale back."""
    if decimals is None:
        return np.ascontiguousarray(values, dtype=np.float32)
    if isinstance(decimals, int):
        return np.round(values, decimals)
    factor = 10.0 ** np.abs(decimals)
    finer = decimals >= 0  # round to decimals, else to tens, hundreds...
    return np.where(finer, np.rint(values * factor) / factor, np.rint(values / factor) * factor)
