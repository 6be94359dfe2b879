"""`forecast sweep`: a hyperparameter search with Optuna (pipelines/sweep.py), each trial a nested
MLflow run, the best re-trained and optionally registered."""

from __future__ import annotations

from typing import Annotated

import typer

from pipelines.commands.common import Quiet, TrackingUri, print_json, user_errors
from pipelines.config import COMMAND_DEFAULTS as DEFAULTS


@user_errors
def sweep(
    config: Annotated[str, typer.Option("--config", "-c", help="base config; the search varies the model")],
    trials: Annotated[int, typer.Option(min=1)] = DEFAULTS.sweep_trials,
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
