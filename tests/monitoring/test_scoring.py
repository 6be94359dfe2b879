"""The status a window of resolved steps gets."""

from __future__ import annotations

import numpy as np
import pandas as pd

from monitoring.scoring import Thresholds, figures, status_of


def test_a_model_that_forecast_nan_is_degraded_not_ok():
    """NaN is below no threshold: without its own rule, a model answering NaN would look ok."""
    rows = pd.DataFrame(
        {
            "actual": np.ones(60), "forecast": np.r_[np.ones(59), np.nan], "naive": np.zeros(60),
            "seasonal_naive": np.zeros(60), "scale": np.ones(60), "level": np.full(60, np.nan),
        }
    )  # fmt: skip
    status, reasons = status_of(figures(rows), Thresholds(min_steps=50))
    assert status == "degraded"
    assert "not all finite over the last 60 resolved steps" in reasons[0]


def test_mase_scales_each_step_by_its_series_and_leaves_flat_series_out():
    """Two series, scales 1 and 4: MASE is the mean of |error| / scale (forecast evaluate's figure
    for one series); a flat series (scale 0) is left out instead of making the gauge NaN."""
    rows = pd.DataFrame(
        {
            "actual": np.zeros(6), "forecast": np.r_[np.full(2, 2.0), np.full(2, 4.0), np.full(2, 9.0)],
            "naive": np.ones(6), "seasonal_naive": np.ones(6), "scale": np.r_[np.ones(2), np.full(2, 4.0), np.zeros(2)],
            "level": np.full(6, np.nan),
        }
    )  # fmt: skip
    assert figures(rows)["mase"] == 1.5  # (2/1 + 2/1 + 4/4 + 4/4) / 4
    assert np.isnan(figures(rows.assign(scale=0.0))["mase"])
