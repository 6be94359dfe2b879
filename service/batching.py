"""Gather concurrent requests into one forward pass: a queue bounded in windows, a maximum batch
and a maximum wait. Each caller gets back exactly its own rows, or its own error.

Invariants, where they live:
- Who counts an arrival: ``PredictEndpoint`` from the headers on; ``enqueue`` ends it.
  A forming batch waits (up to max_wait) only while some request is still on its way.
- Which model a job runs on: the one its request was validated against (``Job.model``), even if
  a newer version was swapped in meanwhile; a batch holding both runs once per model.
- One request never hurts another: if a batch's forward pass fails, its jobs are re-run one by
  one, so only the guilty one fails; a forecast that is not finite fails only its own request.
- Callers that went away (their future cancelled) are dropped before the forward pass.
- The batcher task is supervised: if it dies its in-flight callers get an error, readiness is 503
  and it restarts after a short backoff. On shutdown every waiting caller gets ShuttingDownError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from forecaster.predictor import Prediction
from service.metrics import ServiceMetrics
from service.model_store import LoadedModel

log = logging.getLogger("service.batching")


class QueueFullError(Exception):
    """Too many windows are waiting: the caller should retry later (503 + Retry-After)."""


class ShuttingDownError(Exception):
    """The service is stopping or the batcher is restarting (503 + Retry-After)."""


class ForecastFailedError(Exception):
    """This request's own windows made the forward pass fail, alone (422)."""


class NonFiniteForecastError(Exception):
    """The forecast for these windows came out NaN or infinite (422); ``series`` are the indices."""

    def __init__(self, series: list[int]) -> None:
        super().__init__(f"the forecast is not finite for series {series}")
        self.series = series


@dataclass
class Job:
    model: LoadedModel  # validated against this one, so it runs on it
    values: np.ndarray  # (n, L, F) raw windows, already cut to L
    timestamps: np.ndarray | None  # (n, L) datetime64, for calendar models
    attention: bool
    future: asyncio.Future = field(repr=False)
    covariates: np.ndarray | None = None  # (n, H, Kf) future covariates, for models with them
    series_ids: list[str | None] | None = None  # (n,) for panel models: a stored series each

    @property
    def windows(self) -> int:
        return len(self.values)


class Arrival:
    """One request counted in ``Batcher.arriving`` until it is queued or answered."""

    def __init__(self, batcher: Batcher) -> None:
        self.batcher, self.counted = batcher, True

    def leave(self) -> None:
        if self.counted:
            self.counted = False
            self.batcher.arriving -= 1
            self.batcher._wake.set()  # a forming batch may leave now


@dataclass
class Answer:
    prediction: Prediction
    model: LoadedModel


class Batcher:
    def __init__(
        self, metrics: ServiceMetrics, max_windows: int, max_wait_ms: float, max_queued_windows: int
    ) -> None:
        self.metrics = metrics
        self.max_windows = max_windows
        self.max_wait = max_wait_ms / 1000
        self.max_queued_windows = max_queued_windows
        self.queued_windows = 0
        self.queue: asyncio.Queue[Job] = asyncio.Queue()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forward")
        self.task: asyncio.Task | None = None
        self.restarts = 0
        self.stopping = False
        self._carry: Job | None = None
        self._in_flight: list[Job] = []
        self.arriving = 0  # predict requests received but not yet queued (body, validation)
        self._wake = asyncio.Event()  # set when a job is queued or an arrival leaves

    # -- life cycle ---------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self.task is not None and not self.task.done()

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name="batcher")
        self.task.add_done_callback(self._supervise)

    def _supervise(self, task: asyncio.Task) -> None:
        """Restart a batcher that died (backoff 0.1 s doubling to 5 s); fail what it held."""
        if self.stopping or task.cancelled():
            return
        error = task.exception()
        log.error("the batcher stopped (%r); restarting", error, exc_info=error)
        self._fail_in_flight(ShuttingDownError("the batcher restarted; send the request again"))
        self.restarts += 1
        self.metrics.batcher_restarts.inc()
        delay = min(0.1 * 2 ** min(self.restarts - 1, 6), 5.0)
        asyncio.get_running_loop().call_later(delay, self._restart)

    def _restart(self) -> None:
        if not self.stopping:
            self.start()

    async def stop(self) -> None:
        """Stop taking work; every caller still waiting gets ShuttingDownError (503)."""
        self.stopping = True
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        error = ShuttingDownError("the service is shutting down")
        self._fail_in_flight(error)
        while not self.queue.empty():
            self._settle(self.queue.get_nowait(), error)
        self.queued_windows = 0
        self.executor.shutdown(wait=False, cancel_futures=True)

    def _fail_in_flight(self, error: Exception) -> None:
        for job in [*self._in_flight, *([self._carry] if self._carry else [])]:
            self._settle(job, error)
        self._in_flight, self._carry = [], None

    # -- intake -------------------------------------------------------------------------------
    def arrive(self) -> Arrival:
        """Count a request on its way to the queue, so a forming batch waits for it instead of
        leaving without it. With nobody on the way a batch leaves at once: no added latency."""
        self.arriving += 1
        return Arrival(self)

    def enqueue(
        self,
        model: LoadedModel,
        values: np.ndarray,
        timestamps: np.ndarray | None,
        attention: bool,
        arrival: Arrival | None = None,
        covariates: np.ndarray | None = None,
        series_ids: list[str | None] | None = None,
    ) -> asyncio.Future[Answer]:
        """Queue the windows; the returned future resolves to their forecasts. Cancel it when the
        caller goes away: the job is then dropped before the forward pass."""
        if arrival is not None:
            arrival.leave()
        if self.stopping or not self.alive:
            raise ShuttingDownError("the batcher is not running")
        if self.queued_windows + len(values) > self.max_queued_windows:
            raise QueueFullError(f"{self.queued_windows} windows are already waiting")
        job = Job(
            model,
            values,
            timestamps,
            attention,
            asyncio.get_running_loop().create_future(),
            covariates,
            series_ids,
        )
        self.queue.put_nowait(job)
        self._wake.set()
        self.queued_windows += job.windows
        self.metrics.queue_depth.set(self.queued_windows)
        return job.future

    # -- the loop -----------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._in_flight = await self._collect()
            if self._in_flight:
                await self._serve(self._in_flight)
            self._in_flight = []

    async def _collect(self) -> list[Job]:
        """The first waiting job, then whatever arrives within max_wait, up to max_windows. A job
        that would overflow the batch is carried over to open the next one. Abandoned jobs are
        dropped here."""
        first = self._carry or await self._take()
        self._carry = None
        jobs, windows = [first], first.windows
        deadline = asyncio.get_running_loop().time() + self.max_wait
        while windows < self.max_windows:
            job = await self._next_before(deadline)
            if job is None:
                break
            if windows + job.windows > self.max_windows:
                self._carry = job
                break
            jobs.append(job)
            windows += job.windows
        return self._still_wanted(jobs)

    async def _take(self) -> Job:
        return self._taken(await self.queue.get())

    def _taken(self, job: Job) -> Job:
        self.queued_windows -= job.windows
        self.metrics.queue_depth.set(self.queued_windows)
        return job

    def _still_wanted(self, jobs: list[Job]) -> list[Job]:
        wanted = [job for job in jobs if not job.future.done()]
        if len(wanted) < len(jobs):
            self.metrics.abandoned.inc(len(jobs) - len(wanted))
        return wanted

    async def _next_before(self, deadline: float) -> Job | None:
        """The next queued job; waits (until ``deadline``) only while a request is on its way, and
        wakes when one is queued or gives up (``_wake``), not on a poll."""
        loop = asyncio.get_running_loop()
        while True:
            with contextlib.suppress(asyncio.QueueEmpty):
                return self._taken(self.queue.get_nowait())
            remaining = deadline - loop.time()
            if self.arriving == 0 or remaining <= 0:
                return None
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._wake.wait()

    async def _serve(self, jobs: list[Job]) -> None:
        """One forward pass per model among the jobs (almost always one), in the forward thread."""
        loop = asyncio.get_running_loop()
        self.metrics.batch_windows.observe(sum(job.windows for job in jobs))
        for model in {id(job.model): job.model for job in jobs}.values():
            group = [job for job in jobs if job.model is model]
            outcomes = await loop.run_in_executor(self.executor, run_isolated, model, group)
            for job, outcome in zip(group, outcomes, strict=True):
                if isinstance(outcome, Exception):
                    self.metrics.failed_requests.labels(type(outcome).__name__).inc()
                self._settle(job, outcome)

    @staticmethod
    def _settle(job: Job, outcome: Answer | Exception) -> None:
        if job.future.done():  # the caller gave up meanwhile
            return
        if isinstance(outcome, Exception):
            job.future.set_exception(outcome)
        else:
            job.future.set_result(outcome)


def run_isolated(model: LoadedModel, jobs: list[Job]) -> list[Answer | Exception]:
    """The batch's answers; if the shared pass fails, each job alone, so only the guilty fail."""
    try:
        return [
            checked(job, prediction, model)
            for job, prediction in zip(jobs, forward(model, jobs), strict=True)
        ]
    except Exception as exc:
        if len(jobs) == 1:
            log.exception("a forward pass failed for one request")
            return [ForecastFailedError(f"{type(exc).__name__}: {exc}")]
        log.warning("a batch of %d requests failed (%s); retrying them one by one", len(jobs), exc)
    return [run_isolated(model, [job])[0] for job in jobs]


def checked(job: Job, prediction: Prediction, model: LoadedModel) -> Answer | Exception:
    """The job's answer, or NonFiniteForecastError naming its series whose forecast is not finite."""
    finite = np.isfinite(prediction.mean).all(axis=1)
    for bound in prediction.quantiles.values():
        finite &= np.isfinite(bound).all(axis=1)
    if prediction.attention is not None:
        finite &= np.isfinite(prediction.attention).all(axis=(1, 2))
    if not finite.all():
        return NonFiniteForecastError(np.flatnonzero(~finite).tolist())
    return Answer(prediction, model)


def forward(model: LoadedModel, jobs: list[Job]) -> list[Prediction]:
    """One forward pass over every job's windows, split back per job."""
    values = np.concatenate([job.values for job in jobs])  # (sum n, L, F)
    timestamps = None
    if model.predictor.uses_calendar:
        timestamps = np.concatenate([job.timestamps for job in jobs])  # (sum n, L)
    covariates = None
    if model.predictor.future_covariates:
        covariates = np.concatenate([job.covariates for job in jobs])  # (sum n, H, Kf)
    series_ids = None
    if model.predictor.is_panel:  # a window without an id is scaled by itself, as without any
        series_ids = [key for job in jobs for key in (job.series_ids or [None] * job.windows)]
    prediction = model.predict(
        values,
        timestamps,
        attention=any(job.attention for job in jobs),
        future=covariates,
        series_ids=series_ids,
    )
    bounds = np.cumsum([0, *(job.windows for job in jobs)])
    return [
        Prediction(
            mean=prediction.mean[lo:hi],
            attention=None
            if prediction.attention is None or not job.attention
            else prediction.attention[lo:hi],
            quantiles={q: bound[lo:hi] for q, bound in prediction.quantiles.items()},
            spread=None if prediction.spread is None else prediction.spread[lo:hi],
        )
        for job, lo, hi in zip(jobs, bounds[:-1], bounds[1:], strict=True)
    ]
