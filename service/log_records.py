"""The one function that turns a forecast into a forecast-log record, for the champion's answers
(service/predict_endpoint.py) and the shadow challenger's (service/shadow.py) alike: the log then
holds both in the same form, which the monitor compares them by."""

from __future__ import annotations

import numpy as np

from forecaster.predictor import Prediction
from monitoring.records import ForecastRecord
from service.model_store import LoadedModel


def forecast_record(
    request_id: str,
    role: str,
    model: LoadedModel,
    series_ids: list[str],
    past_target: np.ndarray,
    future_times: list[np.ndarray],
    prediction: Prediction,
    rows: slice | list[int] = slice(None),
    idempotency_key: str | None = None,
    fingerprint: str | None = None,
) -> ForecastRecord:
    """``model``'s forecast of ``series_ids`` (``rows`` of ``prediction``; all by default, as views)
    from the windows whose target was ``past_target`` (n, L): what the log writes, and the
    per-series MASE scales its scores divide by."""
    predictor = model.predictor
    name, version, alias = model.ref.logged_as
    return ForecastRecord(
        request_id=request_id,
        role=role,
        model_name=name,
        model_version=version,
        model_alias=alias,
        frequency=predictor.frequency,
        series_ids=series_ids,
        past_target=past_target,
        scales=predictor.mase_scales_for(series_ids, past_target),
        future_times=future_times,
        mean=prediction.mean[rows],
        quantiles={q: bound[rows] for q, bound in prediction.quantiles.items()},
        levels=predictor.interval_levels,
        idempotency_key=idempotency_key,
        fingerprint=fingerprint,
    )
