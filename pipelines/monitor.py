"""`forecast monitor`: the service's live figures (GET /v1/monitor), read straight from the forecast
log, as tables: one row per model version, then one per horizon step of the headline version.
It only reads: a log that does not exist or is not at this version's layout is an error naming
the URL, never a new empty database."""

from __future__ import annotations

from typing import Any

from monitoring.database import open_for_reading
from monitoring.monitor import monitor
from monitoring.scoring import Thresholds
from monitoring.settings import MonitoringSettings
from pipelines.console import console, table

COLUMNS = ("count", "mae", "rmse", "mase", "skill_naive", "skill_seasonal_naive", "coverage")
HEADERS = ("count", "MAE", "RMSE", "MASE", "skill vs naive", "skill vs seasonal naive", "coverage")


def read_monitor(
    log_url: str,
    settings: MonitoringSettings,
    window: int | None = None,
    serving: tuple[str, str] | None = None,
    series_id: str | None = None,
) -> dict[str, Any]:
    engine = open_for_reading(log_url)
    try:
        with engine.connect() as connection:
            return monitor(connection, Thresholds.from_settings(settings, window), serving, series_id)
    finally:
        engine.dispose()


def print_monitor(document: dict[str, Any], shown_url: str) -> None:
    window = document["window"]
    models = document["models"]
    rows = [
        [
            f"{m['name']} v{m['version']}" + (f" @{m['alias']}" if m["alias"] else ""),
            m["role"],
            m["status"],
            *(m.get(c) for c in COLUMNS),
        ]
        for m in models
    ]
    rows.append(["overall (answered)", "champion", "", *(document["overall"].get(c) for c in COLUMNS)])
    of_series = f", series {document['series_id']!r}" if document.get("series_id") else ""
    table(
        f"forecast log {shown_url}{of_series}: the last {window} resolved steps per model version",
        ["model", "role", "status", *HEADERS],
        rows,
    )
    serving = document["serving"]
    headline = next(
        (
            m
            for m in models
            if serving and m["role"] == "champion" and (m["name"], m["version"]) == tuple(serving.values())
        ),
        None,
    )
    if headline is not None and headline["by_step"]:
        table(
            f"{headline['name']} v{headline['version']} by horizon step",
            ["step", *HEADERS],
            [[s["step"], *(s.get(c) for c in COLUMNS)] for s in headline["by_step"]],
        )
    who = f"{serving['name']} v{serving['version']}" if serving else "the served model"
    reasons = "; ".join(document["reasons"])
    console.print(f"status of {who}: {document['status']}" + (f" ({reasons})" if reasons else ""))
