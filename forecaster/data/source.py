"""Resolve a DataConfig (bundled name or user file) into a loaded series."""

from __future__ import annotations

from forecaster.config import DataConfig
from forecaster.data.datasets import get_dataset
from forecaster.data.loading import LoadedSeries, load_series


def load_from_config(config: DataConfig) -> LoadedSeries:
    """Settings given explicitly win over the bundled dataset's; the dataset fills the rest."""
    if config.dataset is None:
        return load_series(
            config.path,
            time_column=config.time_column,
            target=config.target,
            covariates=config.covariates,
            frequency=config.frequency,
            fill=config.fill,
            duplicates=config.duplicates,
        )
    spec = get_dataset(config.dataset)
    return load_series(
        config.path or spec.path,
        time_column=config.time_column or spec.time_column,
        target=config.target or spec.target,
        covariates=config.covariates,
        frequency=config.frequency or spec.frequency,
        fill=config.fill or spec.fill,
        duplicates=config.duplicates or spec.duplicates,
    )
