"""The storage format of a logged forecast: a request's arrays (``ForecastRecord``) to rows of
``forecasts`` (one per series, its H steps as little-endian binary arrays), and those rows back to
one row per step (``expand_steps``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pandas as pd

from forecaster.baselines import baseline_forecasts
from forecaster.conformal import interval_quantiles
from forecaster.data.frequency import seasonal_period, step_of
from forecaster.metrics import window_scales
from monitoring.schema import STEP_ARRAYS, forecasts


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass
class ForecastRecord:
    """One answered request's forecasts, as the predict handler holds them (no copies, no rows:
    the writer thread does that)."""

    request_id: str
    role: str
    model_name: str
    model_version: str
    model_alias: str
    frequency: str
    series_ids: list[str]
    past_target: np.ndarray  # (n, L) the windows' target, raw units
    future_times: list[np.ndarray]  # n x (H,) datetime64
    mean: np.ndarray  # (n, H)
    quantiles: dict[float, np.ndarray]  # level -> (n, H)
    levels: list[float]  # the model's interval levels
    scales: np.ndarray | None = None  # (n,) MASE scales (Predictor.mase_scales_for); None: each window's own
    idempotency_key: str | None = None  # the request's Idempotency-Key header: logged once per key
    fingerprint: str | None = None  # a digest of the request's body, beside its key


FORECAST_COLUMNS = tuple(column.name for column in forecasts.columns if column.name != "id")


@functools.lru_cache(maxsize=64)
def calendar_of(frequency: str) -> tuple[int, pd.DateOffset, np.timedelta64 | None]:
    """(seasonal period, step, the step as a fixed length when it has one) of a frequency: pandas
    parses the alias slowly, once is enough."""
    step = step_of(frequency)
    try:
        fixed = pd.Timedelta(step).to_timedelta64()
    except ValueError:  # months, business days: no fixed length
        fixed = None
    return seasonal_period(frequency), step, fixed


def origins_of(first_steps: np.ndarray, frequency: str) -> np.ndarray:
    """(n,) first forecast timestamps -> the windows' last timestamps (one step earlier)."""
    _, step, fixed = calendar_of(frequency)
    if fixed is not None:
        return first_steps - fixed
    return (pd.DatetimeIndex(first_steps) - step).to_numpy().astype("datetime64[us]")  # calendar steps


def batch_rows(records: list[ForecastRecord], logged_at: datetime, dialect: str) -> list[tuple]:
    """The rows (FORECAST_COLUMNS) of a batch of records, one per series. Records of the same shape
    (frequency, horizon, look-back, interval level: in practice all of them) are stacked and built
    together, column by column with numpy: this runs for every answered forecast, in a thread that
    shares the interpreter with the event loop."""
    groups: dict[tuple, list[ForecastRecord]] = {}
    for record in records:
        level = record.levels[0] if record.levels else None
        key = (record.frequency, record.mean.shape[1], record.past_target.shape[1], level)
        groups.setdefault(key, []).append(record)
    logged = sql_times(np.array([logged_at], dtype="datetime64[us]"), dialect)[0]
    return [row for group in groups.values() for row in group_rows(group, logged, dialect)]


def group_rows(group: list[ForecastRecord], logged: object, dialect: str) -> list[tuple]:
    """The rows of records of one shape, with the baselines of each window (forecaster.baselines,
    the functions `forecast evaluate` scores with, so live and offline figures agree)."""
    first = group[0]
    past = np.concatenate([r.past_target for r in group])  # (n, L)
    mean = np.concatenate([r.mean for r in group])  # (n, H)
    n, horizon = mean.shape
    period = calendar_of(first.frequency)[0]
    baselines = baseline_forecasts(past, horizon, period)
    level = first.levels[0] if first.levels else None
    bounds: list[np.ndarray | None] = [None, None]
    if level is not None:
        quantiles = interval_quantiles(level)
        if all(q in r.quantiles for r in group for q in quantiles):
            bounds = [np.concatenate([r.quantiles[q] for r in group]) for q in quantiles]
        else:
            level = None
    targets = np.concatenate([np.stack(r.future_times) for r in group]).astype("datetime64[us]")  # (n, H)
    origins = sql_times(origins_of(targets[:, 0], first.frequency), dialect)  # the windows' last timestamps
    last_targets = sql_times(targets[:, -1], dialect)
    arrays = [
        step_bytes(array, STEP_ARRAYS[name], n)
        for name, array in (
            ("target_times", targets.view(np.int64)),
            ("forecast", mean),
            ("lower", bounds[0]),
            ("upper", bounds[1]),
            ("naive", baselines["naive"]),
            ("seasonal_naive", baselines.get("seasonal_naive")),
        )
    ]
    series = [(r, series_id) for r in group for series_id in r.series_ids]
    own = window_scales(past, period)
    given = [own[rows] if r.scales is None else r.scales for r, rows in record_rows(group)]
    scales = np.concatenate(given).tolist()
    return [
        (r.request_id, series_id, r.role, r.model_name, r.model_version, r.model_alias, origin, last,
         horizon, level, scale, logged, *steps)
        for (r, series_id), origin, last, scale, *steps in zip(
            series, origins, last_targets, scales, *arrays, strict=True
        )
    ]  # fmt: skip


def record_rows(group: list[ForecastRecord]) -> list[tuple[ForecastRecord, slice]]:
    """Each record with its rows in the group's stacked arrays."""
    bounds = np.cumsum([0, *(len(r.past_target) for r in group)])
    return [(r, slice(lo, hi)) for r, lo, hi in zip(group, bounds[:-1], bounds[1:], strict=True)]


def step_bytes(array: np.ndarray | None, kind: str, n: int) -> list[bytes | None]:
    """(n, H) -> n binary arrays of H values (None: the column is absent for these forecasts)."""
    if array is None:
        return [None] * n
    whole = np.ascontiguousarray(array, dtype=kind)
    return [row.tobytes() for row in whole]


def sql_times(times: np.ndarray, dialect: str) -> list:
    """datetime64[us] as the driver stores them: on SQLite the very text SQLAlchemy's DateTime
    writes, "YYYY-MM-DD HH:MM:SS.ffffff" (the actuals are written through it, and queries compare
    the two texts). Years 1000-9999 only: the API takes 1677-2262."""
    times = np.ravel(times)
    if dialect != "sqlite":
        return times.tolist()  # datetime objects
    text = np.datetime_as_string(times, unit="us")  # (n,) "YYYY-MM-DDTHH:MM:SS.ffffff", <U26
    characters = text.view(np.uint32).reshape(len(text), text.itemsize // 4)  # UCS-4 codes
    if len(text) and not (characters[:, 10] == ord("T")).all():
        raise ValueError("a timestamp outside the years 1000-9999 (or NaT) cannot be logged")
    characters[:, 10] = ord(" ")  # the "T": numpy's string ops would go value by value
    return text.tolist()


def expand_steps(rows: pd.DataFrame) -> pd.DataFrame:
    """Forecast rows as read from ``forecasts`` -> one row per horizon step: their other columns
    repeated, ``step`` (1..H), ``target_time`` (datetime64[us]) and a float column per step array
    (NaN where a forecast has none: no interval, no whole season)."""
    horizons = rows["horizon"].to_numpy(np.int64)
    steps = rows.drop(columns=list(STEP_ARRAYS)).loc[rows.index.repeat(horizons)].reset_index(drop=True)
    steps["step"] = np.concatenate([np.arange(1, h + 1) for h in horizons]) if len(rows) else []
    steps["level"] = steps["level"].astype(float)  # NaN without an interval, in every chunk alike
    for name, kind in STEP_ARRAYS.items():
        values = step_values(
            rows[name].tolist(), horizons, kind, rows["id"].tolist() if "id" in rows else None
        )
        steps[name] = values.view("datetime64[us]") if name == "target_times" else values
    return steps.rename(columns={"target_times": "target_time"})


def step_values(
    blobs: list[bytes | None], horizons: np.ndarray, kind: str, ids: list[int] | None = None
) -> np.ndarray:
    """One step array's blobs (None: absent) -> their values end to end, NaN for the absent. A
    blob of another length than its forecast's horizon (a row edited by hand, a truncated copy)
    would shift every later step onto the wrong forecast: refused, naming the forecast."""
    width = np.dtype(kind).itemsize
    for k, (blob, horizon) in enumerate(zip(blobs, horizons.tolist(), strict=True)):
        if blob is not None and len(blob) != horizon * width:
            which = f"forecast id {ids[k]}" if ids is not None else f"forecast row {k}"
            raise ValueError(
                f"the forecast log's {which} has a step array of {len(blob)} bytes, not {horizon} values"
            )
    missing = {h for blob, h in zip(blobs, horizons.tolist(), strict=True) if blob is None}
    absent = {h: np.full(h, np.nan, dtype=kind).tobytes() for h in missing}  # float arrays only
    pairs = zip(blobs, horizons.tolist(), strict=True)
    joined = b"".join(absent[h] if blob is None else blob for blob, h in pairs)
    return np.frombuffer(joined, dtype=kind).astype(kind[1:])


def records_frame(rows: Sequence, columns: list[str]) -> pd.DataFrame:
    """Rows as a frame. As plain tuples: handed SQLAlchemy's rows, pandas probes each one for
    named-tuple fields, which took a third of the monitor's time on a large log."""
    return pd.DataFrame([tuple(row) for row in rows], columns=columns)
