"""`forecast predict`: the next H steps after the end of a series, offline."""

from __future__ import annotations

from typing import Any

import pandas as pd

from forecaster.data.source import load_from_config
from forecaster.errors import DataError
from pipelines.evaluate import data_config_for
from pipelines.registry import load_predictor


def forecast_next(model_uri: str, overrides: dict[str, Any]) -> pd.DataFrame:
    predictor = load_predictor(model_uri)
    data = data_config_for(predictor, overrides)
    series = load_from_config(data)
    frame = series.frame[predictor.features]
    if len(frame) < predictor.lookback:
        raise DataError(f"{series.source}: {len(frame)} rows, the model needs the last {predictor.lookback}")
    recent = frame.iloc[-predictor.lookback :]
    prediction = predictor.predict(recent.to_numpy()[None], recent.index.values[None])
    return pd.DataFrame(
        {
            frame.index.name or "time": prediction.future_times[0],
            f"{series.target}_forecast": prediction.mean[0],
        }
    )
