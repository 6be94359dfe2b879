"""The data a trained model is used on: its own (the dataset or file it was trained on, read on its
training clock) or another table with the same feature columns; and the model scored there,
split as in training: test (only reported), validation, and the selection folds (what decides).

Shared by `forecast evaluate` / `forecast predict` (pipelines/) and the Python API's
``Forecaster.evaluate`` / ``Forecaster.predict`` (forecaster/api.py): one path, the same figures."""

from __future__ import annotations

from typing import Any

import pandas as pd

from forecaster.config import DataConfig, ForecastConfig
from forecaster.data.datamodule import prepare
from forecaster.data.datasets import get_dataset
from forecaster.data.loading import FRAME_SOURCE, LoadedSeries
from forecaster.data.panel import LoadedPanel
from forecaster.data.source import load_from_config
from forecaster.errors import ConfigError
from forecaster.evaluation import Evaluation, evaluate
from forecaster.predictor import Predictor
from forecaster.selection import evaluate_selection

SPLITS = ("test", "val", "selection")


def data_config_for(predictor: Predictor, overrides: dict[str, Any]) -> DataConfig:
    """The model's own data settings, or another dataset/file holding the same feature columns (a
    single series, or a bundled long-format one: a panel model forecasts series it never saw),
    read on the model's training clock (forecaster.data.clock) and with its training data's fill
    and duplicates policies (a bundled dataset's, where its config left them to the dataset)."""
    own = predictor.config.data.model_copy(update={"timezone": predictor.clock})  # its clock
    if set(overrides) <= {"id_column", "time_format"}:  # the model's own data, read so
        if own.dataset is None and own.path == FRAME_SOURCE:
            raise ConfigError(
                "this model was fit on a pandas DataFrame, which it does not keep: give the data "
                "(--data FILE, or a DataFrame to the Python API)"
            )
        return DataConfig.model_validate(own.model_dump() | overrides)
    base = own.model_dump()
    spec = None if own.dataset is None else get_dataset(own.dataset)
    base.update(
        fill=own.fill or (spec.fill if spec else None),
        duplicates=own.duplicates or (spec.duplicates if spec else None),
    )
    base.update(dataset=None, path=None, time_column=None, target=None, id_column=None)
    base["covariates"] = predictor.features[1:]
    if "path" in overrides:
        base["time_column"] = own.time_column or own_columns(predictor)[0]
        base["target"] = own.target or predictor.features[0]
    base.update(overrides)
    if base["dataset"] is not None and base["id_column"] is None:
        base["id_column"] = get_dataset(base["dataset"]).id_column
    if base["path"] is not None and (base["time_column"] is None or base["target"] is None):
        raise ConfigError(f"{base['path']}: give --time-column and --target for this file")
    return DataConfig.model_validate(base)


def own_columns(predictor: Predictor) -> tuple[str, str]:
    """The time and target columns the model was trained on (a bundled dataset's when its config
    left them to the dataset)."""
    data = predictor.config.data
    spec = None if data.dataset is None else get_dataset(data.dataset)
    time_column = data.time_column or (spec.time_column if spec else None)
    assert time_column is not None  # a config without a dataset has both (DataConfig)
    return time_column, data.target or predictor.features[0]


def load_model_data(
    predictor: Predictor, data: DataConfig, skip_bad_series: bool = False, table: pd.DataFrame | None = None
) -> LoadedSeries | LoadedPanel:
    """``data`` (or ``table``, read by its settings) for ``predictor``: at the model's frequency,
    or refused (a panel's series at another left out with ``skip_bad_series``), since a model
    reads its look-back, and forecasts, in steps of the frequency it was trained on."""
    return load_from_config(
        data,
        skip_bad_series,
        table,
        model_frequency=predictor.frequency,
        model_frequency_given=frequency_given(predictor),
    )


def frequency_given(predictor: Predictor) -> bool:
    """Whether the model's frequency was set in its config (data.frequency) rather than inferred
    from its data (a bundled dataset's own frequency is the dataset's, left unset in the config):
    data then only has to lie on its grid, since its own training file may be sparser than it
    (weekdays only for a daily model) and was upsampled by its fill policy."""
    return predictor.config.data.frequency is not None


def config_with_data(predictor: Predictor, data: DataConfig) -> ForecastConfig:
    return predictor.config.model_copy(update={"data": data})


def evaluate_model(
    predictor: Predictor,
    data: DataConfig,
    table: pd.DataFrame | None = None,
    splits: tuple[str, ...] = SPLITS,
    retrieval: bool = False,
) -> tuple[ForecastConfig, list[Evaluation]]:
    """The model on ``data`` (or ``table``, read by its settings), split as in training, every
    window of each split; the selection score over the model's own k folds (a model saved before
    the field existed: the default). ``retrieval``: the test and selection scores with an
    attention model's retrieved term against none, as `forecast train` logs them."""
    config = config_with_data(predictor, data)
    prepared = prepare(load_model_data(predictor, config.data, table=table), config)
    folds = config.split.folds
    return config, [
        evaluate_selection(predictor, prepared, folds, retrieval)
        if split == "selection"
        else evaluate(predictor, prepared, split, retrieval and split == "test")
        for split in splits
    ]
