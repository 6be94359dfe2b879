"""What every command group shares: the options several commands take, the one-line user errors
(``user_errors``), --json on stdout, and quiet libraries."""

from __future__ import annotations

import functools
import logging
import os
import sys
import warnings
from collections.abc import Mapping
from typing import Annotated, Any

import typer

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
    from pipelines.interrupts import (
        INTERRUPTED_EXIT,
        RunInterrupted,
        resume_line,
        sigint_received,
        silence_destructors,
    )

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
        silence_destructors()
        errors.print(resume_line(exc, kwargs.get("tracking_uri")), markup=False, soft_wrap=True)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except KeyboardInterrupt:
        silence_destructors()
        errors.print("interrupted", markup=False)
        raise typer.Exit(INTERRUPTED_EXIT) from None
    except SystemExit:
        if not sigint_received():
            raise
        silence_destructors()
        errors.print("interrupted", markup=False)  # Lightning's sys.exit(1) after a Ctrl-C in fit
        raise typer.Exit(INTERRUPTED_EXIT) from None
    raise typer.Exit(2)


def print_json(document: object) -> None:
    """A --json document on stdout as strict JSON (pipelines/console.print_json)."""
    from pipelines.console import print_json as print_strict_json

    print_strict_json(document)


def split_settings(split: str | None) -> dict[str, Any]:
    from forecaster.errors import ConfigError

    if split is None:
        return {}
    try:
        train, val, test = (float(x) for x in split.split(","))
    except ValueError:
        raise ConfigError(f"--split {split!r}: expected three fractions, e.g. 0.7,0.15,0.15") from None
    return {"train": train, "val": val, "test": test}


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


def comma_list(value: str | None) -> list[str] | None:
    """``a, b,c`` -> ["a", "b", "c"]; None stays None (the option was not given)."""
    return None if value is None else [item.strip() for item in value.split(",") if item.strip()]
