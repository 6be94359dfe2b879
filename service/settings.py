"""Service settings, from the environment (or a .env file): one place, validated at start-up."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
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
    queue_size: int = Field(512, ge=1, description="requests waiting; beyond it: 503 + Retry-After")
    max_series_per_request: int = Field(1024, ge=1)
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    reload_interval_s: float = Field(30.0, ge=0, description="re-resolve the alias; 0 disables")
    api_key: str | None = Field(None, description="when set, predict and admin need X-API-Key")
    request_timeout_s: float = Field(30.0, gt=0)
