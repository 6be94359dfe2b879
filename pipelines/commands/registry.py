"""`forecast compare`, `runs`, `register` and `promote`: the runs side by side, runs a dead process
left RUNNING, and the registry's versions and aliases (moved only through the promotion gate)."""

from __future__ import annotations

from typing import Annotated

import typer

from pipelines.commands.common import AllowWorseThanNaive, Force, TrackingUri, print_json, user_errors
from pipelines.config import COMMAND_DEFAULTS as DEFAULTS


@user_errors
def compare(
    experiment: Annotated[str, typer.Option()] = DEFAULTS.experiment,
    limit: Annotated[int, typer.Option()] = DEFAULTS.compare_limit,
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

    uri = connect(resolve_tracking_uri(tracking_uri), existing=True)
    runs = compare_runs(experiment, limit)  # refuses an unknown experiment
    experiment_id = mlflow.get_experiment_by_name(experiment).experiment_id
    # a store this user may only read (a tracking server's READ permission) still compares
    refresh_after_training(mlflow.MlflowClient(uri), experiment_id)
    if as_json:
        print_json({**comparison_json(experiment, runs), "view_url": view_url(uri, experiment_id)})
        return
    print_comparison(experiment, runs)
    print_view_url(uri, experiment_id)


@user_errors
def runs(
    stale: Annotated[bool, typer.Option("--stale", help="only runs a dead process left RUNNING")] = False,
    experiment: Annotated[str | None, typer.Option(help="default: every experiment")] = None,
    mark_killed: Annotated[bool, typer.Option("--mark-killed", help="set the stale runs KILLED")] = False,
    silence: Annotated[
        float, typer.Option(help="minutes without a checkpoint after which a run trained elsewhere is stale")
    ] = DEFAULTS.stale_minutes,
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
    client = mlflow.MlflowClient(connect(resolve_tracking_uri(tracking_uri), existing=True))
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


@user_errors
def register_command(
    run_id: Annotated[str, typer.Option()],
    name: Annotated[str, typer.Option()],
    alias: Annotated[str, typer.Option()] = DEFAULTS.alias,
    force: Force = False,
    allow_worse_than_naive: AllowWorseThanNaive = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Register a run's model; give it the alias only if it beats the current holder and naive."""
    from pipelines.registry import promote, register_run
    from pipelines.tracking import connect, resolve_tracking_uri

    connect(resolve_tracking_uri(tracking_uri), existing=True)
    version = register_run(run_id, name)
    decision = promote(name, version, alias, force, allow_worse_than_naive)
    print(
        f"registered {name} v{version}; @{alias} {'moved' if decision.promoted else 'kept'}: "
        f"{decision.reason}"
    )


@user_errors
def promote(
    name: Annotated[str, typer.Option()],
    version: Annotated[str, typer.Option()],
    alias: Annotated[str, typer.Option()] = DEFAULTS.alias,
    force: Force = False,
    allow_worse_than_naive: AllowWorseThanNaive = False,
    tracking_uri: TrackingUri = None,
) -> None:
    """Move an alias to a version only if it beats the current holder and the naive forecast on the
    candidate's selection folds (validation's, before test: split.selection_folds); test decides
    nothing."""
    from forecaster.errors import ConfigError
    from pipelines.registry import promote as promote_version
    from pipelines.tracking import connect, resolve_tracking_uri

    if not (version.isascii() and version.isdecimal()):  # MLflow would read -1 as a stage
        raise ConfigError(f"--version {version!r}: a version is a whole number (1, 2, ...)")
    version = str(int(version))  # 03 is version 3, as MLflow reads it
    connect(resolve_tracking_uri(tracking_uri), existing=True)
    decision = promote_version(name, version, alias, force, allow_worse_than_naive)
    print(f"{name} v{version}: @{alias} {'moved' if decision.promoted else 'kept'}: {decision.reason}")
    if not decision.promoted and decision.holder_version != version:  # holding it already: done
        raise typer.Exit(1)
