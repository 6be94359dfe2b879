"""The datasets bundled in ``data/``, by name, with what is needed to load them correctly."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_TREE_DATA = Path(__file__).resolve().parents[2] / "data"


def data_dir() -> Path:
    """$FORECASTER_DATA_DIR, else data/ of the source tree (editable installs), else ./data."""
    configured = os.environ.get("FORECASTER_DATA_DIR")
    if configured:
        return Path(configured)
    return SOURCE_TREE_DATA if SOURCE_TREE_DATA.is_dir() else Path.cwd() / "data"


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    file: str
    time_column: str
    target: str
    frequency: str
    description: str
    covariates: tuple[str, ...] = ()
    fill: str | None = None  # policy for gaps/NaNs, only where the file is known to need one
    duplicates: str | None = None  # policy for duplicated timestamps, likewise
    notes: tuple[str, ...] = field(default_factory=tuple)
    id_column: str | None = None  # long format: several series, one per id

    @property
    def path(self) -> Path:
        return data_dir() / self.file


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in [
        DatasetSpec(
            name="etth1",
            file="ETTh1.csv",
            time_column="date",
            target="OT",
            frequency="h",
            covariates=("HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL"),
            description="Electricity transformer oil temperature (degC), hourly, 2016-07..2018-06",
        ),
        DatasetSpec(
            name="melbourne-temp",
            file="daily-min-temperatures.csv",
            time_column="Date",
            target="Temp",
            frequency="D",
            fill="interpolate",
            description="Melbourne daily minimum temperature (degC), 1981-1990",
            notes=("1984-12-31 and 1988-12-31 are missing; filled by interpolation",),
        ),
        DatasetSpec(
            name="seattle-weather",
            file="seattle-weather.csv",
            time_column="date",
            target="temp_max",
            frequency="D",
            covariates=("precipitation", "temp_min", "wind"),
            description="Seattle daily maximum temperature (degC), NOAA, 2012-2015",
        ),
        DatasetSpec(
            name="sea-temp",
            file="sea-surface-temperature.csv",
            time_column="time (UTC)",
            target="temperature (celsius)",
            frequency="30min",
            fill="interpolate",
            duplicates="mean",
            description="Sea surface temperature (degC), NERACOOS buoy B01, every 30 min, 2016-2017",
            notes=(
                "2017-03-21T16:30Z is duplicated; averaged",
                "24 missing half-hours (2016-06-14T13:30Z, 2016-07-08T02:00Z..13:00Z); interpolated",
            ),
        ),
        DatasetSpec(
            name="ibm",
            file="IBM.csv",
            time_column="Date",
            target="Close",
            frequency="B",
            covariates=("Open", "High", "Low", "Volume"),
            description="IBM daily close (USD, unadjusted), trading days, 2000-2013",
            notes=("123 weekdays without a row are NYSE market closures, not gaps",),
        ),
        DatasetSpec(
            name="stocks",
            file="stocks.csv",
            time_column="Date",
            target="Adj Close",
            frequency="B",
            covariates=("Open", "High", "Low", "Close", "Volume"),
            id_column="Ticker",
            description="AAPL, GOOG, IBM daily adjusted close (USD), long format by Ticker, 2000-2013",
            notes=(
                "GOOG starts 2004-08-19; unadjusted prices jump at AAPL's 2000 and 2005 splits, "
                "Adj Close does not",
            ),
        ),
    ]
}


def get_dataset(name: str) -> DatasetSpec:
    from forecaster.errors import DataError

    try:
        return DATASETS[name]
    except KeyError:
        known = ", ".join(sorted(DATASETS))
        raise DataError(f"unknown dataset {name!r}; bundled datasets are: {known}") from None
