"""POST /v1/actuals and GET /v1/monitor: the service's door to the forecast log (monitoring/).

Both are closed to strangers by default (service/security.py); compose's proxy does not forward
them. Actuals go through the same HTTP envelope as predict's bodies (service/envelope.py): the key
before a byte of the body is read (401), a declared JSON body (415), read within BODY_TIMEOUT_S
(408) and bounded while it streams in (413), parsed and checked in the parser's helper process
when large (413 when that takes too long, 503 when too many wait); storing and resolving them,
and reading the monitor, run in the monitoring helper process (service/monitoring_helper.py), so
neither holds the event loop nor takes the interpreter from it."""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from forecaster.data.clock import now_on_clock
from infra.redaction import redact
from monitoring.actuals import Served, StrayActuals, UnknownSeries
from monitoring.scoring import Thresholds
from service.actuals import parse_in_worker
from service.dependencies import ConfiguredLog, Helper, Parser, Settings, Store, configured_log
from service.envelope import (
    CLIENT_GONE,
    ClientGone,
    Refusal,
    check_json,
    headers_of,
    parse_body,
    read_body,
    unavailable,
)
from service.model_store import LoadedModel, ModelStore
from service.monitoring_helper import read_monitor, store
from service.parsing import MAX_PROBLEMS, ProblemItem, RequestProblems
from service.schemas import ActualsStored, Message
from service.security import require_monitoring_access

router = APIRouter()

ACTUALS_WAIT_S = 2.0  # the longest POST /v1/actuals waits for the forecasts queued before it

CLOSED: dict[int | str, dict[str, Any]] = {
    401: {"model": Message, "description": "API_KEY is set and the request lacks it"},
    403: {"model": Message, "description": "no API_KEY is set and MONITORING_OPEN_WITHOUT_API_KEY is off"},
    404: {"model": Message, "description": "no forecast log is configured"},
    503: {"model": Message, "description": "the forecast log cannot be reached; see Retry-After"},
}


# first of the routes' checks: without a log there is nothing to open or close (404 before 401/403)
GUARDS = [Depends(configured_log), Depends(require_monitoring_access)]


def log_unavailable(exc: Exception, consequence: str) -> Refusal:
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
        503: {
            "model": Message,
            "description": "the forecast log cannot be reached, or no model is loaded yet to check "
            "the values' times against its frequency; see Retry-After",
        },
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ActualsRequest"}}},
        }
    },
)
async def post_actuals(
    request: Request,
    settings: Settings,
    forecast_log: ConfiguredLog,
    served: Store,
    parser: Parser,
    helper: Helper,
) -> Any:
    """Observed values, joined to every logged forecast step they resolve (by series_id and
    timestamp). Idempotent: a value sent twice is stored once; a new value for a stored time
    replaces it (a correction). Values of a series the log never forecast are refused unless
    ACTUALS_ACCEPT_UNKNOWN_SERIES is set; values off the series' grid at the served model's
    frequency, more than a horizon past its latest forecast, or in the future, always. A bad request stores
    nothing (422 naming the field)."""
    check_json(headers_of(request.scope))
    try:
        body = await read_body(request.receive, settings.max_body_bytes, settings.body_timeout_s)
    except ClientGone:
        return Response(status_code=CLIENT_GONE)  # nobody reads it
    model = served.current  # once: the clock, the grid and the anchor must be the same model's
    parse = functools.partial(parse_in_worker, clock=None if model is None else model.predictor.clock)
    given, where = await parse_body(parser, body, parse, fewer="values")
    serving = served_for_actuals(model)
    await asyncio.to_thread(forecast_log.written_through, ACTUALS_WAIT_S)
    try:
        forecast_log.database.check_file()
        stored = await helper.run(
            store,
            forecast_log.database.url,
            given,
            settings.actuals_accept_unknown_series,
            serving,
            MAX_PROBLEMS,
        )
    except UnknownSeries as exc:
        raise RequestProblems(
            [unknown_series(series_id, where.series[series_id]) for series_id in exc.series_ids]
        ) from None
    except StrayActuals as exc:
        raise RequestProblems(
            [ProblemItem(where.of(stray.position), stray.why, stray.kind) for stray in exc.strays],
            exc.total,
        ) from None
    except Exception as exc:
        raise log_unavailable(exc, "nothing was stored") from None
    return ActualsStored(stored=stored.stored, resolved_steps=stored.resolved_steps)


def served_for_actuals(model: LoadedModel | None) -> Served:
    """What actuals are checked against, from the model the request was parsed for: its
    frequency (the grid), its (name, version) (whose forecasts anchor the grid) and the time now
    on its clock (no value may be later than a step past it). Before a model is loaded there is
    no grid, and a value off it would stop `forecast retrain` for good: a 503 until /readyz is
    ready (as zone-aware timestamps wait for its clock)."""
    if model is None:
        raise unavailable(
            "no model is loaded yet, and actuals are checked against its frequency: retry once "
            "GET /readyz answers 200; nothing was stored",
            retry_after=5,
        )
    predictor = model.predictor
    name, version, _ = model.ref.logged_as
    return Served(predictor.frequency, (name, version), now_on_clock(predictor.clock))


def unknown_series(series_id: str, index: int) -> ProblemItem:
    message = (
        f"the forecast log holds no forecast of series {series_id!r} (never forecast with this series_id, "
        "or its forecasts are past retention): check the id, or set ACTUALS_ACCEPT_UNKNOWN_SERIES=true"
    )
    return ProblemItem(["series", index, "series_id"], message, "unknown_series")


@router.get("/v1/monitor", dependencies=GUARDS, responses=CLOSED)
async def get_monitor(
    settings: Settings,
    forecast_log: ConfiguredLog,
    served: Store,
    helper: Helper,
    series_id: Annotated[
        str | None, Query(min_length=1, max_length=200, description="the figures of this series only")
    ] = None,
) -> JSONResponse:
    """Live forecast quality over the rolling window of resolved forecast steps: count, MAE, RMSE,
    MASE, skill against naive and seasonal naive, interval coverage; overall, per model version
    (champion and shadow challenger) and per horizon step; and a status (ok, degraded,
    insufficient data) against the thresholds in the settings. It reads the window, not the
    log: its cost does not grow with the log."""
    thresholds = Thresholds.from_settings(settings)
    serving = serving_version(served)
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
