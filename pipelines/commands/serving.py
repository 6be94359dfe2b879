"""`forecast serve` (the FastAPI app, service/: the one place pipelines/ starts it) and `forecast ui`
(the MLflow UI on the store the CLI writes to)."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from pipelines.commands.common import TrackingUri, quiet_environment
from pipelines.config import COMMAND_DEFAULTS as DEFAULTS


def ui(
    port: Annotated[int, typer.Option()] = DEFAULTS.ui_port,
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


def serve(
    model_uri: Annotated[str | None, typer.Option(help="default: $MODEL_URI or the demo's champion")] = None,
    host: Annotated[str, typer.Option()] = DEFAULTS.serve_host,
    port: Annotated[int, typer.Option()] = DEFAULTS.serve_port,
    workers: Annotated[
        int, typer.Option(min=1, help="processes, each loading the model")
    ] = DEFAULTS.serve_workers,
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
            "service.main:create_app",
            factory=True,  # the app is built in each worker, from the environment set above
            host=host,
            port=port,
            workers=workers,
            log_level="info",
            timeout_graceful_shutdown=5,
        )


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
