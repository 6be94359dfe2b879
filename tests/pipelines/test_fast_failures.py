"""A misspelled column or a malformed model URI is named before torch, Lightning and MLflow are
imported (seconds on an idle machine, a minute on a busy one): the failing commands run in a
process that reports, after each, which of them it had imported; none may be, and each error is
one line."""

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
# `forecast ARGS...` for each command line in argv[1] (JSON), one after another in one process
# (its start paid once, not per command), each one's stderr in stderr-N.txt; then, for each, its
# exit code and which of HEAVY the process had imported by its end, into $IMPORTED. Imports only
# add up: a command that imported one shows it, and so does every report after it.
WRAPPER = f"""
import json, os, sys
from pipelines.cli import main
outcomes = []
for index, args in enumerate(json.loads(sys.argv[1])):
    sys.argv = ["forecast", *args]
    stderr = os.open(f"stderr-{{index}}.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    saved = os.dup(2)
    os.dup2(stderr, 2)
    try:
        main()
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else int(exit.code is not None)
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(stderr)
    outcomes.append({{"code": code, "imported": [m for m in {HEAVY!r} if m in sys.modules]}})
with open(os.environ["IMPORTED"], "w") as out:
    json.dump(outcomes, out)
"""


def assert_early_errors(tmp_path, *cases: tuple[str, list[str]]) -> None:
    """Each case, (fragment, `forecast` arguments), fails with exit code 2 and one line on
    stderr holding ``fragment``, and no command imported any of HEAVY."""
    imported = tmp_path / "imported.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env.update(PYTHONPATH=str(REPO), IMPORTED=str(imported))
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, json.dumps([args for _, args in cases])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    outcomes = json.loads(imported.read_text())
    for index, ((fragment, args), outcome) in enumerate(zip(cases, outcomes, strict=True)):
        stderr = (tmp_path / f"stderr-{index}.txt").read_text()
        assert outcome["code"] == 2, (args, stderr)
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], (args, stderr)
        assert outcome["imported"] == [], (
            f"forecast {' '.join(args)}: imported {outcome['imported']} before saying: {lines[0]}"
        )


@pytest.fixture
def series_csv(tmp_path) -> str:
    dates = pd.date_range("2020-01-01", periods=60, freq="D")
    frame = pd.DataFrame({"t": dates.strftime("%Y-%m-%d"), "y": range(60), "x": range(60)})
    frame.to_csv(tmp_path / "series.csv", index=False)
    return "series.csv"


@pytest.mark.slow  # starts the CLI as a process: in make test, not make test-fast
def test_a_misspelled_column_is_named_before_the_heavy_imports(tmp_path, series_csv):
    """`train` (its flags), `backtest` (its config), `evaluate` and `predict` (their flags)."""
    (tmp_path / "bad.yaml").write_text(
        f"data: {{path: {series_csv}, time_column: t, target: y, covariates: [xx]}}\n"
    )
    train = ["train", "--data", series_csv]
    model = ["--model-uri", "models:/m/1", "--data", series_csv, "--time-column", "t", "--target", "yy"]
    assert_early_errors(
        tmp_path,
        ("series.csv: column(s) ['nope'] not found", [*train, "--time-column", "t", "--target", "nope"]),
        ("series.csv: column(s) ['time'] not found", [*train, "--time-column", "time", "--target", "y"]),
        (
            "series.csv: column(s) ['z'] not found",
            [*train, "--time-column", "t", "--target", "y", "--features", "x,z"],
        ),
        ("column(s) ['xx'] not found", ["backtest", "--config", "bad.yaml"]),
        *[
            ("series.csv: column(s) ['yy'] not found", [command, *model])
            for command in ("evaluate", "predict")
        ],
    )


@pytest.mark.slow  # starts the CLI as a process: in make test, not make test-fast
def test_a_malformed_model_uri_is_refused_before_the_heavy_imports(tmp_path, series_csv):
    assert_early_errors(
        tmp_path,
        *[
            (fragment, [command, "--model-uri", uri, "--data", series_csv])
            for command in ("evaluate", "predict")
            for uri, fragment in [
                ("models:/demo-forecaster", "not a model URI"),
                ("model:/demo-forecaster/1", "unknown scheme 'model:'"),
                ("runs:/0123abcd", "runs:/RUN_ID/PATH"),
                ("no-such-model-dir", "no such directory"),
            ]
        ],
    )


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
