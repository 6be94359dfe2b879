"""POST /v1/predict as a plain ASGI handler, in front of FastAPI.

Why: measured with a C load generator (benchmarks/serve_bench.py) and py-spy, FastAPI's
per-request machinery (routing, dependency resolution, the Request object, a middleware stack)
cost several times what a forecast request needs beside the forward pass. This handler takes the
same steps, in the same order, with the same answers, on the raw ASGI messages; every other path
goes to FastAPI as before (``service.main.ServiceApp`` dispatches). The operation is documented
by FastAPI all the same (``routes.documented``); tests/service hold its contract.

The steps, each answering as FastAPI's routes do: the checks every route makes are the HTTP
envelope's (service/envelope.py, service/security.py's ``check_key``), which FastAPI's side calls
too, and requests are counted by the same ``ServiceMetrics.count_request``:
  413 the declared Content-Length is over MAX_BODY_BYTES (before anything else, as a proxy would)
  401 API_KEY is set and the request lacks it (before one byte of the body is read)
  422 an Idempotency-Key header that is not 1-200 printable ASCII characters
  503 no model is loaded yet (Retry-After)
  415 the body is not declared as JSON
  408 the body did not arrive within BODY_TIMEOUT_S; 413 it grew past MAX_BODY_BYTES
  422 the body does not parse, or does not fit the model (naming each field); 413/503 from the
      parser helper for huge bodies
  503/422 from the batcher (busy, shutting down, or this request's own windows failed)
  200 the forecasts, encoded by orjson straight from numpy
A client that hangs up is answered 499 (nobody reads it) and its job is dropped before the
forward pass."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from typing import Any

from starlette.datastructures import State
from starlette.types import Receive, Scope, Send

from infra.redaction import redact
from monitoring.scoring import CHAMPION
from monitoring.writer import ForecastLog
from service.batching import (
    Answer,
    Batcher,
    ForecastFailedError,
    NonFiniteForecastError,
    QueueFullError,
    ShuttingDownError,
)
from service.envelope import (
    CLIENT_GONE,
    JSON,
    TEXT,
    ClientGone,
    Refusal,
    check_declared_length,
    check_json,
    headers_of,
    parse_body,
    read_body,
    send_bytes,
    send_json,
    send_refusal,
    served_model,
    unavailable,
)
from service.log_records import forecast_record
from service.metrics import ServiceMetrics
from service.parsing import ParsedRequest, ProblemItem, RequestProblems
from service.request_ids import next_request_id
from service.responses import forecast_body
from service.security import check_key
from service.settings import ServiceSettings
from service.shadow import Shadow, ShadowJob
from service.validation import Windows, problem_detail, windows_for

log = logging.getLogger("service.predict")

PREDICT_PATH = "/v1/predict"


class PredictEndpoint:
    """Answers POST /v1/predict (``ServiceApp`` hands it those requests). The store, batcher and
    parser are read from the app's ``state`` per request: the lifespan creates them."""

    def __init__(self, state: State, settings: ServiceSettings, metrics: ServiceMetrics) -> None:
        self.state, self.settings, self.metrics = state, settings, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status = 500
        try:
            status = await self.answer(scope, receive, send)
        finally:
            self.metrics.count_request(PREDICT_PATH, status, time.perf_counter() - started)

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> int:
        """Handle one request; returns the status sent (or CLIENT_GONE)."""
        try:
            body, extra = await self.forecast(scope, receive)
        except Refusal as refusal:
            return await send_refusal(send, refusal)
        except RequestProblems as exc:
            return await send_json(send, 422, {"detail": problem_detail(exc.problems)})
        except ClientGone:
            return CLIENT_GONE
        except Exception:
            log.exception("predict failed")
            return await send_bytes(send, 500, b"Internal Server Error", TEXT)
        return await send_bytes(send, 200, body, JSON, *extra)

    async def forecast(self, scope: Scope, receive: Receive) -> tuple[bytes, tuple[tuple[bytes, bytes], ...]]:
        """The 200 body and its extra headers, or Refusal / RequestProblems / ClientGone."""
        settings = self.settings
        headers = headers_of(scope)
        check_declared_length(headers.get(b"content-length"), settings.max_body_bytes)
        check_key(settings.api_key, headers)
        idempotency_key = checked_idempotency_key(headers.get(b"idempotency-key"))
        model = served_model(self.state.store)
        check_json(headers)
        batcher: Batcher = self.state.batcher
        arrival = batcher.arrive()  # a forming batch waits for this request while it is read
        try:
            body = await read_body(receive, settings.max_body_bytes, settings.body_timeout_s)
            # what the log compares a repeated Idempotency-Key by (a retry sends the same body)
            fingerprint = None if idempotency_key is None else hashlib.sha256(body).hexdigest()[:32]
            parsed = await parse_body(self.state.parser, body)
            windows = windows_for(parsed, model.predictor, self.settings.max_series_per_request)
            future = self.enqueue(batcher, model, windows, parsed.return_attention, arrival)
        finally:
            arrival.leave()
        answer = await self.await_answer(future, receive)
        body = forecast_body(answer, windows.future)
        forecast_log: ForecastLog | None = self.state.forecast_log
        if forecast_log is None:
            return body, ()
        request_id = self.log_forecasts(forecast_log, parsed, windows, answer, idempotency_key, fingerprint)
        return body, () if request_id is None else ((b"x-request-id", request_id.encode()),)

    def log_forecasts(
        self,
        forecast_log: ForecastLog,
        parsed: ParsedRequest,
        windows: Windows,
        answer: Answer,
        idempotency_key: str | None = None,
        fingerprint: str | None = None,
    ) -> str | None:
        """Hand the answered forecasts of series with a ``series_id`` and timestamps to the forecast
        log (a queue: nothing is written here); returns the request id they are logged under. With
        an ``Idempotency-Key``, the log writes a request's forecasts once however often it is
        retried. Never raises: the answer is already made and the log must not cost it."""
        try:
            keep = [
                i
                for i, series in enumerate(parsed.series)
                if series.series_id is not None and windows.future[i] is not None
            ]
            if not keep:
                return None
            request_id = next_request_id()
            series_ids = [parsed.series[i].series_id or "" for i in keep]
            rows = slice(None) if len(keep) == len(parsed.series) else keep  # views when all are kept
            record = forecast_record(
                request_id, CHAMPION, answer.model, series_ids, windows.values[rows, :, 0],
                [windows.future[i] for i in keep], answer.prediction, rows, idempotency_key, fingerprint,
            )  # fmt: skip
            forecast_log.submit(record)
            shadow: Shadow | None = self.state.shadow
            if shadow is not None:
                shadow.submit(
                    ShadowJob(
                        request_id,
                        series_ids,
                        [parsed.series[i].values for i in keep],
                        [windows.future[i] for i in keep],
                        answer.model.predictor.frequency,
                        [parsed.series[i].future for i in keep],
                        idempotency_key,
                        fingerprint,
                        answer.model.predictor.clock,
                    )
                )
            return request_id
        except Exception:
            log.exception("could not hand a forecast to the forecast log")
            return None

    # -- the steps only predict takes ------------------------------------------------------------
    @staticmethod
    def enqueue(batcher: Batcher, model: Any, windows: Any, attention: bool, arrival: Any) -> asyncio.Future:
        try:
            return batcher.enqueue(
                model,
                windows.values,
                windows.timestamps,
                attention,
                arrival,
                windows.covariates,
                windows.series_ids,
            )
        except QueueFullError as exc:
            raise unavailable(f"busy: {exc}") from None
        except ShuttingDownError as exc:
            raise unavailable(str(exc)) from None

    async def await_answer(self, future: asyncio.Future, receive: Receive) -> Answer:
        """The batcher's answer. A hang-up cancels the job (dropped before the forward pass); the
        body was read already, so the next message ``receive`` gives is the disconnect."""
        gone = asyncio.ensure_future(receive())
        gone.add_done_callback(lambda _: future.cancel())  # no-op once the answer is in
        try:
            async with asyncio.timeout(self.settings.request_timeout_s):
                return await future
        except asyncio.CancelledError:
            if gone.done() and not gone.cancelled():
                raise ClientGone from None
            future.cancel()  # the server is stopping and gave up waiting for this request
            raise unavailable("the service is shutting down") from None
        except TimeoutError:
            future.cancel()
            raise unavailable("timed out waiting for the model") from None
        except ShuttingDownError as exc:  # the batcher stopped or restarted with this job in it
            raise unavailable(str(exc)) from None
        except NonFiniteForecastError as exc:
            message = (
                "the forecast from this window is not finite: its values are too far from what the "
                "model knows"
            )
            kind = "non_finite_forecast"
            problems = [ProblemItem(["series", i, "values"], message, kind) for i in exc.series]
            raise RequestProblems(problems) from None
        except ForecastFailedError as exc:
            message = f"these windows could not be forecast ({redact(str(exc))})"
            raise RequestProblems([ProblemItem(["series"], message, "forecast_failed")]) from None
        finally:
            gone.cancel()


IDEMPOTENCY_KEY = re.compile(rb"^[\x21-\x7e]{1,200}$")  # printable ASCII, no blanks


def checked_idempotency_key(raw: bytes | None) -> str | None:
    """The request's Idempotency-Key, or a 422 naming the header."""
    if raw is None:
        return None
    if not IDEMPOTENCY_KEY.match(raw):
        message = "1 to 200 printable ASCII characters without blanks (a UUID, say)"
        raise RequestProblems([ProblemItem(["headers", "Idempotency-Key"], message, "invalid")])
    return raw.decode("ascii")
