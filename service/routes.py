"""The routes FastAPI answers: model description, health, readiness, metrics, admin (actuals and the
monitor: service/monitoring_routes.py). Every error a caller can cause is a 4xx naming the field.

POST /v1/predict is answered before routing by ``service.predict_endpoint`` (a plain ASGI handler,
for speed); ``documented`` declares it here, routed first so that it leads the OpenAPI document and
the router answers another method on its path 405 with ``Allow: POST``, as for every route."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Response, status
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from infra.redaction import redact
from monitoring.database import LogUnavailable
from monitoring.snapshot import SharedMonitor
from monitoring.writer import ForecastLog
from service.dependencies import BatcherDep, Metrics, Monitor, OptionalLog, ReloaderDep, Settings, Store
from service.envelope import served_model
from service.model_store import not_ready_reason
from service.schemas import (
    CovariateSpec,
    ForecastLogHealth,
    Message,
    ModelDescription,
    MonitorHealth,
    PredictResponse,
    Readiness,
    ValidationProblems,
)
from service.security import require_admin, require_api_key

router = APIRouter()
documented = APIRouter()  # operations answered before routing (POST never reaches these handlers)


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": Message, "description": "API_KEY is set and the request lacks it"},
    408: {"model": Message, "description": "the body did not arrive within BODY_TIMEOUT_S"},
    413: {"model": Message, "description": "the body is larger than MAX_BODY_BYTES, or too slow to parse"},
    415: {"model": Message, "description": "the body is not sent as application/json"},
    422: {"model": ValidationProblems, "description": "the request, naming each bad field"},
    503: {"model": Message, "description": "no model yet, busy or shutting down; see Retry-After"},
}
PREDICT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PredictRequest"}}},
    }
}


@documented.post(
    "/v1/predict",
    response_model=PredictResponse,
    response_model_exclude_none=True,
    responses=ERRORS,
    openapi_extra=PREDICT_BODY,
)
async def predict() -> None:
    """Forecast H steps after each window, in original units. The body is a PredictRequest; it is
    read only after the API key was checked, and parsed off the event loop when large."""
    raise NotImplementedError("answered by service.predict_endpoint.PredictEndpoint before routing")


@router.get(
    "/v1/model",
    response_model=ModelDescription,
    dependencies=[Depends(require_api_key)],
    responses={401: ERRORS[401], 503: ERRORS[503]},
)
async def describe_model(store: Store) -> ModelDescription:
    """What is being served: version, windows, features, training metrics, device."""
    model = served_model(store)
    p, config = model.predictor, model.predictor.config.model
    return ModelDescription(
        name=model.ref.name,
        version=model.ref.version,
        uri=redact(model.ref.uri),
        loaded_uri=model.ref.shown_uri,
        run_id=model.ref.run_id,
        family=config.family,
        architecture=config.architecture,
        cell=config.cell,
        bidirectional=config.bidirectional,
        attention=config.attention if config.architecture == "seq2seq" else None,
        lookback=p.lookback,
        horizon=p.horizon,
        features=p.features,
        past_covariates=[CovariateSpec(name=name, values=p.lookback) for name in p.features[1:]],
        future_covariates=[CovariateSpec(name=name, values=p.horizon) for name in p.future_covariates],
        panel=p.is_panel,
        calendar_features=p.calendar_names,
        frequency=p.frequency,
        clock=p.clock,
        training_metrics=model.training_metrics,
        interval_levels=p.interval_levels,
        device=model.device,
        dtype=str(p.dtype).removeprefix("torch."),
        runtime=model.runtime,
        runtime_note=model.runtime_note,
    )


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers. It never waits on the registry or the model."""
    return {"status": "alive"}


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(
    store: Store, batcher: BatcherDep, settings: Settings, forecast_log: OptionalLog, shared: Monitor
) -> JSONResponse:
    """Readiness: a model is loaded and warmed, and the batcher runs. Says why not in words; a
    model still served while the registry cannot be asked is ``stale``."""
    model = store.current
    log_health = forecast_log_health(forecast_log)
    monitor = monitor_health(shared)
    if model is None:
        body = Readiness(
            status="not ready",
            reason=not_ready_reason(store, public=settings.api_key is not None),
            forecast_log=log_health,
            monitor=monitor,
        )
        return JSONResponse(readiness(body), status_code=503, headers={"Retry-After": "5"})
    if not batcher.alive:
        body = Readiness(
            status="not ready",
            reason="the batcher is restarting",
            version=model.ref.version,
            forecast_log=log_health,
            monitor=monitor,
        )
        return JSONResponse(readiness(body), status_code=503, headers={"Retry-After": "1"})
    stale = store.status.failures > 0
    reason = None
    if stale:
        since = time.time() - (store.status.last_success or model.loaded_at)
        reason = f"serving version {model.ref.version}; {store.status.reason} for {since:.0f} s"
    ready = Readiness(
        status="ready",
        version=model.ref.version,
        stale=stale,
        reason=reason,
        forecast_log=log_health,
        monitor=monitor,
    )
    return JSONResponse(readiness(ready))


def readiness(body: Readiness) -> dict[str, Any]:
    """The document, without ``forecast_log`` and ``monitor`` when no log is configured."""
    return body.model_dump(exclude={"forecast_log", "monitor"} if body.forecast_log is None else None)


def forecast_log_health(forecast_log: ForecastLog | None) -> ForecastLogHealth | None:
    """The log's state for /readyz: a failing log is reported, never a reason to stop serving."""
    if forecast_log is None:
        return None
    health = forecast_log.health
    error = health.error
    try:  # a deleted or replaced SQLite file shows at once, not at the next write
        forecast_log.database.check_file()
    except LogUnavailable as exc:
        error = str(exc)
    return ForecastLogHealth(
        status="failing" if error else "ok",
        error=error,
        queued=forecast_log.queue.qsize(),
        written=health.written,
        dropped=health.dropped,
        failed=health.failed,
        duplicates=health.duplicates,
        abandoned=health.abandoned,
    )


def monitor_health(shared: SharedMonitor | None) -> MonitorHealth | None:
    return None if shared is None else MonitorHealth(**shared.health())


@router.get("/metrics", include_in_schema=False)
async def metrics(service_metrics: Metrics) -> Response:
    """Prometheus: requests, batches, the served model's and the shadow challenger's loads, the
    forecast log's and the monitor's figures (every worker's, added up: service/metrics.py)."""
    return Response(service_metrics.exposition(), media_type=CONTENT_TYPE_LATEST)


@router.get(
    "/v1/admin/status",
    dependencies=[Depends(require_admin)],
    responses={401: ERRORS[401], 403: {"model": Message, "description": "admin is off: no API_KEY"}},
)
async def admin_status(store: Store, batcher: BatcherDep) -> dict[str, object]:
    """For operators: what is served and the last load attempts in detail (credentials redacted)."""
    model, loading = store.current, store.status
    return {
        "model_uri": redact(store.model_uri),
        "tracking_uri": redact(store.tracking_uri),
        "serving": None if model is None else {"uri": model.ref.shown_uri, "version": model.ref.version},
        "last_attempt": loading.last_attempt,
        "last_success": loading.last_success,
        "consecutive_failures": loading.failures,
        "last_error": loading.error,
        "batcher_alive": batcher.alive,
        "batcher_restarts": batcher.restarts,
        "queued_windows": batcher.queued_windows,
    }


@router.post(
    "/v1/admin/reload",
    dependencies=[Depends(require_admin)],
    responses={
        401: ERRORS[401],
        403: {"model": Message, "description": "admin is off: no API_KEY"},
        502: {"model": Message, "description": "the new model could not be loaded; the old one still serves"},
    },
)
async def reload(reloader: ReloaderDep, store: Store) -> dict[str, object]:
    """Re-resolve the model URI now; load, warm and swap in a new version if the alias moved.
    Answers within RELOAD_TIMEOUT_S whatever the registry does."""
    try:
        changed, message = await reloader.reload_now()
    except Exception as exc:
        serving = store.current
        still = "nothing" if serving is None else f"version {serving.ref.version}"
        error = redact(f"{type(exc).__name__}: {exc}")
        raise HTTPException(
            status.HTTP_502_BAD_GATEWAY,
            detail=f"could not load the new model ({error}); still serving {still}",
        ) from None
    current = store.current
    return {
        "changed": changed,
        "message": redact(message),
        "version": current.ref.version if current else None,
    }
