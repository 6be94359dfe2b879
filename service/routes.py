"""Thin routes: check the key, read and parse the body, validate against the model, hand to the
batcher, shape the answer. Every error a caller can cause is a 4xx naming the field."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

import numpy as np
import orjson
from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import ClientDisconnect

from service.batching import (
    Answer,
    Batcher,
    ForecastFailedError,
    NonFiniteForecastError,
    QueueFullError,
    ShuttingDownError,
)
from service.middleware import ARRIVAL
from service.model_store import LoadedModel, ModelStore
from service.parsing import ParsedRequest, ParserBusyError, ParseTimeoutError, ProblemItem, RequestProblems
from service.redaction import redact
from service.schemas import Message, ModelDescription, PredictResponse, Readiness, ValidationProblems
from service.security import require_admin, require_api_key
from service.validation import Windows, windows_for

router = APIRouter()


async def get_store(request: Request) -> ModelStore:
    return request.app.state.store


async def get_batcher(request: Request) -> Batcher:
    return request.app.state.batcher


Store = Annotated[ModelStore, Depends(get_store)]
BatcherDep = Annotated[Batcher, Depends(get_batcher)]


def unavailable(message: str, retry_after: int = 1) -> HTTPException:
    return HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE, detail=message, headers={"Retry-After": str(retry_after)}
    )


def not_ready_reason(store: ModelStore) -> str:
    """Why no model is served, in words (never the raw error: it may quote URIs and paths)."""
    reason = store.status.reason or "the model is still loading"
    return f"no model is loaded yet: {reason}; retrying"


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


@router.post(
    "/v1/predict",
    response_model=PredictResponse,
    response_model_exclude_none=True,
    dependencies=[Depends(require_api_key)],
    responses=ERRORS,
    openapi_extra=PREDICT_BODY,
)
async def predict(request: Request, store: Store, batcher: BatcherDep) -> Response:
    """Forecast H steps after each window, in original units. The body is a PredictRequest; it is
    read only after the API key was checked, and parsed off the event loop when large."""
    model = store.current
    if model is None:
        raise unavailable(not_ready_reason(store), retry_after=5)
    content_type = request.headers.get("content-type", "")
    if "json" not in content_type:
        raise HTTPException(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            detail=f"Content-Type is {content_type or 'missing'!r}; send the body as application/json",
        )
    settings = request.app.state.settings
    parsed = await read_body(request, settings.body_timeout_s)
    if parsed is None:  # hung up while sending: nobody to answer
        return Response(status_code=499)
    windows = windows_for(parsed, model.predictor, settings.max_series_per_request)
    answer = await await_forecast(request, batcher, model, windows, parsed.return_attention)
    if answer is None:  # the caller is gone; nobody reads this
        return Response(status_code=499)
    return Response(forecast_body(answer, windows.future), media_type="application/json")


async def read_body(request: Request, timeout: float) -> ParsedRequest | None:
    """The parsed body (None if the client hung up); 408, 413 or 503 when it cannot be had."""
    try:
        async with asyncio.timeout(timeout):  # no task per request, unlike wait_for
            body = await request.body()
        return await request.app.state.parser.parse(body)
    except ClientDisconnect:
        return None
    except TimeoutError:
        late = f"the body did not arrive within {timeout:g} s"
        raise HTTPException(status.HTTP_408_REQUEST_TIMEOUT, detail=late) from None
    except ParseTimeoutError as exc:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, detail=f"{exc}; send fewer series") from None
    except ParserBusyError as exc:
        raise unavailable(f"busy: {exc}") from None


async def await_forecast(
    request: Request, batcher: Batcher, model: LoadedModel, windows: Windows, attention: bool
) -> Answer | None:
    """The batcher's answer for these windows (None if the caller hung up); every way it can fail
    as the 4xx or 503 the caller should see."""
    settings = request.app.state.settings
    try:
        future = batcher.enqueue(
            model, windows.values, windows.timestamps, attention, request.scope.get(ARRIVAL)
        )
        return await answer_unless_gone(request, future, settings.request_timeout_s)
    except QueueFullError as exc:
        raise unavailable(f"busy: {exc}") from None
    except ShuttingDownError as exc:
        raise unavailable(str(exc)) from None
    except TimeoutError:
        raise unavailable("timed out waiting for the model") from None
    except NonFiniteForecastError as exc:
        message = (
            "the forecast from this window is not finite: its values are too far from what the model knows"
        )
        raise RequestProblems(
            [ProblemItem(["series", i, "values"], message, "non_finite_forecast") for i in exc.series]
        ) from None
    except ForecastFailedError as exc:
        message = f"these windows could not be forecast ({redact(str(exc))})"
        raise RequestProblems([ProblemItem(["series"], message, "forecast_failed")]) from None


async def answer_unless_gone(request: Request, future: asyncio.Future, timeout: float) -> Answer | None:
    """The batcher's answer; None if the client disconnected first (its job is then cancelled and
    dropped before the forward pass); TimeoutError after ``timeout`` seconds."""
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait((future, gone), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the server is stopping and gave up waiting for this request
        future.cancel()
        raise ShuttingDownError("the service is shutting down") from None
    finally:
        gone.cancel()
    if future in done:
        return future.result()
    future.cancel()
    if gone in done:
        return None
    raise TimeoutError


async def _disconnected(request: Request) -> None:
    """Returns when the client goes away (the body was read already, so the next message is the
    disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def forecast_body(answer: Answer, future: list[np.ndarray | None]) -> bytes:
    """The PredictResponse document as JSON bytes, encoded by orjson straight from the numpy rows:
    validating our own output through pydantic, or ``tolist`` and the standard json module, cost
    as much as the forward pass of a small model. Values are finite here (checked per job)."""
    used, prediction = answer.model, answer.prediction
    quantiles = {f"{q:g}": np.ascontiguousarray(values) for q, values in prediction.quantiles.items()}
    forecasts = []
    for i, values in enumerate(prediction.mean):
        forecast: dict[str, object] = {"values": values}
        if future[i] is not None:
            forecast["timestamps"] = future[i].astype("datetime64[s]")
        if prediction.attention is not None:
            forecast["attention"] = prediction.attention[i]
        if quantiles:
            forecast["quantiles"] = {level: rows[i] for level, rows in quantiles.items()}
        forecasts.append(forecast)
    ref = used.ref
    document = {
        "model": {"name": ref.name, "version": ref.version, "uri": ref.shown_uri, "run_id": ref.run_id},
        "horizon": used.predictor.horizon,
        "forecasts": forecasts,
    }
    return orjson.dumps(document, option=orjson.OPT_SERIALIZE_NUMPY)


@router.get(
    "/v1/model",
    response_model=ModelDescription,
    dependencies=[Depends(require_api_key)],
    responses={401: ERRORS[401], 503: ERRORS[503]},
)
async def describe_model(store: Store) -> ModelDescription:
    """What is being served: version, windows, features, training metrics, device."""
    model = store.current
    if model is None:
        raise unavailable(not_ready_reason(store), retry_after=5)
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
        calendar_features=p.calendar_names,
        frequency=p.frequency,
        training_metrics=model.training_metrics,
        interval_levels=p.interval_levels,
        device=model.device,
        dtype=str(p.dtype).removeprefix("torch."),
    )


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process answers. It never waits on the registry or the model."""
    return {"status": "alive"}


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(request: Request, store: Store, batcher: BatcherDep) -> JSONResponse:
    """Readiness: a model is loaded and warmed, and the batcher runs. Says why not in words; a
    model still served while the registry cannot be asked is ``stale``."""
    model = store.current
    if model is None:
        body = Readiness(status="not ready", reason=not_ready_reason(store))
        return JSONResponse(body.model_dump(), status_code=503, headers={"Retry-After": "5"})
    if not batcher.alive:
        body = Readiness(status="not ready", reason="the batcher is restarting", version=model.ref.version)
        return JSONResponse(body.model_dump(), status_code=503, headers={"Retry-After": "1"})
    stale = store.status.failures > 0
    reason = None
    if stale:
        since = time.time() - (store.status.last_success or model.loaded_at)
        reason = f"serving version {model.ref.version}; {store.status.reason} for {since:.0f} s"
    return JSONResponse(
        Readiness(status="ready", version=model.ref.version, stale=stale, reason=reason).model_dump()
    )


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.get(
    "/v1/admin/status",
    dependencies=[Depends(require_admin)],
    responses={401: ERRORS[401], 403: {"model": Message, "description": "admin is off: no API_KEY"}},
)
async def admin_status(request: Request, store: Store, batcher: BatcherDep) -> dict[str, object]:
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
async def reload(request: Request) -> dict[str, object]:
    """Re-resolve the model URI now; load, warm and swap in a new version if the alias moved.
    Answers within RELOAD_TIMEOUT_S whatever the registry does."""
    reloader = request.app.state.reloader
    try:
        changed, message = await reloader.reload_now()
    except Exception as exc:
        serving = request.app.state.store.current
        still = "nothing" if serving is None else f"version {serving.ref.version}"
        error = redact(f"{type(exc).__name__}: {exc}")
        raise HTTPException(
            status.HTTP_502_BAD_GATEWAY,
            detail=f"could not load the new model ({error}); still serving {still}",
        ) from None
    current = request.app.state.store.current
    return {
        "changed": changed,
        "message": redact(message),
        "version": current.ref.version if current else None,
    }
