"""Service settings, from the environment (or a .env file): one place, validated at start-up. The
forecast log's and the monitor's (FORECAST_LOG_*, MONITOR_*, ...) are monitoring's own
(monitoring/settings.py), which the CLI reads too."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from forecaster.model_uri import DEFAULT_MODEL_URI
from monitoring.settings import MonitoringSettings


class ServiceSettings(MonitoringSettings):
    mlflow_tracking_uri: str = Field("sqlite:///mlflow.db", description="where the registry lives")
    model_uri: str = Field(DEFAULT_MODEL_URI, description="models:/NAME@ALIAS etc.")
    device: str = Field("auto", description="auto (CUDA when available), cpu, cuda, cuda:1")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="reduced only on CUDA")
    torch_threads: int = Field(
        1, ge=1, description="per process, torch's and ONNX Runtime's; more threads fight on small boxes"
    )
    inference_runtime: Literal["auto", "onnx", "torch"] = Field(
        "auto",
        description="what runs the network: ONNX Runtime on the version's verified export, torch, or "
        "auto (ONNX on a CPU, torch on CUDA); a version without an export serves with torch",
    )
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
    api_key: str | None = Field(
        None, description="when set, predict, model, actuals, monitor and admin routes need it"
    )
    request_timeout_s: float = Field(30.0, gt=0)

    challenger_model_uri: str | None = Field(
        None,
        description="a second model scored in shadow on the same requests (answers not returned), "
        "logged as role challenger; needs the forecast log",
    )
    shadow_queue: int = Field(1000, ge=1, description="requests waiting for the challenger; beyond: dropped")

    @model_validator(mode="after")
    def _one_request_fits_the_queue(self) -> ServiceSettings:
        if self.max_series_per_request > self.max_queued_windows:
            raise ValueError(
                f"MAX_SERIES_PER_REQUEST ({self.max_series_per_request}) exceeds MAX_QUEUED_WINDOWS "
                f"({self.max_queued_windows}): such a request could never be queued"
            )
        return self
