"""Where the next forecast reads from: the attention weights of the H steps after the end of a
series, as a table a notebook can plot (``Forecaster.attention``).

What the service returns with ``"return_attention": true`` (H rows of L weights), labelled by time:
a row per forecast step (its timestamp), a column per look-back step (its timestamp), each row
summing to 1. A panel gives one such block per series, the series id the outer row level, and
its columns are the look-back steps counted back from the forecast (L ... 1): the series' own
look-back timestamps differ where their histories end apart. Read
it as docs/models.md ("Reading the attention") says: a peak 24 columns before a row's own hour is
"the same hour yesterday".
"""

from __future__ import annotations

import pandas as pd

from forecaster.data.loading import LoadedSeries
from forecaster.data.panel import LoadedPanel
from forecaster.errors import NO_ATTENTION, ConfigError, DataError
from forecaster.next_steps import forecast_of, too_short
from forecaster.predictor import Predictor

FORECAST_TIME, LOOKBACK_TIME = "forecast time", "look-back time"
STEPS_BACK = "steps back"  # a panel's columns: L for the look-back's first step ... 1 for its last


def next_attention(predictor: Predictor, loaded: LoadedSeries | LoadedPanel) -> pd.DataFrame:
    """(H, L) weights of the forecast after the end of ``loaded`` (a panel: every member long
    enough, stacked under its id); ConfigError for a model without attention."""
    if not predictor.has_attention:
        raise ConfigError(NO_ATTENTION)
    if not isinstance(loaded, LoadedPanel):
        return series_attention(predictor, loaded)
    members = {key: series for key, series in loaded.members.items() if not too_short(predictor, series)}
    if not members:
        raise DataError(
            f"no series of the panel is long enough to forecast ({too_short_reason(loaded, predictor)})"
        )
    steps_back = pd.Index(range(predictor.lookback, 0, -1), name=STEPS_BACK)
    blocks = {
        key: series_attention(predictor, series).set_axis(steps_back, axis=1)
        for key, series in members.items()
    }
    return pd.concat(blocks, names=[loaded.id_column, FORECAST_TIME])


def series_attention(predictor: Predictor, series: LoadedSeries) -> pd.DataFrame:
    prediction = forecast_of(predictor, series, return_attention=True)
    assert prediction.attention is not None and prediction.future_times is not None
    return pd.DataFrame(
        prediction.attention[0],  # (H, L)
        index=pd.DatetimeIndex(prediction.future_times[0], name=FORECAST_TIME),
        columns=pd.DatetimeIndex(series.frame.index[-predictor.lookback :], name=LOOKBACK_TIME),
    )


def too_short_reason(panel: LoadedPanel, predictor: Predictor) -> str:
    return next(reason for series in panel.members.values() if (reason := too_short(predictor, series)))
