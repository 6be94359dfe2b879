"""POST /v1/actuals and GET /v1/monitor: the service's door to the forecast log (monitoring/).

Both are closed to strangers by default (service/security.py); compose's proxy does not forward
them. Actuals are read as predict's bodies are: a declared JSON body (415), within BODY_TIMEOUT_S
(408), parsed and checked in the parser's helper process when large; storing and resolving them,
and reading the monitor, run in the monitoring helper process (service/monitoring_helper.py), so
neither holds the event loop nor takes the interpreter from it."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from fastapi.responses import JSONResponse
from starlette.requests import ClientDisconnect

from forecaster.redaction import redact
from monitoring.actuals import ActualValues, UnknownSeries
from monitoring.scoring import Thresholds
from monitoring.writer import ForecastLog
from service.actuals import parse_in_worker
from service.model_store import ModelStore
from service.monitoring_helper import MonitoringHelper, read_monitor, store
from service.parsing import (
    BodyParser,
    ParserBusyError,
    ParseTimeoutError,
    ProblemItem,
    RequestProblems,
    declares_json,
)
from service.schemas import ActualsStored, Message
from service.security import require_monitoring_access

router = APIRouter()

ACTUALS_WAIT_S = 2.0  # the longest POST /v1/actuals waits for the forecasts queued before it
CLIENT_GONE = 499

CLOSED = {
    401: {"model": Message, "description": "API_KEY is set and the request lacks it"},
    403: {"model": Message, "description": "no API_KEY is set and MONITORING_OPEN_WITHOUT_API_KEY is off"},
    404: {"model": Message, "description": "no forecast log is configured"},
    503: {"model": Message, "description": "the forecast log cannot be reached; see Retry-After"},
}


def unavailable(message: str, retry_after: int = 1) -> HTTPException:
    return HTTPException(
        status.HTTP_503_SERVICE_UNAVAILABLE, detail=message, headers={"Retry-After": str(retry_after)}
    )


def configured_log(request: Request) -> ForecastLog:
    forecast_log = request.app.state.forecast_log
    if forecast_log is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            detail="no forecast log is configured: set FORECAST_LOG_URL (or forecast serve --forecast-log)",
        )
    return forecast_log


async def log_configured(request: Request) -> None:
    """First of the routes' checks: without a log there is nothing to open or close."""
    configured_log(request)


GUARDS = [Depends(log_configured), Depends(require_monitoring_access)]


def log_unavailable(exc: Exception, consequence: str) -> HTTPException:
    error = redact(f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
    return unavailable(f"the forecast log cannot be used ({error}); {consequence}", retry_after=5)


@router.post(
    "/v1/actuals",
    response_model=ActualsStored,
    dependencies=GUARDS,
    responses={
        **CLOSED,
        408: {"model": Message, "description": "the body did not arrive within BODY_TIMEOUT_S"},
        413: {
            "model": Message,
            "description": "the body is larger than MAX_BODY_BYTES, or too slow to parse",
        },
        415: {"model": Message, "description": "the body is not sent as application/json"},
        422: {"description": "the request, naming each bad field (nothing is stored)"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ActualsRequest"}}},
        }
    },
)
async def post_actuals(request: Request) -> Any:
    """Observed values, joined to every logged forecast step they resolve (by series_id and
    timestamp). Idempotent: a value sent twice is stored once; a new value for a stored time
    replaces it (a correction). Values of a series the log never forecast are refused unless
    ACTUALS_ACCEPT_UNKNOWN_SERIES is set. A bad request stores nothing (422 naming the field)."""
    settings = request.app.state.settings
    forecast_log = configured_log(request)
    content_type = request.headers.get("content-type", "")
    if not declares_json(content_type):
        detail = f"Content-Type is {content_type or 'missing'!r}; send the body as application/json"
        raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, detail=detail)
    try:
        async with asyncio.timeout(settings.body_timeout_s):
            body = await request.body()
    except TimeoutError:
        raise HTTPException(
            status.HTTP_408_REQUEST_TIMEOUT,
            detail=f"the body did not arrive within {settings.body_timeout_s:g} s",
        ) from None
    except ClientDisconnect:
        return Response(status_code=CLIENT_GONE)  # nobody reads it
    given, where = await parse_body(request.app.state.parser, body)
    await asyncio.to_thread(forecast_log.written_through, ACTUALS_WAIT_S)
    helper: MonitoringHelper = request.app.state.monitoring_helper
    try:
        forecast_log.database.check_file()
        stored = await helper.run(
            store, forecast_log.database.url, given, settings.actuals_accept_unknown_series
        )
    except UnknownSeries as exc:
        raise RequestProblems(
            [unknown_series(series_id, where[series_id]) for series_id in exc.series_ids]
        ) from None
    except Exception as exc:
        raise log_unavailable(exc, "nothing was stored") from None
    return ActualsStored(stored=stored.stored, resolved_steps=stored.resolved_steps)


async def parse_body(parser: BodyParser, body: bytes) -> tuple[ActualValues, dict[str, int]]:
    try:
        return await parser.parse(body, parse_in_worker)
    except ParseTimeoutError as exc:
        raise HTTPException(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, detail=f"{exc}; send fewer values"
        ) from None
    except ParserBusyError as exc:
        raise unavailable(f"busy: {exc}") from None


def unknown_series(series_id: str, index: int) -> ProblemItem:
    message = (
        f"the forecast log holds no forecast of series {series_id!r} (never forecast with this series_id, "
        "or its forecasts are past retention): check the id, or set ACTUALS_ACCEPT_UNKNOWN_SERIES=true"
    )
    return ProblemItem(["series", index, "series_id"], message, "unknown_series")


@router.get("/v1/monitor", dependencies=GUARDS, responses=CLOSED)
async def get_monitor(
    request: Request,
    series_id: Annotated[
        str | None, Query(min_length=1, max_length=200, description="the figures of this series only")
    ] = None,
) -> JSONResponse:
    """Live forecast quality over the rolling window of resolved forecast steps: count, MAE, RMSE,
    MASE, skill against naive and seasonal naive, interval coverage; overall, per model version
    (champion and shadow challenger) and per horizon step; and a status (ok, degraded,
    insufficient data) against the thresholds in the settings. It reads the window, not the
    log: its cost does not grow with the log."""
    forecast_log = configured_log(request)
    thresholds = Thresholds.from_settings(request.app.state.settings)
    serving = serving_version(request.app.state.store)
    helper: MonitoringHelper = request.app.state.monitoring_helper
    try:
        forecast_log.database.check_file()
        document = await helper.run(read_monitor, forecast_log.database.url, thresholds, serving, series_id)
    except Exception as exc:
        raise log_unavailable(exc, "try again later") from None
    return JSONResponse(document)


def serving_version(store: ModelStore | None) -> tuple[str, str] | None:
    """(name, version) of the served model, when it is a registered version."""
    model = None if store is None else store.current
    return None if model is None or model.ref.version is None else (model.ref.name, model.ref.version)
