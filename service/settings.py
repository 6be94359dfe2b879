"""Service settings, from the environment (or a .env file): one place, validated at start-up."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", protected_namespaces=())

    mlflow_tracking_uri: str = Field("sqlite:///mlflow.db", description="where the registry lives")
    model_uri: str = Field("models:/demo-forecaster@champion", description="models:/NAME@ALIAS etc.")
    device: str = Field("auto", description="auto (CUDA when available), cpu, cuda, cuda:1")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="reduced only on CUDA")
    torch_threads: int = Field(1, ge=1, description="per process; more threads fight on small boxes")
    max_batch_windows: int = Field(256, ge=1, description="windows per forward pass")
    max_wait_ms: float = Field(2.0, ge=0, description="how long a batch waits for company")
    max_queued_windows: int = Field(
        4096, ge=1, description="windows waiting for the model; beyond it: 503 + Retry-After"
    )
    max_series_per_request: int = Field(1024, ge=1)
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    parse_offload_bytes: int = Field(
        64 * 1024, ge=0, description="bodies larger than this are parsed in a helper process"
    )
    parse_timeout_s: float = Field(10.0, gt=0, description="a body that takes longer to parse: 413")
    body_timeout_s: float = Field(30.0, gt=0, description="a body that takes longer to arrive: 408")
    reload_interval_s: float = Field(30.0, ge=0, description="re-resolve the alias; 0 disables")
    reload_timeout_s: float = Field(
        30.0, gt=0, description="a reload answers within this, whatever the registry does"
    )
    registry_timeout_s: int = Field(10, ge=1, description="MLflow's HTTP timeout per call to the registry")
    registry_retries: int = Field(1, ge=0, description="MLflow's HTTP retries per call to the registry")
    load_retry_max_s: float = Field(30.0, gt=0, description="longest wait between attempts to load a model")
    api_key: str | None = Field(None, description="when set, predict, model and admin routes need it")
    request_timeout_s: float = Field(30.0, gt=0)

    # -- live monitoring (service/forecast_log.py, service/monitor.py) -------------------------
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
    forecast_log_retention_days: float = Field(
        90.0, gt=0, description="forecast steps and actuals logged longer ago than this are deleted"
    )
    forecast_log_max_steps: int = Field(
        5_000_000, ge=1, description="at most this many forecast steps are kept (oldest deleted first)"
    )
    challenger_model_uri: str | None = Field(
        None,
        description="a second model scored in shadow on the same requests (answers not returned), "
        "logged as role challenger; needs the forecast log",
    )
    shadow_queue: int = Field(1000, ge=1, description="requests waiting for the challenger; beyond: dropped")
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
        30.0, gt=0, description="how often the Prometheus monitor gauges are recomputed from the log"
    )

    @model_validator(mode="after")
    def _one_request_fits_the_queue(self) -> ServiceSettings:
        if self.max_series_per_request > self.max_queued_windows:
            raise ValueError(
                f"MAX_SERIES_PER_REQUEST ({self.max_series_per_request}) exceeds MAX_QUEUED_WINDOWS "
                f"({self.max_queued_windows}): such a request could never be queued"
            )
        return self
