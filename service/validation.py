"""Checks that need the loaded model: window length, feature count, timestamps. Every problem is
reported with the series index and field, all at once."""

from __future__ import annotations

from datetime import UTC

import numpy as np
from fastapi import HTTPException, status

from forecaster.predictor import Predictor
from service.schemas import PredictRequest, SeriesIn


def unprocessable(problems: list[tuple[list[str | int], str]]) -> HTTPException:
    detail = [{"loc": ["body", *loc], "field": field_name(loc), "msg": msg} for loc, msg in problems]
    return HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail=detail)


def field_name(loc: list[str | int]) -> str:
    """["series", 2, "values"] -> "series[2].values"."""
    name = ""
    for part in loc:
        if isinstance(part, int):
            name += f"[{part}]"
        elif part != "body":
            name += f".{part}" if name else str(part)
    return name


def windows_for(
    request: PredictRequest, predictor: Predictor, max_series: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """(n, L, F) raw windows cut to their last L steps, and (n, L) timestamps or None."""
    if len(request.series) > max_series:
        raise unprocessable([(["series"], f"{len(request.series)} series, at most {max_series} per request")])
    problems: list[tuple[list[str | int], str]] = []
    windows, stamps = [], []
    for i, series in enumerate(request.series):
        window, times = _one(series, i, predictor, problems)
        windows.append(window)
        stamps.append(times)
    if problems:
        raise unprocessable(problems)
    timestamps = np.stack(stamps) if all(s is not None for s in stamps) else None
    return np.stack(windows), timestamps


def _one(
    series: SeriesIn, i: int, predictor: Predictor, problems: list
) -> tuple[np.ndarray | None, np.ndarray | None]:
    lookback, features = predictor.lookback, predictor.features
    values = np.asarray(series.values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.shape[1] != len(features):
        shape = (
            "numbers" if len(features) == 1 else f"rows of {len(features)} numbers ({', '.join(features)})"
        )
        problems.append(
            (["series", i, "values"], f"rows have {values.shape[1]} number(s); the model expects {shape}")
        )
        return None, None
    if len(values) < lookback:
        problems.append(
            (["series", i, "values"], f"{len(values)} steps; the model needs at least {lookback}")
        )
        return None, None
    times = None
    if series.timestamps is not None:
        if len(series.timestamps) != len(values):
            problems.append(
                (["series", i, "timestamps"], f"{len(series.timestamps)} timestamps for {len(values)} values")
            )
            return None, None
        naive = [t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t for t in series.timestamps]
        times = np.array(naive, dtype="datetime64[ns]")[-lookback:]
        if (np.diff(times) <= np.timedelta64(0)).any():
            problems.append((["series", i, "timestamps"], "timestamps must be strictly increasing"))
            return None, None
    elif predictor.uses_calendar:
        problems.append((["series", i, "timestamps"], "required: this model uses calendar features"))
        return None, None
    return values[-lookback:], times
