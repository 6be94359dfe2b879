"""Scoring a window of resolved steps with the functions `forecast evaluate` uses
(forecaster.metrics, forecaster.conformal), so the same windows give the same figures live and
offline, and the status each version gets against the thresholds.

Status:
- ``insufficient data``: fewer than ``min_steps`` resolved steps in its window;
- ``degraded``: skill against naive below ``min_skill``, interval coverage further than
  ``coverage_tolerance`` from its nominal level, or a forecast in the window that is not finite;
- ``ok`` otherwise."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forecaster.conformal import coverage
from forecaster.metrics import mae, rmse

OK, DEGRADED, INSUFFICIENT = "ok", "degraded", "insufficient data"
CHAMPION, CHALLENGER = "champion", "challenger"


@dataclass(frozen=True)
class Thresholds:
    window: int = 1000
    min_steps: int = 50
    min_skill: float = 0.0
    coverage_tolerance: float = 0.15

    @classmethod
    def from_settings(cls, settings: Any, window: int | None = None) -> Thresholds:
        return cls(
            window or settings.monitor_window,
            settings.monitor_min_steps,
            settings.monitor_min_skill,
            settings.monitor_coverage_tolerance,
        )


SCORED = ("actual", "forecast", "naive", "seasonal_naive", "scale", "level", "lower", "upper", "step")


class Steps:
    """A window's resolved steps as numpy columns, taken from the frame once: scoring a window
    per version and per horizon step from pandas selections cost the monitor ~25 ms a read, most
    of it pandas' own per-call overhead, on a thread beside the predict path."""

    def __init__(self, columns: dict[str, np.ndarray]) -> None:
        self.columns = columns

    @classmethod
    def of(cls, rows: pd.DataFrame) -> Steps:
        return cls({name: rows[name].to_numpy(float) for name in SCORED if name in rows})

    def __len__(self) -> int:
        return len(self.columns["actual"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def take(self, rows: np.ndarray) -> Steps:
        """The steps at ``rows`` (indices or a boolean mask)."""
        return Steps({name: values[rows] for name, values in self.columns.items()})


def figures(rows: pd.DataFrame | Steps) -> dict[str, Any]:
    """Count, MAE, RMSE, MASE, skill against naive and seasonal naive, interval coverage. MASE
    divides each step's error by its series' scale (the in-sample seasonal-naive MAE of the
    training rows, stored with the model; a window's own for a series it never trained on), as
    `forecast evaluate` does: one series gives the same figure offline and live, and a panel's is
    the mean over series weighted by their resolved steps."""
    steps = rows if isinstance(rows, Steps) else Steps.of(rows)
    if len(steps) == 0:
        return {"count": 0}
    actual, forecast = steps["actual"], steps["forecast"]
    naive_mae = mae(actual, steps["naive"])
    model_mae = mae(actual, forecast)
    out: dict[str, Any] = {
        "count": len(steps),
        "mae": model_mae,
        "rmse": rmse(actual, forecast),
        "mase": scaled_error(actual, forecast, steps["scale"]),
        "naive_mae": naive_mae,
        "skill_naive": skill(model_mae, naive_mae),
    }
    seasonal = steps["seasonal_naive"]
    if not np.isnan(seasonal).any():
        seasonal_mae = mae(actual, seasonal)
        out["seasonal_naive_mae"] = seasonal_mae
        out["skill_seasonal_naive"] = skill(model_mae, seasonal_mae)
    bounded = ~np.isnan(steps["level"])
    if bounded.any():
        covered = coverage(actual[bounded], steps["lower"][bounded], steps["upper"][bounded])
        out["coverage"] = covered["coverage"]
        out["interval_level"] = float(steps["level"][bounded][0])
    return out


def scaled_error(actual: np.ndarray, forecast: np.ndarray, scale: np.ndarray) -> float:
    """MASE over steps whose scales differ (several series): the mean of |error| / scale, which
    is forecaster.metrics.mase where all scales are one series'. Steps of a flat series (scale 0:
    no in-sample error to compare with) are left out rather than make the whole figure NaN."""
    usable = scale > 0
    if not usable.any():
        return float("nan")
    return float(np.mean(np.abs(actual[usable] - forecast[usable]) / scale[usable]))


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


def by_step(rows: pd.DataFrame | Steps) -> list[dict[str, Any]]:
    steps = rows if isinstance(rows, Steps) else Steps.of(rows)
    numbers = steps["step"]
    return [{"step": int(step), **figures(steps.take(numbers == step))} for step in np.unique(numbers)]
