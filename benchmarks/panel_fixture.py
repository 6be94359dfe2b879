"""A long-format panel of N daily series for throughput measurements: each member is a stretch of
a bundled real series (Melbourne's daily minimum temperatures), from a random offset, under a
random affine change (scale and level) and with a little noise.

This is a throughput fixture, not an accuracy benchmark: the members are transformed copies of
one series, so what a model learns across them says nothing about real panels of many sources.
They are real-shaped (seasonality, noise, the odd cold snap) so the network computes what it would
on real data, and distinct enough that no two windows are identical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "data" / "daily-min-temperatures.csv"


def make_panel(series: int, steps: int = 500, seed: int = 0, id_column: str = "station") -> pd.DataFrame:
    """``series`` members of ``steps`` daily values each, one row per member and day:
    ``station, date, temp``, sorted by member then date."""
    source = pd.read_csv(SOURCE, parse_dates=["Date"]).set_index("Date")["Temp"]
    source = source.asfreq("D").interpolate().to_numpy()
    rng = np.random.default_rng(seed)
    offsets = rng.integers(0, len(source) - steps, size=series)
    scales = rng.uniform(0.5, 2.0, size=series)
    levels = rng.uniform(-10.0, 25.0, size=series)
    picks = offsets[:, None] + np.arange(steps)  # (N, steps)
    values = source[picks] * scales[:, None] + levels[:, None] + rng.normal(0, 0.3, size=(series, steps))
    start = pd.Timestamp("2015-01-01")
    dates = pd.date_range(start, periods=steps, freq="D").strftime("%Y-%m-%d")
    width = len(str(series - 1))
    return pd.DataFrame(
        {
            id_column: np.repeat([f"st{k:0{width}d}" for k in range(series)], steps),
            "date": np.tile(dates, series),
            "temp": values.ravel().round(3),
        }
    )


def write_panel(path: Path, series: int, steps: int = 500, seed: int = 0) -> Path:
    """The panel as CSV or Parquet, by ``path``'s extension."""
    frame = make_panel(series, steps, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in {".parquet", ".pq"}:
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)
    return path
