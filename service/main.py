"""The FastAPI app factory, ``create_app(settings)``: `uvicorn --factory service.main:create_app`
or `forecast serve`. Importing this module builds nothing: settings are read when the factory is
called (from the environment unless given), and routes take what they need through FastAPI
dependencies (service/dependencies.py).

Nothing is loaded when the app is built, and nothing blocks start-up: the lifespan starts the batcher,
the body parser's helper process and the model loader, and returns at once, so the port opens
while the model loads in the background (/healthz answers, /readyz says 503 and why)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from infra.redaction import redact_handlers
from monitoring.collector import MonitorCollector
from monitoring.database import LogDatabase
from monitoring.scoring import Thresholds
from monitoring.snapshot import SharedMonitor
from monitoring.writer import ForecastLog
from service.batching import Batcher
from service.docs import mount_offline_docs
from service.example_window import example_request
from service.metrics import ServiceMetrics
from service.middleware import Envelope
from service.model_store import ModelStore, bound_registry_calls
from service.monitoring_helper import MonitoringHelper, read_monitor
from service.monitoring_routes import router as monitoring_router
from service.monitoring_routes import serving_version
from service.parsing import BodyParser, ProblemItem, RequestProblems
from service.predict_endpoint import PREDICT_PATH, PredictEndpoint
from service.reloader import Reloader
from service.routes import documented, router
from service.schemas import model_schema, request_schemas
from service.settings import ServiceSettings
from service.shadow import Shadow
from service.validation import problem_detail

log = logging.getLogger("service")

DESCRIPTION = (
    "Forecasts from a registered MLflow model (RNN/LSTM/GRU/seq2seq with attention). "
    "POST windows of the series to /v1/predict; GET /v1/model says what the model expects. "
    "The request schema below is narrowed to the model being served (look-back, features)."
)


def service_logging() -> None:
    """The service's own lines (model swaps, load failures, batch retries) at INFO on stderr, beside
    uvicorn's; library loggers keep their levels. Every line the process writes, uvicorn's and
    asyncio's included, goes through ``redact``."""
    logger = logging.getLogger("service")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    root = logging.getLogger()
    if not root.handlers:  # instead of logging's last resort, which writes the bare message
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
    for name in ("service", "", "uvicorn", "uvicorn.error", "uvicorn.access"):
        redact_handlers(logging.getLogger(name))


class ServiceApp(FastAPI):
    """FastAPI, except that POST /v1/predict goes straight to ``PredictEndpoint``, before
    Starlette's middleware stack and routing: that request is the service's hot path."""

    predict_endpoint: PredictEndpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == PREDICT_PATH and scope["method"] == "POST":
            return await self.predict_endpoint(scope, receive, send)
        await super().__call__(scope, receive, send)


def create_app(settings: ServiceSettings | None = None) -> ServiceApp:
    """The app for ``settings`` (default: read from the environment now). Its one lifespan starts
    the batcher, the parser's and the monitoring helpers, the forecast log, the shadow challenger
    and the model loader, and stops them in the reverse order."""
    settings = settings or ServiceSettings()
    service_logging()
    metrics = ServiceMetrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        torch.set_num_threads(settings.torch_threads)
        torch.set_flush_denormal(True)
        bound_registry_calls(settings.registry_timeout_s, settings.registry_retries)
        store = model_store(settings, settings.model_uri)
        batcher = Batcher(
            metrics, settings.max_batch_windows, settings.max_wait_ms, settings.max_queued_windows
        )
        reloader = Reloader(
            store,
            metrics.served,
            settings.reload_interval_s,
            settings.reload_timeout_s,
            settings.load_retry_max_s,
        )
        parser = BodyParser(settings.parse_offload_bytes, settings.parse_timeout_s)
        app.state.store, app.state.batcher, app.state.reloader = store, batcher, reloader
        app.state.parser = parser
        forecast_log = start_forecast_log(settings, metrics)
        app.state.forecast_log = forecast_log
        helper = MonitoringHelper(enabled=forecast_log is not None and settings.parse_offload_bytes > 0)
        app.state.monitoring_helper = helper
        if forecast_log is not None:
            app.state.shared_monitor = shared_monitor(settings, forecast_log, helper, metrics)
            app.state.monitor_collector.shared = app.state.shared_monitor
        shadow, shadow_loader = start_shadow(settings, metrics, forecast_log)
        app.state.shadow = shadow
        parser.start()
        helper.start()
        batcher.start()
        reloader.start()  # loads in the background, retrying with backoff
        gauges = None if forecast_log is None else asyncio.create_task(refresh_monitor(app), name="monitor")
        yield
        if gauges is not None:
            gauges.cancel()
        await reloader.stop()
        await batcher.stop()
        await parser.stop()
        await helper.stop()
        if shadow is not None:
            await shadow_loader.stop()
            await asyncio.to_thread(shadow.stop)
        if forecast_log is not None:
            await asyncio.to_thread(forecast_log.stop)  # within FORECAST_LOG_DRAIN_S; the rest is counted
        metrics.process_exited()

    app = ServiceApp(
        title="Recurrent forecaster",
        description=DESCRIPTION,
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.forecast_log = None
    app.state.shared_monitor = None
    app.state.shadow = None
    app.state.monitor_collector = MonitorCollector()
    metrics.add_collector(app.state.monitor_collector)
    app.predict_endpoint = PredictEndpoint(app.state, settings, metrics)
    app.include_router(documented)  # first: predict leads /docs; GET on it is 405, not 404 (routes.py)
    app.include_router(router)
    app.include_router(monitoring_router)
    mount_offline_docs(app)
    app.openapi = model_openapi(app)  # type: ignore[method-assign]
    app.add_exception_handler(RequestProblems, request_problems)
    app.add_exception_handler(RequestValidationError, validation_error)
    routes = [*router.routes, *monitoring_router.routes]
    paths = frozenset(route.path for route in routes if hasattr(route, "path")) | {PREDICT_PATH}
    app.add_middleware(Envelope, metrics=metrics, max_bytes=settings.max_body_bytes, paths=paths)
    return app


PROTECTED = ("/v1/predict", "/v1/model", "/v1/actuals", "/v1/monitor", "/v1/admin/status", "/v1/admin/reload")


def model_store(settings: ServiceSettings, model_uri: str) -> ModelStore:
    """The store of the served model or of the shadow challenger: the same registry, device,
    dtype and inference runtime for both, so the two are compared like for like."""
    return ModelStore(
        settings.mlflow_tracking_uri,
        model_uri,
        settings.device,
        settings.dtype,
        runtime=settings.inference_runtime,
    )


def start_forecast_log(settings: ServiceSettings, metrics: ServiceMetrics) -> ForecastLog | None:
    """The forecast log's writer, when FORECAST_LOG_URL is set. Creating it touches no database
    (the writer migrates it on first use): an unreachable one shows in /readyz and the metrics,
    and predictions go on."""
    if not settings.forecast_log_url:
        return None
    forecast_log = ForecastLog(
        LogDatabase(settings.forecast_log_url),
        metrics.log,
        settings.forecast_log_queue,
        settings.forecast_log_batch,
        settings.forecast_log_retention_days,
        settings.forecast_log_max_steps,
        settings.forecast_log_wait_ms / 1000,
        settings.forecast_log_idempotency_hours,
        settings.forecast_log_drain_s,
    )
    forecast_log.start()
    log.info("logging forecasts to %s", forecast_log.shown_url)
    return forecast_log


def shared_monitor(
    settings: ServiceSettings, forecast_log: ForecastLog, helper: MonitoringHelper, metrics: ServiceMetrics
) -> SharedMonitor:
    """The monitor's gauges, computed in the monitoring helper when it is their turn."""
    thresholds = Thresholds.from_settings(settings)
    url = forecast_log.database.url

    def compute(serving: tuple[str, str] | None) -> dict[str, Any]:
        forecast_log.database.check_file()
        return helper.call(read_monitor, url, thresholds, serving)

    return SharedMonitor(forecast_log.database, thresholds, settings.monitor_refresh_s, metrics.log, compute)


def start_shadow(
    settings: ServiceSettings, metrics: ServiceMetrics, forecast_log: ForecastLog | None
) -> tuple[Shadow | None, Reloader | None]:
    """The challenger in shadow (CHALLENGER_MODEL_URI), loaded in the background like the champion
    and re-resolved as often; its loads, version and runtime are counted apart from the served
    model's (forecast_challenger_* on /metrics)."""
    if not settings.challenger_model_uri:
        return None, None
    if forecast_log is None:
        log.warning("CHALLENGER_MODEL_URI is set but no FORECAST_LOG_URL: the challenger is not loaded")
        return None, None
    store = model_store(settings, settings.challenger_model_uri)
    loader = Reloader(
        store,
        metrics.challenger,  # on /metrics beside the served model's, named forecast_challenger_*
        settings.reload_interval_s,
        settings.reload_timeout_s,
        settings.load_retry_max_s,
    )
    shadow = Shadow(store, forecast_log, metrics, settings.shadow_queue)
    shadow.start()
    loader.start()
    return shadow, loader


async def refresh_monitor(app: FastAPI) -> None:
    """Refresh the monitor's Prometheus gauges every MONITOR_REFRESH_S, off the scrape: computed
    by one process per period for every process sharing the log (monitoring/snapshot.py). A failed
    refresh is counted and shown (stale gauges, /readyz); its first line is logged once per spell."""
    shared: SharedMonitor = app.state.shared_monitor
    failing = False
    while True:
        await asyncio.sleep(app.state.settings.monitor_refresh_s)
        try:
            await asyncio.to_thread(shared.refresh, serving_version(app.state.store))
        except Exception:
            if not failing:
                log.error("the monitor's gauges could not be refreshed: %s", shared.error)
            failing = True
            continue
        if failing:
            log.info("the monitor's gauges are refreshed again")
        failing = False


def model_openapi(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The OpenAPI document with the request schema narrowed to the served model (rebuilt when
    another version is swapped in), and the API key as a security scheme when one is set."""
    built: dict[str | None, dict[str, Any]] = {}

    def openapi() -> dict[str, Any]:
        store = getattr(app.state, "store", None)
        model = None if store is None else store.current
        key = None if model is None else model.ref.load_uri
        if key not in built:
            built.clear()
            built[key] = build_openapi(app, None if model is None else model.predictor)
        return built[key]

    return openapi


def build_openapi(app: FastAPI, predictor: Any | None) -> dict[str, Any]:
    settings: ServiceSettings = app.state.settings
    document = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    components = request_schemas()
    if predictor is not None:
        p = predictor
        components = model_schema(
            components,
            p.lookback,
            len(p.features),
            settings.max_series_per_request,
            p.uses_calendar,
            p.future_covariates,
            p.horizon,
            p.has_attention,
        )
        # with a key set the document is public but training statistics are not: a neutral example
        components["PredictRequest"]["examples"] = [example_request(p, plausible=not settings.api_key)]
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(components)
    if settings.api_key:
        document["components"]["securitySchemes"] = {
            "APIKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}
        }
        for path in PROTECTED:
            for operation in document["paths"].get(path, {}).values():
                operation["security"] = [{"APIKey": []}]
    return document


async def request_problems(request: Request, exc: Exception) -> JSONResponse:
    """422 naming each bad field as series[i].values[j], without echoing the (possibly huge) input."""
    assert isinstance(exc, RequestProblems)
    return JSONResponse({"detail": problem_detail(exc.problems)}, status_code=422)


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's own validation (query or path parameters) in the same shape as ours."""
    assert isinstance(exc, RequestValidationError)
    problems = [
        ProblemItem([p for p in error["loc"] if p != "body"], error["msg"], error["type"])
        for error in exc.errors()
    ]
    return JSONResponse({"detail": problem_detail(problems)}, status_code=422)
