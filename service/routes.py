"""Thin routes: validate, hand to the batcher, shape the answer."""

from __future__ import annotations

import asyncio
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from service.batching import Answer, Batcher, NotReadyError, QueueFullError
from service.middleware import ARRIVAL
from service.model_store import ModelStore
from service.schemas import ModelDescription, PredictRequest, PredictResponse
from service.security import require_api_key
from service.validation import windows_for

router = APIRouter()


async def get_store(request: Request) -> ModelStore:
    return request.app.state.store


async def get_batcher(request: Request) -> Batcher:
    return request.app.state.batcher


Store = Annotated[ModelStore, Depends(get_store)]
BatcherDep = Annotated[Batcher, Depends(get_batcher)]


def not_ready(message: str) -> HTTPException:
    return HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail=message, headers={"Retry-After": "5"})


@router.post(
    "/v1/predict",
    response_model=PredictResponse,
    dependencies=[Depends(require_api_key)],
    response_model_exclude_none=True,
)
async def predict(body: PredictRequest, request: Request, store: Store, batcher: BatcherDep) -> JSONResponse:
    """Forecast H steps after each window, in original units."""
    model = store.current
    if model is None:
        raise not_ready("no model is loaded yet")
    settings = request.app.state.settings
    values, timestamps = windows_for(body, model.predictor, settings.max_series_per_request)
    try:
        future = batcher.enqueue(values, timestamps, body.return_attention, request.scope.get(ARRIVAL))
        answer = await asyncio.wait_for(future, settings.request_timeout_s)
    except QueueFullError as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, detail=f"busy: {exc}", headers={"Retry-After": "1"}
        ) from None
    except NotReadyError as exc:
        raise not_ready(str(exc)) from None
    except TimeoutError:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail="timed out waiting for the model",
            headers={"Retry-After": "1"},
        ) from None
    except ValueError as exc:  # validated against one version, batched onto a newer one
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            detail=f"the model changed while this request waited ({exc}); send it again",
            headers={"Retry-After": "1"},
        ) from None
    return JSONResponse(forecast_body(answer, timestamps))


def forecast_body(answer: Answer, timestamps: np.ndarray | None) -> dict[str, object]:
    """The PredictResponse document, built directly: validating our own output through pydantic
    cost as much as the forward pass of a small model."""
    used, prediction = answer.model, answer.prediction
    future = None if timestamps is None else used.predictor.future_times(timestamps[:, -1])
    means = prediction.mean.tolist()
    attention = None if prediction.attention is None else prediction.attention.tolist()
    quantiles = {f"{q:g}": values.tolist() for q, values in prediction.quantiles.items()}
    forecasts = []
    for i, values in enumerate(means):
        forecast: dict[str, object] = {"values": values}
        if future is not None:
            forecast["timestamps"] = [str(t) for t in np.datetime_as_string(future[i], "s")]
        if attention is not None:
            forecast["attention"] = attention[i]
        if quantiles:
            forecast["quantiles"] = {level: rows[i] for level, rows in quantiles.items()}
        forecasts.append(forecast)
    ref = used.ref
    return {
        "model": {"name": ref.name, "version": ref.version, "uri": ref.load_uri, "run_id": ref.run_id},
        "horizon": used.predictor.horizon,
        "forecasts": forecasts,
    }


@router.get("/v1/model", response_model=ModelDescription)
async def describe_model(store: Store) -> ModelDescription:
    """What is being served: version, windows, features, training metrics, device."""
    model = store.current
    if model is None:
        raise not_ready(f"no model is loaded yet; last error: {store.last_error}")
    p, config = model.predictor, model.predictor.config.model
    return ModelDescription(
        name=model.ref.name,
        version=model.ref.version,
        uri=model.ref.uri,
        loaded_uri=model.ref.load_uri,
        run_id=model.ref.run_id,
        family=config.family,
        architecture=config.architecture,
        cell=config.cell,
        bidirectional=config.bidirectional,
        attention=config.attention if config.architecture == "seq2seq" else None,
        lookback=p.lookback,
        horizon=p.horizon,
        features=p.features,
        calendar_features=p.calendar_names,
        frequency=p.frequency,
        training_metrics=model.training_metrics,
        interval_levels=p.interval_levels,
        device=model.device,
        dtype=str(p.dtype).removeprefix("torch."),
        last_reload_error=store.last_error,
    )


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "alive"}


@router.get("/readyz")
async def readyz(store: Store) -> dict[str, str]:
    """Readiness: a model is loaded and answered its warm-up."""
    if store.current is None:
        raise not_ready(f"model not loaded; last error: {store.last_error}")
    return {"status": "ready", "version": str(store.current.ref.version)}


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.post("/v1/admin/reload", dependencies=[Depends(require_api_key)])
async def reload(request: Request) -> dict[str, object]:
    """Re-resolve the model URI now; load, warm and swap in a new version if the alias moved."""
    reloader = request.app.state.reloader
    try:
        changed, message = await reloader.reload_now()
    except Exception as exc:
        serving = request.app.state.store.current
        still = "nothing" if serving is None else f"version {serving.ref.version}"
        raise HTTPException(
            status.HTTP_502_BAD_GATEWAY, detail=f"could not load the new model ({exc}); still serving {still}"
        ) from None
    current = request.app.state.store.current
    return {"changed": changed, "message": message, "version": current.ref.version if current else None}
