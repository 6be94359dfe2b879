"""Calendar features (sin/cos of hour, weekday, day of year): known in advance for any future step."""

from __future__ import annotations

import numpy as np
import pandas as pd


def calendar_feature_names(sub_daily: bool) -> list[str]:
    names = ["dow_sin", "dow_cos", "doy_sin", "doy_cos"]
    return (["hour_sin", "hour_cos"] if sub_daily else []) + names


def calendar_features(index: pd.DatetimeIndex, sub_daily: bool) -> np.ndarray:
    """(T, K) cyclical encodings, so Sunday sits next to Monday and 23:00 next to 00:00."""
    cycles = [(index.day_of_week, 7), (index.day_of_year - 1, 365.25)]
    if sub_daily:
        cycles.insert(0, (index.hour + index.minute / 60, 24))
    columns = []
    for value, period in cycles:
        angle = 2 * np.pi * np.asarray(value, dtype=np.float64) / period
        columns += [np.sin(angle), np.cos(angle)]
    return np.stack(columns, axis=1)


def is_sub_daily(freq: str) -> bool:
    try:
        return pd.Timedelta(pd.tseries.frequencies.to_offset(freq)) < pd.Timedelta(days=1)
    except ValueError:
        return False
