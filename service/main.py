"""The FastAPI app factory. `uvicorn service.main:app` or `forecast serve`.

Nothing is loaded at import time: the lifespan loads the model once, starts the batcher and the
alias watcher, and stops them on shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from service.batching import Batcher
from service.metrics import ServiceMetrics
from service.middleware import ArrivalTracker, BodySizeLimit, RequestMetrics
from service.model_store import ModelStore
from service.routes import router
from service.settings import ServiceSettings
from service.validation import field_name

log = logging.getLogger("service")


class Reloader:
    """Watches the model URI: every ``interval`` seconds, and on demand."""

    def __init__(self, store: ModelStore, metrics: ServiceMetrics, interval: float) -> None:
        self.store, self.metrics, self.interval = store, metrics, interval
        self.task: asyncio.Task | None = None

    async def reload_now(self) -> tuple[bool, str]:
        try:
            changed, message = await asyncio.to_thread(self.store.refresh)
        except Exception:
            self.metrics.reloads.labels("failure").inc()
            raise
        if changed:
            self.metrics.reloads.labels("success").inc()
            ref = self.store.current.ref
            version = float(ref.version) if ref.version and ref.version.isdigit() else 0.0
            self.metrics.model_version.clear()
            self.metrics.model_version.labels(ref.name or ref.uri).set(version)
        return changed, message

    async def watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            with contextlib.suppress(Exception):  # logged and counted in reload_now
                await self.reload_now()

    def start(self) -> None:
        if self.interval > 0:
            self.task = asyncio.create_task(self.watch(), name="model-watcher")

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def create_app(settings: ServiceSettings | None = None) -> FastAPI:
    settings = settings or ServiceSettings()
    metrics = ServiceMetrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        torch.set_num_threads(settings.torch_threads)
        torch.set_flush_denormal(True)
        store = ModelStore(settings.mlflow_tracking_uri, settings.model_uri, settings.device, settings.dtype)
        batcher = Batcher(
            store, metrics, settings.max_batch_windows, settings.max_wait_ms, settings.queue_size
        )
        reloader = Reloader(store, metrics, settings.reload_interval_s)
        app.state.store, app.state.batcher, app.state.reloader = store, batcher, reloader
        try:
            await reloader.reload_now()
        except Exception as exc:  # serve 503s and keep retrying rather than crash-looping
            log.error("starting without a model: %s", exc)
        batcher.start()
        reloader.start()
        yield
        await reloader.stop()
        await batcher.stop()

    app = FastAPI(
        title="Recurrent forecaster",
        description="Forecasts from a registered MLflow model (RNN/LSTM/GRU/seq2seq with attention). "
        "POST windows of the series to /v1/predict; GET /v1/model says what the model expects.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.include_router(router)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_middleware(ArrivalTracker)
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestMetrics, metrics=metrics)
    return app


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 naming each bad field as series[i].values, without echoing the (possibly huge) input."""
    content_type = request.headers.get("content-type", "")
    if "json" not in content_type:
        message = f"Content-Type is {content_type or 'missing'!r}; send the body as application/json"
        return JSONResponse(
            {"detail": [{"loc": ["header", "content-type"], "field": "content-type", "msg": message}]},
            status_code=422,
        )
    detail = []
    for error in exc.errors():
        loc = list(error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        detail.append({"loc": loc, "field": field_name(loc) or "body", "msg": message})
    return JSONResponse({"detail": detail}, status_code=422)


app = create_app()  # settings are read here; the model is loaded by the lifespan, not at import
