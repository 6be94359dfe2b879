"""The forecast log's and the monitor's settings, from the environment (or a .env file): one place
for the service (``ServiceSettings`` extends this class) and for the CLI (`forecast monitor`,
`forecast retrain`), which reads the same variables without importing the web service."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class MonitoringSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", protected_namespaces=())

    # -- the forecast log (monitoring/writer.py, monitoring/retention.py) ---------------------
    forecast_log_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the forecast log (sqlite:///forecasts.db, postgresql+psycopg://...); "
        "unset: forecasts are not logged and /v1/actuals, /v1/monitor answer 404",
    )
    forecast_log_queue: int = Field(
        10_000, ge=1, description="forecasts waiting to be written; beyond it they are dropped (counted)"
    )
    forecast_log_batch: int = Field(500, ge=1, description="requests' forecasts per insert transaction")
    forecast_log_wait_ms: float = Field(
        100.0, ge=0, description="how long the writer gathers a batch before inserting it"
    )
    forecast_log_drain_s: float = Field(
        5.0,
        ge=0,
        description="at shutdown, how long the writer may take to write what is queued; what is left "
        "after it is counted (outcome abandoned) and logged",
    )
    forecast_log_retention_days: float = Field(
        90.0, gt=0, description="forecast steps and actuals logged longer ago than this are deleted"
    )
    forecast_log_max_steps: int = Field(
        5_000_000, ge=1, description="at most this many forecast steps are kept (oldest deleted first)"
    )
    forecast_log_idempotency_hours: float = Field(
        24.0,
        gt=0,
        description="how long an Idempotency-Key is remembered: a retry within it is not logged again",
    )

    # -- who may write actuals and read the monitor (service/monitoring_routes.py) --------------
    monitoring_open_without_api_key: bool = Field(
        False,
        description="with no API_KEY set, let anyone who reaches the service post actuals and read the "
        "monitor (off: they answer 403 until API_KEY is set)",
    )
    actuals_accept_unknown_series: bool = Field(
        False,
        description="store actuals of a series the log holds no forecast of (off: 422 naming it); such a "
        "series' grid is anchored on its latest stored actual, else on its first value sent, and a value "
        "off that grid, or later than now plus a step, is refused (as a value off the model's grid, in "
        "the future or more than a horizon past the latest forecast of a known series is)",
    )

    # -- the monitor (monitoring/monitor.py, monitoring/snapshot.py) ------------------------------
    monitor_window: int = Field(
        1000, ge=1, description="the rolling window: the last N resolved forecast steps per model version"
    )
    monitor_min_steps: int = Field(
        50, ge=1, description="fewer resolved steps than this in the window: 'insufficient data'"
    )
    monitor_min_skill: float = Field(
        0.0, description="degraded when the skill against naive over the window falls below this"
    )
    monitor_coverage_tolerance: float = Field(
        0.15, ge=0, le=1, description="degraded when interval coverage is off its nominal level by more"
    )
    monitor_refresh_s: float = Field(
        30.0,
        gt=0,
        description="how often the Prometheus monitor gauges are recomputed, once per forecast log "
        "whatever the number of workers and replicas sharing it",
    )
