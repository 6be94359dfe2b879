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
