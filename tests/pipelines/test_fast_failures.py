"""A misspelled column or a malformed model URI is named before torch, Lightning and MLflow are
imported (seconds on an idle machine, a minute on a busy one): each failing command runs as a
process whose exit reports which of them it imported; none may be, and the error is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from forecaster.config import DataConfig
from forecaster.data.header import check_data_columns, check_given_columns
from forecaster.errors import ConfigError, DataError
from forecaster.model_uri import SCHEMES, check_model_uri
from tests.conftest import REPO

HEAVY = ("torch", "pytorch_lightning", "mlflow")
# `forecast ARGS...`, then at exit which of HEAVY the process had imported, into $IMPORTED
WRAPPER = f"""
import atexit, json, os, sys
def report():
    with open(os.environ["IMPORTED"], "w") as out:
        json.dump([m for m in {HEAVY!r} if m in sys.modules], out)
atexit.register(report)
from pipelines.cli import main
sys.argv[0] = "forecast"
main()
"""


def forecast_process(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    imported = tmp_path / "imported.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env.update(PYTHONPATH=str(REPO), IMPORTED=str(imported))
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return result, json.loads(imported.read_text())


def assert_early_error(tmp_path, fragment: str, *args: str) -> None:
    result, imported = forecast_process(tmp_path, *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert imported == [], f"imported {imported} before saying: {lines[0]}"


@pytest.fixture
def series_csv(tmp_path) -> str:
    dates = pd.date_range("2020-01-01", periods=60, freq="D")
    frame = pd.DataFrame({"t": dates.strftime("%Y-%m-%d"), "y": range(60), "x": range(60)})
    frame.to_csv(tmp_path / "series.csv", index=False)
    return "series.csv"


@pytest.mark.slow  # starts the CLI as processes: in make test, not make test-fast
@pytest.mark.parametrize(
    ("flags", "missing"),
    [
        (["--time-column", "t", "--target", "nope"], "['nope']"),
        (["--time-column", "time", "--target", "y"], "['time']"),
        (["--time-column", "t", "--target", "y", "--features", "x,z"], "['z']"),
    ],
)
def test_train_names_a_misspelled_column_before_the_heavy_imports(tmp_path, series_csv, flags, missing):
    assert_early_error(
        tmp_path, f"series.csv: column(s) {missing} not found", "train", "--data", series_csv, *flags
    )


@pytest.mark.slow  # starts the CLI as processes: in make test, not make test-fast
def test_backtest_names_a_misspelled_column_of_its_config_before_the_heavy_imports(tmp_path, series_csv):
    (tmp_path / "bad.yaml").write_text(
        f"data: {{path: {series_csv}, time_column: t, target: y, covariates: [xx]}}\n"
    )
    assert_early_error(tmp_path, "column(s) ['xx'] not found", "backtest", "--config", "bad.yaml")


@pytest.mark.slow  # starts the CLI as processes: in make test, not make test-fast
@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_a_malformed_model_uri_is_refused_before_the_heavy_imports(tmp_path, series_csv, command):
    data = ["--data", series_csv]
    for uri, fragment in [
        ("models:/demo-forecaster", "not a model URI"),
        ("model:/demo-forecaster/1", "unknown scheme 'model:'"),
        ("runs:/0123abcd", "runs:/RUN_ID/PATH"),
        ("no-such-model-dir", "no such directory"),
    ]:
        assert_early_error(tmp_path, fragment, command, "--model-uri", uri, *data)


@pytest.mark.slow  # starts the CLI as processes: in make test, not make test-fast
@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_a_misspelled_column_of_a_model_command_is_named_before_the_heavy_imports(
    tmp_path, series_csv, command
):
    args = ["--model-uri", "models:/m/1", "--data", series_csv, "--time-column", "t", "--target", "yy"]
    assert_early_error(tmp_path, "series.csv: column(s) ['yy'] not found", command, *args)


@pytest.mark.parametrize(
    "uri",
    [
        "models:/demo-forecaster@champion",
        "models:/demo-forecaster/3",
        "models:/demo-forecaster/latest",
        "models:/m-0123456789abcdef0123456789abcdef",
        "runs:/0123456789abcdef/model",
        "s3://bucket/models/forecaster",
        "file:///tmp/model",
    ],
)
def test_every_loadable_form_passes_the_model_uri_check(uri):
    check_model_uri(uri)


@pytest.mark.parametrize(
    "uri", ["models:/", "models:/name@", "models:/a/b/c", "runs:/", "runs:/id/", "htp://x"]
)
def test_malformed_model_uris_are_refused(uri):
    with pytest.raises(ConfigError, match="--model-uri"):
        check_model_uri(uri)


def test_a_local_model_directory_passes_the_model_uri_check(tmp_path):
    check_model_uri(str(tmp_path))


def test_the_schemes_are_those_mlflow_reads_models_from():
    from mlflow.store.artifact.artifact_repository_registry import _artifact_repository_registry

    assert set(_artifact_repository_registry._registry) - {""} == SCHEMES


def test_the_header_check_reads_parquet_schemas_and_names_every_missing_column(tmp_path):
    path = tmp_path / "series.parquet"
    pd.DataFrame({"t": pd.date_range("2020-01-01", periods=3), "y": [1.0, 2.0, 3.0]}).to_parquet(path)
    check_data_columns(DataConfig(path=str(path), time_column="t", target="y"))
    config = DataConfig(
        path=str(path), time_column="t", target="y", covariates=["a"], future_covariates=["b"]
    )
    with pytest.raises(DataError, match=r"column\(s\) \['a', 'b'\] not found; available columns: t, y"):
        check_data_columns(config)


def test_the_header_check_fills_a_bundled_datasets_columns_and_checks_the_given_ones():
    check_data_columns(DataConfig(dataset="melbourne-temp"))
    with pytest.raises(DataError, match=r"\['Tmp'\] not found"):
        check_data_columns(DataConfig(dataset="melbourne-temp", target="Tmp"))
    check_given_columns({"dataset": "melbourne-temp", "target": "Temp"})
    with pytest.raises(DataError, match=r"\['Tmp'\] not found"):
        check_given_columns({"dataset": "melbourne-temp", "target": "Tmp"})
    check_given_columns({"target": "anything"})  # no file named: the model's own, read later
