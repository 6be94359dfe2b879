"""Checks that need the loaded model: window length, feature count, numeric range after scaling,
timestamps against the model's frequency and pandas' calendar. Everything a request can get wrong
is caught here, before it joins a batch, and reported with the series index and field, all at once.

Timestamps: zone-aware stamps are converted to the model's training clock (forecaster.data.clock:
UTC, the zone named by data.timezone, or for naive training stamps of an unnamed zone the wall
time as written) and used as naive wall times. Stamps must be evenly spaced at the model's
frequency, and the forecast's own stamps must stay within pandas' range (1677-09-21 to
2262-04-11)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from forecaster.data.clock import stamp_on_clock
from forecaster.data.frequency import first_off_step
from forecaster.errors import NO_ATTENTION
from service.parsing import ParsedRequest, ParsedSeries, ProblemItem, RequestProblems
from service.request_times import EARLIEST, LATEST, out_of_range, shape_problem
from service.schemas import FLOAT32_MAX

if TYPE_CHECKING:  # the body-parsing helper process imports this module's bounds: not torch
    from forecaster.predictor import Predictor


def field_name(loc: list[str | int]) -> str:
    """["series", 2, "values", 7] -> "series[2].values[7]"."""
    name = ""
    for part in loc:
        if isinstance(part, int):
            name += f"[{part}]"
        elif part != "body":
            name += f".{part}" if name else str(part)
    return name


# where a problem's loc says it is outside the body (FastAPI's own names, and the headers')
NOT_BODY = {"query", "path", "header", "headers", "cookie"}


def problem_detail(problems: list[ProblemItem]) -> list[dict[str, object]]:
    """The 422 body's items: loc (as FastAPI writes it: under "body" unless it names a query
    parameter, a path parameter or a header), field, msg, type."""
    return [
        {"loc": location(p.loc), "field": field_name(p.loc) or "body", "msg": p.msg, "type": p.type}
        for p in problems
    ]


def location(loc: list[str | int]) -> list[str | int]:
    return loc if loc and loc[0] in NOT_BODY else ["body", *loc]


@dataclass
class Windows:
    values: np.ndarray  # (n, L, F) raw windows, cut to their last L steps
    timestamps: np.ndarray | None  # (n, L) datetime64[ns], when every series has them
    future: list[np.ndarray | None]  # per series: (H,) the forecast's timestamps, when it sent some
    covariates: np.ndarray | None = None  # (n, H, Kf) future covariates, for models that have them
    series_ids: list[str | None] | None = None  # per series, for panel models (a stored series)


def windows_for(request: ParsedRequest, predictor: Predictor, max_series: int) -> Windows:
    """The request's windows, or RequestProblems naming everything wrong with it."""
    if len(request.series) > max_series:
        message = f"{len(request.series)} series, at most {max_series} per request"
        raise RequestProblems([ProblemItem(["series"], message, "too_long")])
    problems: list[ProblemItem] = []
    if request.return_attention and not predictor.has_attention:  # else a 200 without them
        problems.append(ProblemItem(["return_attention"], NO_ATTENTION, "no_attention"))
    windows, stamps, covariates = [], [], []
    for i, series in enumerate(request.series):
        windows.append(_window(series, i, predictor, problems))
        stamps.append(_timestamps(series, i, predictor, problems))
        covariates.append(_future_covariates(series, i, predictor, problems))
    future = [] if problems else _future(stamps, predictor, problems)
    if not problems:
        _one_forecast_per_series_and_origin(request, stamps, problems)
    if problems:
        raise RequestProblems(problems)
    timestamps = None
    if all(s is not None for s in stamps):
        timestamps = np.stack([s[-predictor.lookback :] for s in stamps])
    ahead = np.stack(covariates) if predictor.future_covariates else None  # (n, H, Kf)
    ids = [series.series_id for series in request.series] if predictor.is_panel else None
    return Windows(np.stack(windows), timestamps, future, ahead, ids)


def _one_forecast_per_series_and_origin(
    request: ParsedRequest, stamps: list[np.ndarray | None], problems: list
) -> None:
    """A series_id with the same last timestamp twice is the same forecast twice: the forecast log
    would hold it twice and each actual would count twice. (The same series from several origins,
    a backlog, is several forecasts, and welcome.)"""
    first_as: dict[tuple[str, np.datetime64], int] = {}
    for i, (series, times) in enumerate(zip(request.series, stamps, strict=True)):
        if series.series_id is None or times is None:
            continue
        key = (series.series_id, times[-1])
        if key in first_as:
            message = (
                f"series {series.series_id!r} from the same origin as series[{first_as[key]}]: "
                "send each forecast once"
            )
            problems.append(ProblemItem(["series", i, "series_id"], message, "duplicate"))
        else:
            first_as[key] = i


def _future_covariates(
    series: ParsedSeries, i: int, predictor: Predictor, problems: list
) -> np.ndarray | None:
    """(H, Kf) in the model's order; every name missing, unknown, short or long is a problem
    naming ``series[i].future.NAME`` and the number of values expected (H, one per step)."""
    names, horizon = predictor.future_covariates, predictor.horizon
    given = series.future or {}
    where: list[str | int] = ["series", i, "future"]
    found = len(problems)
    for name in given:
        if name not in names:
            takes = f"its future covariates are {', '.join(names)}" if names else "it takes none"
            problems.append(ProblemItem([*where, name], f"unknown future covariate: {takes}", "extra"))
    for name in names:
        if name not in given:
            message = f"required: {horizon} values, one per forecast step (the model's future covariate)"
            problems.append(ProblemItem([*where, name], message, "missing"))
        elif len(given[name]) != horizon:
            message = f"{len(given[name])} values; expected {horizon}, one per forecast step"
            problems.append(ProblemItem([*where, name], message, "length_mismatch"))
    if len(problems) > found or not names:
        return None
    return np.stack([given[name] for name in names], axis=1)  # (H, Kf)


def _future(stamps: list[np.ndarray | None], predictor: Predictor, problems: list) -> list[np.ndarray | None]:
    """Each series' forecast timestamps, computed once for all; a series whose forecast would run
    past the calendar is a problem naming its last timestamp."""
    given = [i for i, s in enumerate(stamps) if s is not None]
    if not given:
        return [None] * len(stamps)
    lasts = np.array([stamps[i][-1] for i in given])
    try:
        future = predictor.future_times(lasts)  # (n given, H)
        fits = np.asarray(future[:, -1] <= np.datetime64(LATEST), dtype=bool)
    except (OverflowError, ValueError, pd.errors.OutOfBoundsDatetime):
        future, fits = None, np.array([_fits(predictor, last) for last in lasts])
    for k in np.flatnonzero(~fits).tolist():
        i = given[k]
        message = (
            f"a forecast of {predictor.horizon} steps after {pd.Timestamp(lasts[k])} would run past "
            f"{LATEST:%Y-%m-%d %H:%M:%S}, the latest timestamp that can be represented"
        )
        problems.append(ProblemItem(["series", i, "timestamps", len(stamps[i]) - 1], message, "out_of_range"))
    if problems:
        return []
    out: list[np.ndarray | None] = [None] * len(stamps)
    for k, i in enumerate(given):
        out[i] = future[k]
    return out


def _fits(predictor: Predictor, last: np.datetime64) -> bool:
    try:
        return bool(predictor.future_times(np.array([last]))[0, -1] <= np.datetime64(LATEST))
    except (OverflowError, ValueError, pd.errors.OutOfBoundsDatetime):
        return False


def _window(series: ParsedSeries, i: int, predictor: Predictor, problems: list) -> np.ndarray | None:
    lookback, features = predictor.lookback, predictor.features
    values = series.values  # (T, F)
    where: list[str | int] = ["series", i, "values"]
    if values.shape[1] != len(features):
        shape = (
            "1 number per step (a flat list)"
            if len(features) == 1
            else f"rows of {len(features)} numbers ({', '.join(features)})"
        )
        message = f"rows have {values.shape[1]} number(s); the model expects {shape}"
        problems.append(ProblemItem(where, message, "feature_count"))
        return None
    if len(values) < lookback:
        problems.append(
            ProblemItem(where, f"{len(values)} steps; the model needs at least {lookback}", "too_short")
        )
        return None
    window = values[-lookback:]
    centre, spread = predictor.scales(window[None])
    scaled = np.abs((window - centre[0]) / spread[0])  # what the network will be given
    beyond = np.flatnonzero((scaled > FLOAT32_MAX).any(axis=1))
    if beyond.size:
        j = len(values) - lookback + int(beyond[0])
        message = (
            "so far from the training data's scale that the model cannot compute with it (float32 overflow)"
        )
        problems.append(ProblemItem([*where, j], message, "out_of_range"))
        return None
    return window


def _timestamps(series: ParsedSeries, i: int, predictor: Predictor, problems: list) -> np.ndarray | None:
    where: list[str | int] = ["series", i, "timestamps"]
    if series.timestamps is None:
        if predictor.uses_calendar:
            problems.append(ProblemItem(where, "required: this model uses calendar features", "missing"))
        return None
    problem = shape_problem(series.timestamps, len(series.values), where)
    if problem is not None:
        problems.append(problem)
        return None
    zoned = [stamp.tzinfo is not None for stamp in series.timestamps]
    times, outside = _clock_times(series.timestamps, zoned[0] if zoned else False, predictor.clock)
    if outside is not None:
        problems.append(out_of_range(series.timestamps[outside], [*where, outside]))
        return None
    steps = np.diff(times.view(np.int64))
    if (steps <= 0).any():
        k = int(np.flatnonzero(steps <= 0)[0]) + 1
        problems.append(ProblemItem([*where, k], "timestamps must be strictly increasing", "not_increasing"))
        return None
    off = first_off_step(pd.DatetimeIndex(times), predictor.frequency)
    if off is not None:
        k, why = off
        sent = ""
        if zoned[0]:
            sent = f" (sent as {series.timestamps[k].isoformat()}, read on the {predictor.clock} clock)"
        problems.append(ProblemItem([*where, k], why + sent, "frequency"))
        return None
    return times


def _clock_times(stamps: list[datetime], zoned: bool, clock: str) -> tuple[np.ndarray, int | None]:
    """(T,) datetime64[ns] naive wall times on the model's clock, and the position of the first
    stamp outside pandas' range (None when all are in it). Naive stamps convert in one pandas
    call (numpy's conversion of datetime objects took 6x longer): per stamp, in Python, this was
    the largest cost of a request that sends timestamps."""
    naive = [stamp_on_clock(stamp, clock) for stamp in stamps] if zoned else stamps
    if None in naive:  # the conversion itself left the calendar
        return np.empty(0, dtype="datetime64[ns]"), naive.index(None)
    try:
        times = pd.DatetimeIndex(naive).as_unit("us").values  # (T,): every datetime fits microseconds
    except pd.errors.OutOfBoundsDatetime:  # pandas < 3 builds nanoseconds: 1677-2262 only
        times = np.array(naive, dtype="datetime64[us]")
    outside = np.flatnonzero((times < np.datetime64(EARLIEST)) | (times > np.datetime64(LATEST)))
    if outside.size:
        return times, int(outside[0])
    return times.astype("datetime64[ns]"), None  # in pandas' range: checked
