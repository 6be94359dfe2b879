"""`forecast train`, `evaluate`, `backtest` and `datasets`: models made and scored. `train` builds
its config from the options (forecaster/options.py, as the Python API's ``Forecaster``) and runs
pipelines/train.py's stages."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from forecaster.options import data_settings, merge, model_settings, read_yaml, window_settings
from pipelines.commands.common import (
    AllowWorseThanNaive,
    Quiet,
    TrackingUri,
    comma_list,
    print_json,
    split_settings,
    user_errors,
)
from pipelines.commands.reports import report_training
from pipelines.config import COMMAND_DEFAULTS as DEFAULTS


@user_errors
def train(
    config: Annotated[str | None, typer.Option("--config", "-c", help="YAML config file")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="KEY=VALUE, e.g. model.hidden_size=128")
    ] = None,
    data: Annotated[str | None, typer.Option(help="bundled dataset name or CSV/Parquet path")] = None,
    time_column: Annotated[str | None, typer.Option()] = None,
    target: Annotated[str | None, typer.Option()] = None,
    features: Annotated[str | None, typer.Option(help="past covariate columns, comma-separated")] = None,
    future_covariates: Annotated[
        str | None,
        typer.Option(help="columns known in advance (e.g. holiday,temp_forecast), comma-separated"),
    ] = None,
    id_column: Annotated[
        str | None, typer.Option(help="long format: the series-id column; one model across all series")
    ] = None,
    model: Annotated[str | None, typer.Option(help="rnn, lstm, gru or seq2seq")] = None,
    cell: Annotated[str | None, typer.Option(help="seq2seq cell: rnn, lstm, gru")] = None,
    bidirectional: Annotated[bool | None, typer.Option("--bidirectional/--unidirectional")] = None,
    attention: Annotated[
        str | None,
        typer.Option(help="seq2seq attention (with --model seq2seq): bahdanau, its default, or none"),
    ] = None,
    decoder: Annotated[
        str | None,
        typer.Option(
            help="seq2seq decoder: autoregressive (the config's default: step by step, feeding back its "
            "own prediction) or direct (all H steps in one call; faster at long horizons, segments "
            "with --set model.segment_length=W)"
        ),
    ] = None,
    lookback: Annotated[int | None, typer.Option()] = None,
    horizon: Annotated[int | None, typer.Option()] = None,
    split: Annotated[str | None, typer.Option(help="train,val,test fractions")] = None,
    epochs: Annotated[int | None, typer.Option()] = None,
    experiment: Annotated[str | None, typer.Option()] = None,
    register: Annotated[str | None, typer.Option(help="register the model under this name")] = None,
    allow_worse_than_naive: AllowWorseThanNaive = False,
    devices: Annotated[str | None, typer.Option(help="Lightning devices, e.g. 2 or auto")] = None,
    num_nodes: Annotated[int | None, typer.Option()] = None,
    strategy: Annotated[str | None, typer.Option(help="Lightning strategy, e.g. ddp")] = None,
    accelerator: Annotated[str | None, typer.Option(help="cpu, gpu or auto")] = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", help="continue this killed run from its last checkpoint"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="end with one JSON line")] = False,
    quiet: Quiet = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Train one model, evaluate it against the baselines, log it to MLflow, optionally register."""
    from forecaster.config import check_model_choice
    from forecaster.data.header import check_data_columns
    from forecaster.errors import ConfigError
    from pipelines.config import apply_override, validate

    if resume is not None:
        options = locals()  # (a comprehension's locals() would be its own)
        given = {name for name in TRAIN_SETTINGS if options[name] is not None}
        if given:
            named = ", ".join(f"--{n.replace('_', '-')}" for n in sorted(given))
            raise ConfigError(f"--resume continues the run with the config it was started with; drop {named}")
        train_resumed(resume, tracking_uri, quiet, as_json, allow_worse_than_naive)
        return
    settings = read_yaml(config) if config else {}
    columns = (time_column, target, comma_list(features), comma_list(future_covariates), id_column)
    merge(settings, "data", data_settings(data, *columns))
    check_model_choice(model, f"--model {model}")
    merge(settings, "model", model_settings(model, cell, bidirectional, attention, decoder))
    merge(settings, "split", split_settings(split))
    merge(settings, "window", window_settings(lookback, horizon))
    hardware = {"epochs": epochs, "num_nodes": num_nodes, "strategy": strategy, "accelerator": accelerator}
    if devices is not None:
        hardware["devices"] = int(devices) if devices.isdigit() else devices
    if as_json:
        hardware["progress_bar"] = False
    merge(settings, "train", {k: v for k, v in hardware.items() if v is not None})
    tracking: dict[str, Any] = {"experiment": experiment, "registered_model": register}
    tracking["allow_worse_than_naive"] = allow_worse_than_naive
    merge(settings, "tracking", {k: v for k, v in tracking.items() if v})
    for assignment in overrides or []:
        apply_override(settings, assignment)
    if "data" not in settings and config:
        raise ConfigError(f"{config} has no data section: give data.path there, or --data DATASET_OR_PATH")
    if "data" not in settings:
        raise ConfigError("give --config FILE or --data DATASET_OR_PATH (see `forecast train --help`)")
    run_config = validate(settings, source=config or "settings")
    check_data_columns(run_config.data)  # a misspelled column in a second, not a minute
    # the heavy imports (torch, Lightning, MLflow) only once the settings are known to be good
    from pipelines.tracking import resolve_tracking_uri
    from pipelines.train import run_training

    outcome = run_training(run_config, resolve_tracking_uri(tracking_uri), quiet=quiet)
    report_training(outcome, run_config.tracking.alias, as_json)


# train's options that make up a config: --resume takes the run's own, so none of these with it
TRAIN_SETTINGS = {
    "config", "overrides", "data", "time_column", "target", "features", "future_covariates",
    "id_column", "model", "cell", "decoder",
    "bidirectional", "attention", "lookback", "horizon", "split", "epochs", "experiment",
    "register", "devices", "num_nodes", "strategy", "accelerator",
}  # fmt: skip


def train_resumed(
    run_id: str, tracking_uri: str | None, quiet: bool, as_json: bool, allow_worse_than_naive: bool
) -> None:
    """`forecast train --resume RUN_ID`: the same run, its logged config, its last checkpoint
    (--allow-worse-than-naive still applies: it is about the alias, not the model)."""
    from pipelines.resume import run_config_of
    from pipelines.tracking import connect, resolve_tracking_uri
    from pipelines.train import run_training

    uri = connect(resolve_tracking_uri(tracking_uri))
    run_config = run_config_of(run_id, uri)
    if as_json:
        run_config.train.progress_bar = False
    if allow_worse_than_naive:
        run_config.tracking.allow_worse_than_naive = True
    outcome = run_training(run_config, uri, quiet=quiet, resume=run_id)
    report_training(outcome, run_config.tracking.alias, as_json)


@user_errors
def evaluate(
    model_uri: Annotated[str, typer.Option(help="runs:/..., models:/NAME@ALIAS, models:/NAME/VERSION")],
    data: Annotated[str | None, typer.Option(help="dataset name or file (default: the model's own)")] = None,
    time_column: Annotated[str | None, typer.Option()] = None,
    target: Annotated[str | None, typer.Option()] = None,
    id_column: Annotated[str | None, typer.Option(help="long format: the series-id column")] = None,
    time_format: Annotated[
        str | None,
        typer.Option(
            help="the time column's date format, e.g. '%d/%m/%Y' (default: the model's, or the file's)"
        ),
    ] = None,
    experiment: Annotated[str, typer.Option()] = DEFAULTS.evaluation_experiment,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Score a logged or registered model on a dataset's test split against the baselines.
    --json: the document `{run_id, dataset, windows, metrics: {forecaster: {metric: value}},
    model_version, model_run_id, resolved}` alone on stdout."""
    from forecaster.data.header import check_given_columns
    from forecaster.model_uri import check_model_uri

    check_model_uri(model_uri)  # before MLflow and torch are imported: seconds, not a minute
    overrides = data_settings(data, time_column, target, id_column=id_column, time_format=time_format)
    check_given_columns(overrides)
    from pipelines.console import console, metrics_table
    from pipelines.evaluate import run_evaluation
    from pipelines.tracking import connect, reads_the_store, resolve_tracking_uri

    uri = connect(resolve_tracking_uri(tracking_uri), existing=reads_the_store(model_uri))
    result = run_evaluation(model_uri, overrides, experiment, uri)
    if result["resolved"]:
        console.print(result["resolved"], markup=False)  # models:/NAME@ALIAS -> version 3 (run abc12345)
    metrics_table(
        f"{model_uri} on {result['dataset']}: test split, {result['windows']} windows", result["metrics"]
    )
    if as_json:
        print_json(result)


@user_errors
def backtest(
    config: Annotated[str, typer.Option("--config", "-c")],
    folds: Annotated[int, typer.Option(min=2, help="rolling origins")] = DEFAULTS.backtest_folds,
    overrides: Annotated[list[str] | None, typer.Option("--set")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    quiet: Quiet = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Rolling-origin evaluation: K folds, each a nested MLflow run, with the spread of errors.
    --json: the document `{run_id, folds: [{forecaster: {metric: value}}, ...], summary:
    {forecaster: {mean, std}} (of test MAE), skill_vs_naive: [per fold]}` alone on stdout."""
    from forecaster.data.header import check_data_columns
    from pipelines.config import load_run_config

    run_config = load_run_config(config, overrides)
    check_data_columns(run_config.data)
    from pipelines.backtest import run_backtest
    from pipelines.tracking import connect, resolve_tracking_uri

    result = run_backtest(run_config, folds, connect(resolve_tracking_uri(tracking_uri)), quiet=quiet)
    if as_json:
        print_json(result)


@user_errors
def datasets() -> None:
    """List the bundled datasets."""
    from forecaster.data.datasets import DATASETS
    from pipelines.console import table

    rows = [
        [s.name, s.file, s.target, s.frequency, ", ".join(s.covariates) or "-", s.description]
        for s in DATASETS.values()
    ]
    table("bundled datasets (data/)", ["name", "file", "target", "freq", "covariates", "description"], rows)
