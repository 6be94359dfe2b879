"""Every user mistake ends in one clear line and a non-zero exit; a failed run registers nothing."""

from __future__ import annotations

import mlflow
import pytest

import pipelines.train
from tests.conftest import REPO, free_port
from tests.pipelines.helpers import forecast, tiny_settings


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.exit_code != 0
    message = result.stderr.strip()
    assert message.startswith("error: "), result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--data", "nowhere.csv", "--time-column", "t", "--target", "y"], ["nowhere.csv: file not found"]),
        (
            ["--data", "melbourne", "--time-column", "t", "--target", "y"],
            ["neither a bundled dataset", "melbourne-temp"],
        ),
        (["--set", "data.dataset=melbourne"], ["unknown dataset 'melbourne'", "melbourne-temp"]),
        (
            ["--data", "melbourne-temp", "--target", "Tmax"],
            ["['Tmax'] not found", "available columns: Date, Temp"],
        ),
        (
            ["--data", "melbourne-temp", "--lookback", "3000", "--horizon", "7"],
            ["lookback 3000 + horizon 7", "train split"],
        ),
        (["--data", "melbourne-temp", "--set", "model.cell=tcn"], ["model.cell"]),
        (["--data", "melbourne-temp", "--set", "model.hidden=3"], ["model.hidden: unknown key"]),
        (["--data", "melbourne-temp", "--split", "0.7,0.3"], ["--split", "three fractions"]),
        ([], ["give --config FILE or --data"]),
        (["--data", "melbourne-temp", "--devices", "two"], ["train.devices", "'two'", "a count"]),
        (["--data", "melbourne-temp", "--devices", "0"], ["train.devices", "0: give a count"]),
        (
            ["--data", "melbourne-temp", "--accelerator", "cpu", "--devices", "0,1"],
            ["train.devices='0,1'", "CPUAccelerator"],
        ),
        (["--data", "melbourne-temp", "--accelerator", "gpux"], ["train.accelerator='gpux'", "cuda"]),
        (
            ["--data", "melbourne-temp", "--attention", "bahdanau"],
            ["model.attention (--attention) 'bahdanau'", "only seq2seq", "--model seq2seq"],
        ),
        (
            ["--data", "melbourne-temp", "--model", "gru", "--set", "model.attention=bahdanau"],
            ["model.attention", "--model seq2seq"],
        ),
        (
            ["--data", "melbourne-temp", "--model", "transformer"],
            ["--model transformer: not a model", "rnn, lstm, gru", "or seq2seq"],
        ),
    ],
    ids=[
        "missing-file",
        "unknown-name-as-file",
        "unknown-dataset",
        "target",
        "too-long",
        "bad-choice",
        "unknown-key",
        "bad-split",
        "nothing",
        "devices-word",
        "devices-zero",
        "gpu-indices-on-cpu",
        "accelerator",
        "attention-without-seq2seq",
        "attention-set-on-a-cell",
        "unknown-model",
    ],
)
def test_bad_train_input(args, fragments, tracking_uri):
    assert_one_line_error(forecast("train", *args, "--tracking-uri", tracking_uri), *fragments)


def test_bad_rows_are_named(tmp_path, tracking_uri):
    csv = tmp_path / "bad.csv"
    csv.write_text("t,y\n2024-01-01,1\n2024-01-02,oops\n2024-01-03,3\n")
    result = forecast(
        "train", "--data", csv, "--time-column", "t", "--target", "y", "--tracking-uri", tracking_uri
    )
    assert_one_line_error(result, "bad.csv", "column 'y'", "row 2", "'oops' is not a number")


def test_unreachable_tracking_server(tracking_uri):
    uri = f"http://127.0.0.1:{free_port()}"
    result = forecast("train", *tiny_settings(), "--tracking-uri", uri)
    assert_one_line_error(result, f"cannot reach the MLflow tracking server at {uri}")


def test_invalid_config_file(tmp_path, tracking_uri):
    config = tmp_path / "c.yaml"
    config.write_text("data: {dataset: melbourne-temp}\ntrain: {epochs: -1}\n")
    assert_one_line_error(
        forecast("train", "--config", config, "--tracking-uri", tracking_uri),
        "train.epochs",
        "greater than or equal to 1",
    )


def test_a_failed_run_is_marked_failed_and_registers_nothing(tracking_uri, monkeypatch):
    def broken_model_logging(*args, **kwargs):
        raise OSError("artifact store full")

    monkeypatch.setattr(pipelines.train, "log_pyfunc_model", broken_model_logging)
    with pytest.raises(OSError, match="artifact store full"):
        forecast("train", *tiny_settings(), "--register", "never", "--tracking-uri", tracking_uri)
    client = mlflow.MlflowClient(tracking_uri)
    runs = client.search_runs(
        [client.get_experiment_by_name("forecasting").experiment_id], "tags.role = 'model'"
    )
    assert [r.info.status for r in runs] == ["FAILED"]
    assert client.search_registered_models() == []


@pytest.mark.parametrize(
    "command",
    [
        ("compare", "--experiment", "demo"),
        ("runs",),
        ("promote", "--name", "demo", "--version", "1"),
        ("register", "--run-id", "abc", "--name", "demo"),
        (
            "predict",
            "--model-uri",
            "models:/demo@champion",
            "--data",
            str(REPO / "data" / "daily-min-temperatures.csv"),
        ),
        ("evaluate", "--model-uri", "models:/demo/1"),
    ],
)
def test_a_command_that_reads_the_store_refuses_a_missing_one_and_creates_none(tmp_path, command):
    """A mistyped SQLite path: named, not created as an empty store that then has no experiment."""
    missing = tmp_path / "typo" / "mlflw.db"
    for path in (missing, tmp_path / "mlflw.db"):
        result = forecast(*command, "--tracking-uri", f"sqlite:///{path}")
        assert_one_line_error(result, f"the tracking store {path} does not exist")
        assert not path.exists()


def test_promote_names_a_version_that_is_not_a_number(tracking_uri):
    result = forecast("promote", "--name", "demo", "--version", "-1", "--tracking-uri", tracking_uri)
    assert_one_line_error(result, "--version '-1': a version is a whole number")
