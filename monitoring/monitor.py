"""The monitor's document: live forecast quality over the rolling window of resolved steps.

The window is the last ``window`` resolved steps (by target time) of each model version; the
overall figures are the last ``window`` resolved steps of the answered (champion) forecasts,
whatever version made them. Reading it costs the same whatever the size of the log: the steps
were resolved when their actuals (or forecasts) arrived (monitoring/resolution.py), and each
version's newest ``window`` are one index range of ``resolved_steps``; the overall window is
among the union of the champion versions' windows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Connection, String, select, type_coerce

from monitoring.schema import RESOLVED_VALUES, monitored_versions, resolved_steps
from monitoring.scoring import CHAMPION, INSUFFICIENT, Steps, Thresholds, by_step, figures, status_of

COLUMNS = (
    "id", "role", "model_name", "model_version", "model_alias", "series_id", "origin", "step", "target_time",
    "forecast", "lower", "upper", "level", "naive", "seasonal_naive", "scale", "actual",
)  # fmt: skip
VERSION_COLUMNS = ("role", "model_name", "model_version", "model_alias")


def window_steps(connection: Connection, window: int, series_id: str | None = None) -> pd.DataFrame:
    """The newest ``window`` resolved steps of each (role, model name, version), of one series
    when given, newest first (by target time, then forecast id), as COLUMNS."""
    r, v = resolved_steps, monitored_versions
    versions = connection.execute(select(v.c.id, *(v.c[name] for name in VERSION_COLUMNS))).all()
    origin: Any = r.c.origin
    target_time: Any = r.c.target_time
    if connection.dialect.name == "sqlite":  # the stored text: numpy parses it 30x faster than datetimes
        origin, target_time = (
            type_coerce(origin, String).label("origin"),
            type_coerce(target_time, String).label("target_time"),
        )
    read = (r.c.forecast_id.label("id"), r.c.series_id, origin, r.c.step, target_time,
            *(r.c[name] for name in RESOLVED_VALUES))  # fmt: skip
    parts: list[tuple[Sequence, tuple]] = []
    for version_id, *model in versions:
        query = select(*read).where(r.c.version_id == version_id)
        if series_id is not None:
            query = query.where(r.c.series_id == series_id)
        query = query.order_by(r.c.target_time.desc(), r.c.forecast_id.desc()).limit(window)
        rows = connection.execute(query).all()
        if rows:
            parts.append((rows, tuple(model)))
    if not parts:
        return pd.DataFrame(columns=list(COLUMNS))
    rows = [row for found, _ in parts for row in found]
    columns = dict(zip((column.name for column in read), zip(*rows, strict=True), strict=True))
    steps = pd.DataFrame(
        {
            "id": np.array(columns["id"], dtype=np.int64),
            "series_id": np.array(columns["series_id"], dtype=object),
            "origin": as_times(columns["origin"]),
            "step": np.array(columns["step"], dtype=np.int64),
            "target_time": as_times(columns["target_time"]),
            # None (SQLite's NaN, an absent interval) as NaN
            **{name: np.array(columns[name], dtype=float) for name in RESOLVED_VALUES},
        }
    )
    for k, name in enumerate(VERSION_COLUMNS):
        steps[name] = np.repeat(
            np.array([model[k] for _, model in parts], dtype=object), [len(f) for f, _ in parts]
        )
    steps = steps.sort_values(["target_time", "id"], ascending=False, ignore_index=True)
    return steps[list(COLUMNS)]


def as_times(values: tuple) -> np.ndarray:
    """Timestamps as datetime64[us], from SQLite's text or PostgreSQL's datetimes."""
    if values and isinstance(values[0], str):
        return np.array(values, dtype="datetime64[us]")
    return pd.to_datetime(list(values)).to_numpy("datetime64[us]")


def summarise(
    frame: pd.DataFrame, thresholds: Thresholds, serving: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The monitor's document: overall, per model version (champion and challenger) and per
    horizon step, with a status. ``serving`` (name, version) says whose status is the headline;
    without it, the champion version that forecast last."""
    models = []
    steps = Steps.of(frame)
    if not frame.empty:
        keys = frame[["role", "model_name", "model_version", "model_alias"]].drop_duplicates(
            subset=["role", "model_name", "model_version"]
        )
        for role, name, version, alias in keys.itertuples(index=False):
            mine = (
                (frame["role"] == role) & (frame["model_name"] == name) & (frame["model_version"] == version)
            )
            rows = steps.take(mine.to_numpy())
            scored = figures(rows)
            status, reasons = status_of(scored, thresholds)
            models.append(
                {
                    "role": role,
                    "name": name,
                    "version": version,
                    "alias": alias,
                    "status": status,
                    "reasons": reasons,
                    "last_origin": pd.Timestamp(frame["origin"][mine].max()).isoformat(),
                    **scored,
                    "by_step": by_step(rows),
                }
            )
    # the newest `window` steps the champion answered, whatever version (the frame is newest first)
    answered = np.flatnonzero((frame["role"] == CHAMPION).to_numpy())[: thresholds.window]
    champion_rows = steps.take(answered)
    overall = figures(champion_rows)
    headline = pick_headline(models, serving)
    if headline is None:
        status, reasons = INSUFFICIENT, ["no resolved forecast steps of the served model yet"]
    else:
        status, reasons = headline["status"], headline["reasons"]
    return {
        "status": status,
        "reasons": reasons,
        "serving": None if headline is None else {"name": headline["name"], "version": headline["version"]},
        "window": thresholds.window,
        "thresholds": {
            "min_steps": thresholds.min_steps,
            "min_skill": thresholds.min_skill,
            "coverage_tolerance": thresholds.coverage_tolerance,
        },
        "overall": {**overall, "by_step": by_step(champion_rows) if len(champion_rows) else []},
        "models": models,
    }


def pick_headline(models: list[dict[str, Any]], serving: tuple[str, str] | None) -> dict[str, Any] | None:
    champions = [m for m in models if m["role"] == CHAMPION]
    if serving is not None:
        for model in champions:
            if (model["name"], model["version"]) == serving:
                return model
        name, version = serving
        return {
            "name": name,
            "version": version,
            "status": INSUFFICIENT,
            "reasons": [f"no resolved forecast steps of version {version} yet"],
        }
    return max(champions, key=lambda m: m["last_origin"], default=None)


def monitor(
    connection: Connection,
    thresholds: Thresholds,
    serving: tuple[str, str] | None = None,
    series_id: str | None = None,
) -> dict[str, Any]:
    """GET /v1/monitor's document (of one series when ``series_id`` is given)."""
    document = summarise(window_steps(connection, thresholds.window, series_id), thresholds, serving)
    if series_id is not None:
        document["series_id"] = series_id
    return finite(document)


def finite(document: Any) -> Any:
    """NaN (e.g. MASE of a flat series) as null: JSON has no NaN."""
    if isinstance(document, dict):
        return {k: finite(v) for k, v in document.items()}
    if isinstance(document, list):
        return [finite(v) for v in document]
    if isinstance(document, float | np.floating):
        return float(document) if math.isfinite(document) else None
    if isinstance(document, np.integer):
        return int(document)
    return document
