"""The `forecast` command line: train, evaluate, backtest, predict, compare, register, promote,
datasets, ui, serve. Every user error ends in one line on stderr and a non-zero exit."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from forecaster.model_uri import DEFAULT_MODEL_URI

app = typer.Typer(
    help="Train, track, compare and serve recurrent forecasters (RNN/LSTM/GRU/seq2seq+attention).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

TrackingUri = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)"
    ),
]

Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="no progress lines while it runs")]


def quiet_libraries() -> None:
    """Keep the terminal for what the user asked; libraries' tips and deprecations go away."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    # MLflow sets its own logger's level when imported (after this): "Creating initial MLflow
    # database tables..." on a fresh store is INFO
    os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*LeafSpec.*")
    warnings.filterwarnings("ignore", message=".*dataset source can be interpreted.*")
    for name in ("alembic", "pytorch_lightning", "lightning.pytorch", "lightning_fabric"):
        logging.getLogger(name).setLevel(logging.WARNING)
    for name in ("mlflow", "mlflow.pyfunc", "mlflow.models"):
        logging.getLogger(name).setLevel(logging.ERROR)


# for a Python process the CLI becomes or starts: deprecations and Starlette's own (a UserWarning,
# "starlette.middleware.wsgi is deprecated", raised as `mlflow ui` imports its server) stay out of
# the terminal; PYTHONWARNINGS reaches the server's worker processes too
QUIET_WARNINGS = "ignore::DeprecationWarning,ignore::FutureWarning,ignore:starlette:UserWarning"


def quiet_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` for such a process, with no library warnings or MLflow INFO lines (the user's
    own PYTHONWARNINGS entries come after ours, so they win; a MLFLOW_LOGGING_LEVEL given stays)."""
    given = environ.get("PYTHONWARNINGS")
    warnings_filter = f"{QUIET_WARNINGS},{given}" if given else QUIET_WARNINGS
    return {"MLFLOW_LOGGING_LEVEL": "WARNING", **environ, "PYTHONWARNINGS": warnings_filter}


def user_errors(command):
    """Turn the errors a user can fix into one line on stderr and exit code 2, and Ctrl-C into
    one line and exit 130 (naming the run and how to resume it when a training was stopped).
    With --json, stdout holds the JSON document alone; every other line goes to stderr."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from pipelines.console import human_output_on_stderr
        from pipelines.interrupts import watching_sigint

        with watching_sigint(), human_output_on_stderr(bool(kwargs.get("as_json"))):
            return run_for_user(command, *args, **kwargs)

    return wrapper


def run_for_user(command, *args: Any, **kwargs: Any) -> Any:
    """``command`` with its user errors and interrupts said in one line (see ``user_errors``)."""
    from forecaster.errors import ForecasterError
    from pipelines.console import errors
    from pipelines.interrupts import INTERRUPTED_EXIT, RunInterrupted, resume_line, sigint_received

    quiet_libraries()
    try:
        return command(*args, **kwargs)
    except ForecasterError as exc:
        errors.print(f"error: {exc}", markup=False, soft_wrap=True)  # one line, however long
    except Exception as exc:
        # an MlflowException needs mlflow imported: no import (seconds) just to catch one
        mlflow_errors = sys.modules.get("mlflow.exceptions")
        if mlflow_errors is None or not isinstance(exc, mlflow_errors.MlflowException):
            raise
        errors.print(f"error: MLflow: {exc.message}", markup=False, soft_wrap=True)
    except RunInterrupted as exc:
        errors.print(resume_line(exc, kwargs.get("tracking_uri")), markup=False, soft_wrap=True)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except KeyboardInterrupt:
        errors.print("interrupted", markup=False)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except SystemExit:
        if not sigint_received():
            raise
        errors.print("interrupted", markup=False)  # Lightning's sys.exit(1) after a Ctrl-C in fit
        raise typer.Exit(INTERRUPTED_EXIT) from None
    raise typer.Exit(2)


def print_json(document: object) -> None:
    """A --json document on stdout as strict JSON (pipelines/console.print_json)."""
    from pipelines.console import print_json as print_strict_json

    print_strict_json(document)


def data_settings(
    data: str | None, time_column: str | None, target: str | None, features: str | None
) -> dict[str, Any]:
    from pathlib import Path

    from forecaster.data.datasets import DATASETS
    from forecaster.errors import DataError

    settings: dict[str, Any] = {}
    if data is not None:
        if data not in DATASETS and not Path(data).exists():
            if Path(data).suffix:  # meant as a file: say so before asking for its columns
                raise DataError(f"{data}: file not found")  # as the loader words it
            known = ", ".join(sorted(DATASETS))
            raise DataError(f"{data!r} is neither a bundled dataset ({known}) nor an existing file")
        settings["dataset" if data in DATASETS else "path"] = data
    if time_column is not None:
        settings["time_column"] = time_column
    if target is not None:
        settings["target"] = target
    if features is not None:
        settings["covariates"] = [f.strip() for f in features.split(",") if f.strip()]
    return settings


def panel_settings(id_column: str | None, future_covariates: str | None) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if id_column is not None:
        settings["id_column"] = id_column
    if future_covariates is not None:
        settings["future_covariates"] = [f.strip() for f in future_covariates.split(",") if f.strip()]
    return settings


def model_settings(
    model: str | None,
    cell: str | None,
    bidirectional: bool | None,
    attention: str | None,
    decoder: str | None = None,
):
    settings: dict[str, Any] = {}
    if model == "seq2seq":
        settings["architecture"] = "seq2seq"
    elif model is not None:
        settings.update(architecture="many_to_one", cell=model)
    if cell is not None:
        settings["cell"] = cell
    if bidirectional is not None:
        settings["bidirectional"] = bidirectional
    if attention is not None:
        settings["attention"] = attention
    if decoder is not None:
        settings["decoder"] = decoder
    return settings


SEGMENT_AT_MOST = 24  # a day of hourly data, the segment the ETT benchmarks train with


def default_segment_length(lookback: int, horizon: int) -> int:
    """The longest segment that divides both L and H, is at most a day of hourly steps and leaves the
    encoder at least 4 segments to attend over; 0 (step by step) when only 1 would."""
    fitting = [w for w in range(2, SEGMENT_AT_MOST + 1) if not lookback % w and not horizon % w]
    fitting = [w for w in fitting if lookback // w >= 4]
    return max(fitting, default=0)


def seq2seq_decoder(model: dict[str, Any], lookback: int, horizon: int) -> dict[str, Any]:
    """`--model seq2seq`'s model section: the direct decoder, segmenting when the look-back allows
    (trains in bounded time at any horizon; the step-by-step decoder runs H Python-level steps per
    batch), unless a decoder was asked for (--decoder, the YAML, --set) or a segment length given."""
    if model.get("decoder", "direct") != "direct":
        return model
    return {"decoder": "direct", "segment_length": default_segment_length(lookback, horizon), **model}


def window_of(settings: dict[str, Any]) -> tuple[int, int]:
    """(L, H) as the settings give them, or the config's defaults; (1, 1), which segments nothing,
    for values that are not counts (validation then names the field)."""
    from forecaster.config import WindowConfig

    window = {**WindowConfig().model_dump(), **settings.get("window", {})}
    try:
        return int(window["lookback"]), int(window["horizon"])
    except (TypeError, ValueError):
        return 1, 1


def split_settings(split: str | None) -> dict[str, Any]:
    from forecaster.errors import ConfigError

    if split is None:
        return {}
    try:
        train, val, test = (float(x) for x in split.split(","))
    except ValueError:
        raise ConfigError(f"--split {split!r}: expected three fractions, e.g. 0.7,0.15,0.15") from None
    return {"train": train, "val": val, "test": test}


def merge(data: dict[str, Any], section: str, values: dict[str, Any]) -> None:
    if values:
        data.setdefault(section, {}).update(values)


AllowWorseThanNaive = Annotated[
    bool,
    typer.Option(
        "--allow-worse-than-naive",
        help="give the alias even if the selection MAE is not below the naive forecast's",
    ),
]
Force = Annotated[
    bool,
    typer.Option(
        help="move the alias whatever the figures: even if not better than the holder or than naive "
        "(implies --allow-worse-than-naive)"
    ),
]


@app.command()
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
    model: Annotated[
        str | None,
        typer.Option(help="rnn, lstm, gru or seq2seq (seq2seq: the direct decoder unless --decoder)"),
    ] = None,
    cell: Annotated[str | None, typer.Option(help="seq2seq cell: rnn, lstm, gru")] = None,
    bidirectional: Annotated[bool | None, typer.Option("--bidirectional/--unidirectional")] = None,
    attention: Annotated[str | None, typer.Option(help="seq2seq attention: none or bahdanau")] = None,
    decoder: Annotated[
        str | None,
        typer.Option(
            help="seq2seq decoder: direct (the default of --model seq2seq; segments of a day or less "
            "when L and H allow) or autoregressive (step by step, feeding back its own prediction)"
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
    from forecaster.data.header import check_data_columns
    from forecaster.errors import ConfigError
    from pipelines.config import apply_override, read_yaml, validate

    if resume is not None:
        options = locals()  # (a comprehension's locals() would be its own)
        given = {name for name in TRAIN_SETTINGS if options[name] is not None}
        if given:
            options = ", ".join(f"--{n.replace('_', '-')}" for n in sorted(given))
            raise ConfigError(
                f"--resume continues the run with the config it was started with; drop {options}"
            )
        train_resumed(resume, tracking_uri, quiet, as_json, allow_worse_than_naive)
        return
    settings = read_yaml(config) if config else {}
    merge(settings, "data", data_settings(data, time_column, target, features))
    merge(settings, "data", panel_settings(id_column, future_covariates))
    merge(settings, "model", model_settings(model, cell, bidirectional, attention, decoder))
    if id_column is not None:  # a panel needs window-scaled networks: the default for one
        settings["model"] = {"level_norm": "standard", **settings.get("model", {})}
    merge(settings, "split", split_settings(split))
    merge(
        settings,
        "window",
        {k: v for k, v in {"lookback": lookback, "horizon": horizon}.items() if v is not None},
    )
    train_values = {
        "epochs": epochs,
        "num_nodes": num_nodes,
        "strategy": strategy,
        "accelerator": accelerator,
    }
    if devices is not None:
        train_values["devices"] = int(devices) if devices.isdigit() else devices
    if as_json:
        train_values["progress_bar"] = False
    merge(settings, "train", {k: v for k, v in train_values.items() if v is not None})
    merge(
        settings,
        "tracking",
        {
            k: v
            for k, v in {
                "experiment": experiment,
                "registered_model": register,
                "allow_worse_than_naive": allow_worse_than_naive,
            }.items()
            if v
        },
    )
    for assignment in overrides or []:
        apply_override(settings, assignment)
    if model == "seq2seq" or decoder == "direct":
        settings["model"] = seq2seq_decoder(settings.get("model", {}), *window_of(settings))
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


def report_training(outcome: Any, alias: str, as_json: bool) -> None:
    """What `forecast train` prints once the run is logged (nothing in a DDP worker)."""
    from pipelines.console import console, metrics_table

    if outcome is None:  # a DDP worker: rank zero reports
        return
    metrics_table(
        f"{outcome.run_name}: test split, {outcome.test_windows} windows, original units", outcome.metrics
    )
    if outcome.per_series:
        series_table(outcome.per_series, outcome.run_id)
    for level, result in outcome.intervals.items():
        console.print(
            f"{level}% prediction interval on test: coverage {result['coverage']:.1%}, "
            f"mean width {result['width']:.4g}"
        )
    console.print(
        f"run {outcome.run_id}  model {outcome.model_uri}  ({outcome.seconds:.1f} s, {outcome.epochs} epochs)"
    )
    if outcome.registered_name:
        promotion = outcome.promotion
        verdict = "now holds" if promotion.promoted else "did not take"
        console.print(
            f"registered {outcome.registered_name} v{outcome.registered_version}; "
            f"{verdict} @{alias}: {promotion.reason}"
        )
    if as_json:
        print_json(outcome.as_json())


SERIES_SHOWN = 10  # a panel of more series shows its best, median and worst, not every row


def series_table(per_series: dict[str, dict[str, dict[str, float]]], run_id: str) -> None:
    """A panel's test MASE per series (scale-free, so series compare), model beside baselines:
    every series of a small panel; of a large one the best, median and worst by the model's MASE,
    and where the full table is (a table of thousands of rows fits no screen)."""
    from pipelines.console import console, table

    names = list(next(iter(per_series.values())))
    ranked = sorted(per_series.items(), key=lambda item: item[1][names[0]]["mase"])
    if len(ranked) <= SERIES_SHOWN:
        chosen = [(key, key) for key, _ in ranked]
        title = "test MASE per series (below naive's: better than repeating the last value)"
    else:
        middle = len(ranked) // 2
        picks = {"best": 0, "median": middle, "worst": len(ranked) - 1}
        chosen = [(f"{ranked[i][0]} ({label})", ranked[i][0]) for label, i in picks.items()]
        title = f"test MASE of {len(ranked)} series: the best, median and worst by the model's"
    shown = dict(ranked)
    table(
        title, ["series", *names], [[label, *(shown[key][n]["mase"] for n in names)] for label, key in chosen]
    )
    if len(ranked) > SERIES_SHOWN:
        beats = sum(m[names[0]]["mase"] < m["naive"]["mase"] for _, m in ranked)
        console.print(
            f"{beats} of {len(ranked)} series beat naive; every series: per_series.csv in run {run_id} "
            "(and under per_series in --json)"
        )


@app.command()
@user_errors
def evaluate(
    model_uri: Annotated[str, typer.Option(help="runs:/..., models:/NAME@ALIAS, models:/NAME/VERSION")],
    data: Annotated[str | None, typer.Option(help="dataset name or file (default: the model's own)")] = None,
    time_column: Annotated[str | None, typer.Option()] = None,
    target: Annotated[str | None, typer.Option()] = None,
    id_column: Annotated[str | None, typer.Option(help="long format: the series-id column")] = None,
    experiment: Annotated[str, typer.Option()] = "evaluations",
    as_json: Annotated[bool, typer.Option("--json")] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Score a logged or registered model on a dataset's test split against the baselines.
    --json: the document `{run_id, dataset, windows, metrics: {forecaster: {metric: value}},
    model_version, model_run_id, resolved}` alone on stdout."""
    from forecaster.data.header import check_given_columns
    from forecaster.model_uri import check_model_uri

    check_model_uri(model_uri)  # before MLflow and torch are imported: seconds, not a minute
    overrides = {**data_settings(data, time_column, target, None), **panel_settings(id_column, None)}
    check_given_columns(overrides)
    from pipelines.console import console, metrics_table
    from pipelines.evaluate import run_evaluation
    from pipelines.tracking import connect, resolve_tracking_uri

    uri = connect(resolve_tracking_uri(tracking_uri))
    result = run_evaluation(model_uri, overrides, experiment, uri)
    if result["resolved"]:
        console.print(result["resolved"], markup=False)  # models:/NAME@ALIAS -> version 3 (run abc12345)
    metrics_table(
        f"{model_uri} on {result['dataset']}: test split, {result['windows']} windows", result["metrics"]
    )
    if as_json:
        print_json(result)


@app.command()
@user_errors
def backtest(
    config: Annotated[str, typer.Option("--config", "-c")],
    folds: Annotated[int, typer.Option(min=2, help="rolling origins")] = 3,
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


@app.command()
@user_errors
def sweep(
    config: Annotated[str, typer.Option("--config", "-c", help="base config; the search varies the model")],
    trials: Annotated[int, typer.Option(min=1)] = 20,
    overrides: Annotated[list[str] | None, typer.Option("--set")] = None,
    storage: Annotated[
        str | None,
        typer.Option(
            envvar="OPTUNA_STORAGE", help="Optuna RDB URL, shared by several workers ($OPTUNA_STORAGE)"
        ),
    ] = None,
    study: Annotated[str | None, typer.Option(help="study name (resumed if it exists in --storage)")] = None,
    register: Annotated[str | None, typer.Option(help="register the re-trained best model")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    quiet: Quiet = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Hyperparameter search with Optuna; each trial a nested MLflow run; best re-trained."""
    from forecaster.data.header import check_data_columns
    from pipelines.config import load_run_config

    run_config = load_run_config(config, overrides)
    check_data_columns(run_config.data)
    from pipelines.console import console
    from pipelines.sweep import run_sweep
    from pipelines.tracking import connect, resolve_tracking_uri

    if register:
        run_config.tracking.registered_model = register
    if as_json:
        run_config.train.progress_bar = False
    result = run_sweep(
        run_config, trials, connect(resolve_tracking_uri(tracking_uri)), storage, study, quiet=quiet
    )
    best = result.best_run
    console.print(f"best selection MAE {result.best_value:.4f} with {result.best_params}", markup=False)
    if best is not None:
        console.print(
            f"re-trained best: run {best.run_id}, test MAE {best.metrics['model']['mae']:.4f} "
            f"(naive {best.metrics['naive']['mae']:.4f})"
            + (
                f"; registered {best.registered_name} v{best.registered_version}"
                if best.registered_name
                else ""
            ),
            markup=False,
        )
    if as_json:
        print_json(result.as_json())


@app.command()
@user_errors
def predict(
    model_uri: Annotated[str, typer.Option()],
    data: Annotated[str, typer.Option(help="dataset name or CSV/Parquet file holding the recent history")],
    time_column: Annotated[str | None, typer.Option()] = None,
    target: Annotated[str | None, typer.Option()] = None,
    id_column: Annotated[
        str | None, typer.Option(help="long format: the series-id column; every series is forecast")
    ] = None,
    output: Annotated[
        str | None, typer.Option(help="write the forecasts to this .csv or .parquet file (by its extension)")
    ] = None,
    engine: Annotated[
        str, typer.Option(help="local (this process) or spark (Apache Spark; pip install '.[spark]')")
    ] = "local",
    spark_master: Annotated[
        str, typer.Option(help="with --engine spark: the master URL, e.g. local[2] or spark://host:7077")
    ] = "local[2]",
    tracking_uri: TrackingUri = None,
) -> None:
    """Forecast the next H steps after the end of a series, or of every series of a panel,
    offline. Series that cannot be forecast are named, with why, and the others forecast."""
    from forecaster.data.header import check_given_columns
    from forecaster.errors import ConfigError
    from forecaster.model_uri import check_model_uri

    if engine not in ("local", "spark"):
        raise ConfigError(f"--engine {engine!r}: local or spark")
    check_model_uri(model_uri)  # before MLflow and torch are imported: seconds, not a minute
    settings = {**data_settings(data, time_column, target, None), **panel_settings(id_column, None)}
    check_given_columns(settings)
    if output:
        from pipelines.predict import output_format

        output_format(output)  # a wrong extension is said before minutes of work
    from pipelines.console import console
    from pipelines.predict import forecast_next, write_forecasts
    from pipelines.tracking import connect, resolve_tracking_uri

    connect(resolve_tracking_uri(tracking_uri))
    if engine == "spark":
        from pipelines.spark_predict import forecast_on_spark

        forecasts = forecast_on_spark(model_uri, settings, spark_master)
    else:
        forecasts = forecast_next(model_uri, settings)
    if not output:
        print(forecasts.frame.to_string(index=False))
    skipped_file = write_forecasts(forecasts, output, id_column) if output else None
    if output:
        console.print(
            f"wrote {len(forecasts.frame)} forecast rows ({forecasts.series} series) to {output} "
            f"in {forecasts.seconds:.1f} s ({engine})"
        )
    if forecasts.skipped:
        shown = list(forecasts.skipped.items())[:SKIPPED_SHOWN]
        console.print(f"{len(forecasts.skipped)} series not forecast:", markup=False)
        for key, reason in shown:  # the reason without the file and series the line already names
            said = reason.split(f"(series {key!r}): ", 1)[-1]
            console.print(f"  {key}: {said}", markup=False, soft_wrap=True)
        if len(forecasts.skipped) > len(shown):
            where = f" (all of them in {skipped_file})" if skipped_file else ""
            console.print(f"  ... and {len(forecasts.skipped) - len(shown)} more{where}", markup=False)
        elif skipped_file:
            console.print(f"  (also in {skipped_file})", markup=False)


SKIPPED_SHOWN = 10


@app.command()
@user_errors
def compare(
    experiment: Annotated[str, typer.Option()] = "forecasting",
    limit: Annotated[int, typer.Option()] = 50,
    as_json: Annotated[bool, typer.Option("--json", help="print the rows as one JSON document")] = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """The experiment's runs side by side, best selection MAE first (test shown, never ordering),
    and the URL of the same comparison in the MLflow UI (its shared view, rewritten here).
    --json: `{experiment, order_by, runs: [{run_id, model, dataset, lookback, ..., selection_mae,
    test_mae, seconds, version, status}, ...], view_url}` in the table's order, alone on stdout."""
    import mlflow

    from pipelines.compare import compare_runs, comparison_json, print_comparison
    from pipelines.shared_view import print_view_url, refresh_after_training, view_url
    from pipelines.tracking import connect, resolve_tracking_uri

    uri = connect(resolve_tracking_uri(tracking_uri))
    runs = compare_runs(experiment, limit)  # refuses an unknown experiment
    experiment_id = mlflow.get_experiment_by_name(experiment).experiment_id
    # a store this user may only read (a tracking server's READ permission) still compares
    refresh_after_training(mlflow.MlflowClient(uri), experiment_id)
    if as_json:
        print_json({**comparison_json(experiment, runs), "view_url": view_url(uri, experiment_id)})
        return
    print_comparison(experiment, runs)
    print_view_url(uri, experiment_id)


@app.command()
@user_errors
def runs(
    stale: Annotated[bool, typer.Option("--stale", help="only runs a dead process left RUNNING")] = False,
    experiment: Annotated[str | None, typer.Option(help="default: every experiment")] = None,
    mark_killed: Annotated[bool, typer.Option("--mark-killed", help="set the stale runs KILLED")] = False,
    silence: Annotated[
        float, typer.Option(help="minutes without a checkpoint after which a run trained elsewhere is stale")
    ] = 60.0,
    tracking_uri: TrackingUri = None,
) -> None:
    """Model runs still marked RUNNING; with --stale those whose process died (kill -9, OOM):
    resume one with `forecast train --resume RUN_ID`, or --mark-killed them."""
    import mlflow

    from forecaster.errors import ConfigError
    from pipelines.stale import find_stale_runs, running_runs
    from pipelines.stale import mark_killed as mark
    from pipelines.tracking import connect, resolve_tracking_uri

    if mark_killed and not stale:
        raise ConfigError("--mark-killed needs --stale: only runs whose process is gone are marked")
    client = mlflow.MlflowClient(connect(resolve_tracking_uri(tracking_uri)))
    if experiment is None:
        ids = [e.experiment_id for e in client.search_experiments()]
    else:
        found = client.get_experiment_by_name(experiment)
        if found is None:
            raise ConfigError(f"no experiment named {experiment!r}")
        ids = [found.experiment_id]
    listed = find_stale_runs(client, ids, silence * 60) if stale else running_runs(client, ids)
    if not listed:
        print("no stale runs" if stale else "no running model runs")
        return
    for run in listed:
        print(f"{run.run_id}  {run.run_name}  {run.reason}")
    if mark_killed:
        mark(client, listed)
        print(f"marked {len(listed)} run(s) KILLED")


@app.command("register")
@user_errors
def register_command(
    run_id: Annotated[str, typer.Option()],
    name: Annotated[str, typer.Option()],
    alias: Annotated[str, typer.Option()] = "champion",
    force: Force = False,
    allow_worse_than_naive: AllowWorseThanNaive = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Register a run's model; give it the alias only if it beats the current holder and naive."""
    from pipelines.registry import promote, register_run
    from pipelines.tracking import connect, resolve_tracking_uri

    connect(resolve_tracking_uri(tracking_uri))
    version = register_run(run_id, name)
    decision = promote(name, version, alias, force, allow_worse_than_naive)
    print(
        f"registered {name} v{version}; @{alias} {'moved' if decision.promoted else 'kept'}: "
        f"{decision.reason}"
    )


@app.command()
@user_errors
def promote(
    name: Annotated[str, typer.Option()],
    version: Annotated[str, typer.Option()],
    alias: Annotated[str, typer.Option()] = "champion",
    force: Force = False,
    allow_worse_than_naive: AllowWorseThanNaive = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Move an alias to a version only if it beats the current holder and the naive forecast on the
    candidate's selection folds (validation's, before test: split.selection_folds); test decides
    nothing."""
    from pipelines.registry import promote as promote_version
    from pipelines.tracking import connect, resolve_tracking_uri

    connect(resolve_tracking_uri(tracking_uri))
    decision = promote_version(name, version, alias, force, allow_worse_than_naive)
    print(f"{name} v{version}: @{alias} {'moved' if decision.promoted else 'kept'}: {decision.reason}")
    if not decision.promoted:
        raise typer.Exit(1)


@app.command()
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


@app.command()
def ui(
    port: Annotated[int, typer.Option()] = 5000,
    tracking_uri: TrackingUri = None,
) -> None:
    """Start the MLflow UI on the store the CLI writes to, on loopback."""
    from pipelines.tracking import resolve_tracking_uri

    uri = resolve_tracking_uri(tracking_uri)
    if uri.startswith(("http://", "https://")):
        print(f"runs are tracked on a server: open {uri} in a browser")
        return
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",  # one person browsing: mlflow's default is 4 uvicorn workers
    ]
    # and no job-execution runner (huey consumers): nothing here submits MLflow server jobs
    env = {**quiet_environment(os.environ), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    print(f"MLflow UI for {uri} at http://127.0.0.1:{port} (Ctrl-C to stop)", flush=True)
    from pipelines.shared_view import shared_views, view_url

    for name, experiment_id in shared_views(uri):
        print(f"  {name}: runs compared at {view_url(uri, experiment_id, port)} (once it starts)", flush=True)
    # become `mlflow ui`: SIGTERM/Ctrl-C reach it directly and it forwards them to its server,
    # so stopping `forecast ui` stops everything it started
    os.execvpe(command[0], command, env)


@app.command()
def serve(
    model_uri: Annotated[str | None, typer.Option(help="default: $MODEL_URI or the demo's champion")] = None,
    host: Annotated[str, typer.Option()] = "127.0.0.1",
    port: Annotated[int, typer.Option()] = 8000,
    workers: Annotated[int, typer.Option(min=1, help="processes, each loading the model")] = 1,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda, cuda:1")] = None,
    forecast_log: Annotated[
        str | None,
        typer.Option(help="log forecasts to this SQLAlchemy URL (sqlite:///forecasts.db); $FORECAST_LOG_URL"),
    ] = None,
    tracking_uri: TrackingUri = None,
) -> None:
    """Serve a registered model over HTTP (FastAPI + uvicorn); see /docs."""
    import uvicorn

    from pipelines.tracking import resolve_tracking_uri

    os.environ["MLFLOW_TRACKING_URI"] = resolve_tracking_uri(tracking_uri)
    if model_uri:
        os.environ["MODEL_URI"] = model_uri
    if device:
        os.environ["DEVICE"] = device
    if forecast_log:
        os.environ["FORECAST_LOG_URL"] = forecast_log
    from service.metrics import MULTIPROC_DIR  # serve starts the app: the one import of service/

    with shared_metrics_dir(workers, MULTIPROC_DIR):
        # requests still waiting 5 s after Ctrl-C / SIGTERM are answered 503, not cut off
        uvicorn.run(
            "service.main:app",
            host=host,
            port=port,
            workers=workers,
            log_level="info",
            timeout_graceful_shutdown=5,
        )


ForecastLogUrl = Annotated[
    str | None,
    typer.Option(
        "--forecast-log", help="the service's forecast log, a SQLAlchemy URL (default: $FORECAST_LOG_URL)"
    ),
]


def forecast_log_url(given: str | None) -> str:
    from forecaster.errors import ConfigError
    from monitoring.settings import MonitoringSettings

    url = given or MonitoringSettings().forecast_log_url
    if not url:
        raise ConfigError("no forecast log: give --forecast-log URL or set FORECAST_LOG_URL")
    return url


@app.command()
@user_errors
def monitor(
    forecast_log: ForecastLogUrl = None,
    window: Annotated[
        int | None, typer.Option(min=1, help="resolved steps per model version (default: $MONITOR_WINDOW)")
    ] = None,
    series_id: Annotated[str | None, typer.Option(help="the figures of this series only")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print GET /v1/monitor's document instead")] = False,
) -> None:
    """Live forecast quality from the forecast log: MAE, RMSE, MASE, skill against naive and
    seasonal naive, interval coverage, per model version and horizon step, and the status."""
    from infra.redaction import redact
    from monitoring.settings import MonitoringSettings
    from pipelines.monitor import print_monitor, read_monitor

    url = forecast_log_url(forecast_log)
    document = read_monitor(url, MonitoringSettings(), window, series_id=series_id)
    if as_json:
        print_json(document)
        return
    print_monitor(document, redact(url) or "")


@app.command("upgrade-log")
@user_errors
def upgrade_log(forecast_log: ForecastLogUrl = None) -> None:
    """Migrate the forecast log to this version's layout (the service does it when it starts; this
    is for a log read before any new service touched it, or to migrate before a deployment)."""
    from infra.redaction import redact
    from monitoring.database import upgrade

    url = forecast_log_url(forecast_log)
    revision = upgrade(url)
    print(f"the forecast log {redact(url)} is at revision {revision}")


@app.command()
@user_errors
def retrain(
    model_uri: Annotated[
        str,
        typer.Option(envvar="MODEL_URI", help="the served alias, models:/NAME@ALIAS (default: $MODEL_URI)"),
    ] = DEFAULT_MODEL_URI,
    if_degraded: Annotated[
        bool, typer.Option("--if-degraded", help="only when the monitor says degraded")
    ] = False,
    forecast_log: ForecastLogUrl = None,
    series_id: Annotated[
        str | None, typer.Option(help="which logged series (when it forecast several)")
    ] = None,
    split: Annotated[str | None, typer.Option(help="train,val,test fractions for the extended data")] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="KEY=VALUE, as for train")] = None,
    data_dir: Annotated[
        str, typer.Option(help="where the extended series is written and kept")
    ] = "retrain-data",
    as_json: Annotated[bool, typer.Option("--json", help="end with one JSON line")] = False,
    allow_worse_than_naive: AllowWorseThanNaive = False,
    quiet: Quiet = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Retrain the served model's config on its data extended to the latest actuals in the forecast
    log, and register the new version through the promotion gate."""
    from forecaster.model_uri import check_model_uri

    check_model_uri(model_uri)
    from monitoring.settings import MonitoringSettings
    from pipelines.console import console
    from pipelines.retrain import retrain as run_retrain
    from pipelines.tracking import connect, resolve_tracking_uri

    uri = connect(resolve_tracking_uri(tracking_uri))
    result = run_retrain(
        model_uri,
        forecast_log_url(forecast_log),
        uri,
        MonitoringSettings(),
        if_degraded=if_degraded,
        series_id=series_id,
        split=split_settings(split) if split else None,
        data_dir=data_dir,
        overrides=overrides,
        quiet=quiet,
        allow_worse_than_naive=allow_worse_than_naive,
    )
    reasons = "; ".join(result.reasons)
    status = f"{result.model_uri} (version {result.version}): {result.status}" + (
        f" ({reasons})" if reasons else ""
    )
    if not result.retrained:
        console.print(f"{status}; not retrained")
    else:
        console.print(status)
        console.print(
            f"retrained on {result.rows} rows ({result.actuals} actuals from the log), "
            f"written to {result.data_path}"
        )
        report_training(result.outcome, result.model_uri.rsplit("@", 1)[1], as_json=False)
    if as_json:
        print_json(result.as_json())


@contextlib.contextmanager
def shared_metrics_dir(workers: int, variable: str) -> Iterator[None]:
    """With several workers, /metrics must add up every worker's values: prometheus-client's
    multiprocess mode, in $PROMETHEUS_MULTIPROC_DIR when set (emptied first, as its docs require)
    or a fresh directory removed afterwards."""
    if workers == 1:
        yield
        return
    given = os.environ.get(variable)
    directory = Path(given) if given else Path(tempfile.mkdtemp(prefix="forecast-metrics-"))
    directory.mkdir(parents=True, exist_ok=True)
    for leftover in directory.glob("*.db"):
        leftover.unlink()
    os.environ[variable] = str(directory)
    try:
        yield
    finally:
        if not given:
            shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
