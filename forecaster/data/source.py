"""Resolve a DataConfig (bundled name or user file) into a loaded series, or a panel of them."""

from __future__ import annotations

import pandas as pd

from forecaster.config import DataConfig
from forecaster.data.datasets import get_dataset
from forecaster.data.loading import LoadedSeries, load_series
from forecaster.data.panel import LoadedPanel, load_panel
from forecaster.errors import DataError


def source_settings(config: DataConfig) -> dict:
    """What ``config`` reads, the bundled dataset filling what is not given: the loader's
    arguments (and ``id_column``); the header check (forecaster/data/header.py) reads the same."""
    spec = None if config.dataset is None else get_dataset(config.dataset)
    if config.id_column is None and spec is not None and spec.id_column is not None:
        raise DataError(
            f"dataset {spec.name!r} holds several series (long format): set data.id_column: "
            f"{spec.id_column} (--id-column {spec.id_column}) to train one model across them"
        )
    return dict(
        path=config.path or spec.path,
        time_column=config.time_column or (spec.time_column if spec else None),
        target=config.target or (spec.target if spec else None),
        covariates=config.covariates,
        frequency=config.frequency or (spec.frequency if spec else None),
        fill=config.fill or (spec.fill if spec else None),
        duplicates=config.duplicates or (spec.duplicates if spec else None),
        future_covariates=config.future_covariates,
        timezone=config.timezone,
        time_format=config.time_format,
    )


def load_from_config(
    config: DataConfig,
    skip_bad_series: bool = False,
    table: pd.DataFrame | None = None,
    model_frequency: str | None = None,
    model_frequency_given: bool = False,
) -> LoadedSeries | LoadedPanel:
    """Settings given explicitly win over the bundled dataset's; the dataset fills the rest. With
    ``id_column`` the file is long-format: a panel of series (with ``skip_bad_series``, those that
    break a rule are left out, named in its ``skipped``). ``table``: the rows as a DataFrame (the
    Python API's), read by the same rules instead of the file. ``model_frequency``: the trained
    model's the data is for, which it must be at (forecaster.data.loading.check_model_frequency;
    on its grid only where ``model_frequency_given``, set in the model's config)."""
    settings = source_settings(config) | {
        "model_frequency": model_frequency,
        "model_frequency_given": model_frequency_given,
    }
    if config.id_column is None:
        return load_series(**settings, table=table)
    return load_panel(id_column=config.id_column, skip_bad_series=skip_bad_series, **settings, table=table)
