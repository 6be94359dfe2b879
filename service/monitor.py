"""Live forecast quality from the forecast log: logged forecast steps joined to the actuals that
resolve them, scored over a rolling window with the functions `forecast evaluate` uses
(forecaster.metrics, forecaster.conformal), so the same windows give the same figures live and
offline.

The window is the last ``window`` resolved steps (by target time) of each model version; the
overall figures are the last ``window`` resolved steps of the answered (champion) forecasts,
whatever version made them. MASE divides by each window's own in-sample seasonal-naive MAE (the
service has the window, not the training series), averaged over the scored steps.

Status, per model version and for the one being served:
- ``insufficient data``: fewer than ``min_steps`` resolved steps in its window;
- ``degraded``: skill against naive below ``min_skill``, interval coverage further than
  ``coverage_tolerance`` from its nominal level, or a forecast in the window that is not finite;
- ``ok`` otherwise."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select

from forecaster.conformal import coverage
from forecaster.metrics import mae, mase, rmse
from service.forecast_log import actuals, create_tables, expand_steps, forecasts

OK, DEGRADED, INSUFFICIENT = "ok", "degraded", "insufficient data"
CHAMPION, CHALLENGER = "champion", "challenger"


@dataclass(frozen=True)
class Thresholds:
    window: int = 1000
    min_steps: int = 50
    min_skill: float = 0.0
    coverage_tolerance: float = 0.15

    @classmethod
    def from_settings(cls, settings: Any) -> Thresholds:
        return cls(
            settings.monitor_window,
            settings.monitor_min_steps,
            settings.monitor_min_skill,
            settings.monitor_coverage_tolerance,
        )


COLUMNS = (
    "id", "role", "model_name", "model_version", "model_alias", "series_id", "origin", "step", "target_time",
    "forecast", "lower", "upper", "level", "naive", "seasonal_naive", "scale", "actual",
)  # fmt: skip


def resolved_steps(engine: Engine, window: int, chunk: int = 5_000) -> pd.DataFrame:
    """The last ``window`` resolved steps (by target time) of each (role, model name, version),
    newest first, with the actual beside each forecast.

    The database narrows both sides by span, per series: the actuals from the first forecast
    origin to the last forecast target of their series, the forecasts that overlap the span of
    their series' actuals (a hash join on the series with a per-series summary, linear in the rows:
    a correlated "is there an actual in this forecast's span" made PostgreSQL compare every
    forecast of a series with every actual of it). The steps are then expanded and matched to the
    actuals by (series, time) here, in numpy, ``chunk`` forecasts at a time, keeping the newest
    ``window`` of each version: what is held is those actuals, one chunk and the kept steps. On
    100,000 logged forecasts of 24 steps, all resolved, this took 3.9 s where the earlier
    layout's SQL join and window function took 12.7 s (SQLite, this 2-core machine)."""
    create_tables(engine)
    f, a = forecasts, actuals
    forecast_spans = (
        select(f.c.series_id, func.min(f.c.origin).label("first"), func.max(f.c.last_target).label("last"))
        .group_by(f.c.series_id)
        .subquery()
    )
    actual_spans = (
        select(a.c.series_id, func.min(a.c.time).label("first"), func.max(a.c.time).label("last"))
        .group_by(a.c.series_id)
        .subquery()
    )
    known = (
        select(a.c.series_id, a.c.time, a.c.value)
        .join(forecast_spans, forecast_spans.c.series_id == a.c.series_id)
        .where(a.c.time > forecast_spans.c.first, a.c.time <= forecast_spans.c.last)
    )
    overlapping = (
        select(*(column for column in f.columns if column.name != "logged_at"))
        .join(actual_spans, actual_spans.c.series_id == f.c.series_id)
        .where(f.c.last_target >= actual_spans.c.first, f.c.origin < actual_spans.c.last)
    )
    empty = pd.DataFrame(columns=list(COLUMNS))
    with engine.connect() as connection:
        values = records(connection.execute(known).all(), ["series_id", "target_time", "actual"])
        if values.empty:
            return empty
        values["target_time"] = values["target_time"].to_numpy(dtype="datetime64[us]")
        logged = connection.execution_options(yield_per=chunk).execute(overlapping)
        newest: pd.DataFrame | None = None
        for rows in logged.partitions():
            frame = records(rows, list(logged.keys()))
            steps = expand_steps(frame).merge(values, on=["series_id", "target_time"])[list(COLUMNS)]
            newest = newest_of_each_version(steps if newest is None else pd.concat([newest, steps]), window)
    return empty if newest is None else newest


def records(rows: list, columns: list[str]) -> pd.DataFrame:
    """Rows as a frame. As plain tuples: handed SQLAlchemy's rows, pandas probes each one for
    named-tuple fields, which took a third of the monitor's time on a large log."""
    return pd.DataFrame([tuple(row) for row in rows], columns=columns)


def newest_of_each_version(steps: pd.DataFrame, window: int) -> pd.DataFrame:
    """The newest ``window`` steps (by target time, then forecast id) of each role, name and
    version, newest first."""
    steps = steps.sort_values(["target_time", "id"], ascending=False, ignore_index=True)
    recency = steps.groupby(["role", "model_name", "model_version"], sort=False).cumcount()
    return steps[recency < window].reset_index(drop=True)


def figures(rows: pd.DataFrame) -> dict[str, Any]:
    """Count, MAE, RMSE, MASE, skill against naive and seasonal naive, interval coverage."""
    if rows.empty:
        return {"count": 0}
    actual = rows["actual"].to_numpy(float)
    forecast = rows["forecast"].to_numpy(float)
    naive_mae = mae(actual, rows["naive"].to_numpy(float))
    model_mae = mae(actual, forecast)
    out: dict[str, Any] = {
        "count": len(rows),
        "mae": model_mae,
        "rmse": rmse(actual, forecast),
        "mase": mase(actual, forecast, float(rows["scale"].to_numpy(float).mean())),
        "naive_mae": naive_mae,
        "skill_naive": skill(model_mae, naive_mae),
    }
    seasonal = rows["seasonal_naive"]
    if seasonal.notna().all():
        seasonal_mae = mae(actual, seasonal.to_numpy(float))
        out["seasonal_naive_mae"] = seasonal_mae
        out["skill_seasonal_naive"] = skill(model_mae, seasonal_mae)
    bounded = rows[rows["level"].notna()]
    if not bounded.empty:
        covered = coverage(
            bounded["actual"].to_numpy(float),
            bounded["lower"].to_numpy(float),
            bounded["upper"].to_numpy(float),
        )
        out["coverage"] = covered["coverage"]
        out["interval_level"] = float(bounded["level"].iloc[0])
    return out


def skill(model_mae: float, baseline_mae: float) -> float | None:
    """1 - model/baseline, as forecaster.evaluation.Evaluation.skill: > 0 beats the baseline."""
    return 1.0 - model_mae / baseline_mae if baseline_mae > 0 else None


def status_of(scored: dict[str, Any], thresholds: Thresholds) -> tuple[str, list[str]]:
    count = scored["count"]
    if count < thresholds.min_steps:
        return INSUFFICIENT, [f"{count} resolved steps, fewer than the {thresholds.min_steps} needed"]
    reasons = []
    if not math.isfinite(scored["mae"]):  # NaN compares false with every threshold: say it
        reasons.append(f"the model's forecasts are not all finite over the last {count} resolved steps")
    if scored["skill_naive"] is not None and scored["skill_naive"] < thresholds.min_skill:
        reasons.append(
            f"skill against naive {scored['skill_naive']:.3f} is below {thresholds.min_skill:g} "
            f"over the last {count} resolved steps"
        )
    if "coverage" in scored:
        off = scored["coverage"] - scored["interval_level"]
        if abs(off) > thresholds.coverage_tolerance:
            reasons.append(
                f"{scored['interval_level']:.0%} interval coverage is {scored['coverage']:.1%}, off by more "
                f"than {thresholds.coverage_tolerance:.0%}"
            )
    return (DEGRADED, reasons) if reasons else (OK, [])


def by_step(rows: pd.DataFrame) -> list[dict[str, Any]]:
    return [{"step": int(step), **figures(group)} for step, group in rows.groupby("step", sort=True)]


def summarise(
    frame: pd.DataFrame, thresholds: Thresholds, serving: tuple[str, str] | None = None
) -> dict[str, Any]:
    """The monitor's document: overall, per model version (champion and challenger) and per
    horizon step, with a status. ``serving`` (name, version) says whose status is the headline;
    without it, the champion version that forecast last."""
    models = []
    if not frame.empty:
        keys = frame[["role", "model_name", "model_version", "model_alias"]].drop_duplicates()
        for role, name, version, alias in keys.itertuples(index=False):
            rows = frame[
                (frame["role"] == role) & (frame["model_name"] == name) & (frame["model_version"] == version)
            ]
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
                    "last_origin": rows["origin"].max().isoformat(),
                    **scored,
                    "by_step": by_step(rows),
                }
            )
    champion_rows = frame[frame["role"] == CHAMPION].head(thresholds.window) if not frame.empty else frame
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
        "overall": {**overall, "by_step": by_step(champion_rows) if not champion_rows.empty else []},
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


def monitor(engine: Engine, thresholds: Thresholds, serving: tuple[str, str] | None = None) -> dict[str, Any]:
    return finite(summarise(resolved_steps(engine, thresholds.window), thresholds, serving))


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


GAUGES = ("count", "mae", "rmse", "mase", "skill_naive", "skill_seasonal_naive", "coverage")


class MonitorCollector(Collector):
    """The last computed monitor figures as Prometheus gauges (computed off the scrape, by the
    service's monitor task or GET /v1/monitor): ``forecast_monitor_mae{role,model,version,step}``
    (step ``all`` for the whole window) and ``forecast_monitor_status{...,status}`` = 1."""

    def __init__(self) -> None:
        self.document: dict[str, Any] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        document = self.document
        if document is None:
            return
        labels = ["role", "model", "version", "step"]
        families = {
            name: GaugeMetricFamily(
                f"forecast_monitor_{name}", f"Live {name} over the rolling window", labels=labels
            )
            for name in GAUGES
        }
        status = GaugeMetricFamily(
            "forecast_monitor_status",
            "1 for the status of each model version (ok, degraded, insufficient data)",
            labels=["role", "model", "version", "status"],
        )
        for model in document["models"]:
            key = [model["role"], model["name"], model["version"]]
            status.add_metric([*key, model["status"]], 1.0)
            for scored, step in [(model, "all"), *((s, str(s["step"])) for s in model["by_step"])]:
                for name, family in families.items():
                    if scored.get(name) is not None:
                        family.add_metric([*key, step], float(scored[name]))
        yield from families.values()
        yield status
