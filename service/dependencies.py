"""What FastAPI's routes take through ``Depends``: the app's settings and metrics (``create_app``
sets them) and the objects its lifespan starts (the model store, batcher, reloader, body parser,
forecast log, monitoring helper, shared monitor). The one module that reads ``app.state``, so
that a handler names what it needs in its signature and a test can override any of them
(``app.dependency_overrides``). The plain predict handler (service/predict_endpoint.py) runs
before FastAPI's routing and reads the same state itself."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from monitoring.snapshot import SharedMonitor
from monitoring.writer import ForecastLog
from service.batching import Batcher
from service.metrics import ServiceMetrics
from service.model_store import ModelStore
from service.monitoring_helper import MonitoringHelper
from service.parsing import BodyParser
from service.reloader import Reloader
from service.settings import ServiceSettings


def get_settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


def get_metrics(request: Request) -> ServiceMetrics:
    return request.app.state.metrics


def get_store(request: Request) -> ModelStore:
    return request.app.state.store


def get_batcher(request: Request) -> Batcher:
    return request.app.state.batcher


def get_reloader(request: Request) -> Reloader:
    return request.app.state.reloader


def get_parser(request: Request) -> BodyParser:
    return request.app.state.parser


def get_forecast_log(request: Request) -> ForecastLog | None:
    return request.app.state.forecast_log


def get_monitoring_helper(request: Request) -> MonitoringHelper:
    return request.app.state.monitoring_helper


def get_shared_monitor(request: Request) -> SharedMonitor | None:
    return request.app.state.shared_monitor


def configured_log(forecast_log: Annotated[ForecastLog | None, Depends(get_forecast_log)]) -> ForecastLog:
    """The forecast log, or 404 when none is configured (/v1/actuals, /v1/monitor)."""
    if forecast_log is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            detail="no forecast log is configured: set FORECAST_LOG_URL (or forecast serve --forecast-log)",
        )
    return forecast_log


Settings = Annotated[ServiceSettings, Depends(get_settings)]
Metrics = Annotated[ServiceMetrics, Depends(get_metrics)]
Store = Annotated[ModelStore, Depends(get_store)]
BatcherDep = Annotated[Batcher, Depends(get_batcher)]
ReloaderDep = Annotated[Reloader, Depends(get_reloader)]
Parser = Annotated[BodyParser, Depends(get_parser)]
OptionalLog = Annotated[ForecastLog | None, Depends(get_forecast_log)]
ConfiguredLog = Annotated[ForecastLog, Depends(configured_log)]
Helper = Annotated[MonitoringHelper, Depends(get_monitoring_helper)]
Monitor = Annotated[SharedMonitor | None, Depends(get_shared_monitor)]
