"""A data file's columns from its header alone, checked against the columns a command will read.

A misspelled column must be named before torch, Lightning and MLflow are imported: loading them
takes seconds on an idle machine and about a minute on a busy one, while a CSV header or a Parquet
schema reads in milliseconds. The check is the loader's own (same words), so it only ever says
earlier what loading would say later; this module imports pandas, never torch."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pandas as pd

from forecaster.config import DataConfig
from forecaster.data.datasets import get_dataset
from forecaster.data.loading import check_columns
from forecaster.data.source import source_settings
from forecaster.errors import DataError

PARQUET = {".parquet", ".pq"}  # as the loader reads them (forecaster/data/loading.py)


def header_only(path: Path) -> io.StringIO:
    """The CSV file's first record, read by Python and written back as a one-line CSV for pandas
    to name the columns exactly as loading will (duplicates, empty names). Python reads it, not
    pandas' C parser: a Ctrl-C while the file blocks (a FIFO, a stalled network mount) then stops
    the command at once, where the C parser kept waiting for data."""
    with path.open(newline="", encoding="utf-8-sig") as file:
        first = next(csv.reader(file), None)
    text = io.StringIO()
    if first is not None:
        csv.writer(text).writerow(first)
    text.seek(0)
    return text


def file_columns(path: Path) -> list[str]:
    """The column names of a CSV file's header or a Parquet file's schema (a pandas index stored
    in the schema is listed too: the check may pass a file loading then refuses, never the
    reverse)."""
    if not path.exists():
        raise DataError(f"{path}: file not found")
    try:
        if path.suffix.lower() in PARQUET:
            import pyarrow.parquet as pq

            return [str(name) for name in pq.read_schema(path).names]
        return [str(name) for name in pd.read_csv(header_only(path), nrows=0, dtype=str).columns]
    except Exception as exc:  # pandas and pyarrow raise many types; the user needs the file and why
        raise DataError(f"{path}: cannot be read as a table ({exc})") from None


def check_data_columns(config: DataConfig) -> None:
    """The columns loading ``config`` needs (time, target, covariates, the series id) are in its
    file's header."""
    settings = source_settings(config)
    target = settings["target"]
    past = [c for c in settings["covariates"] if c != target]
    series_id = [config.id_column] if config.id_column is not None else []
    needed = [*series_id, settings["time_column"], target, *past, *settings["future_covariates"]]
    path = Path(settings["path"])
    check_columns(file_columns(path), path, [c for c in needed if c is not None])


def check_given_columns(settings: dict[str, Any]) -> None:
    """For a command whose model decides the rest (evaluate, predict): the columns named on the
    command line (``data_settings``' and ``panel_settings``' keys) are in the file or bundled
    dataset they name. Without a file or dataset there is nothing to read yet."""
    if "path" in settings:
        path = Path(settings["path"])
    elif "dataset" in settings:
        path = get_dataset(settings["dataset"]).path
    else:
        return
    named = [settings.get(key) for key in ("id_column", "time_column", "target")]
    named += settings.get("covariates", [])
    needed = [c for c in named if c is not None]
    if needed:
        check_columns(file_columns(path), path, needed)
