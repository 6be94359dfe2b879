"""Gather concurrent requests into one forward pass: a bounded queue, a maximum batch and a
maximum wait. Each caller gets back exactly its own rows."""

from __future__ import annotations

import asyncio
import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from forecaster.predictor import Prediction
from service.metrics import ServiceMetrics
from service.model_store import LoadedModel, ModelStore


class QueueFullError(Exception):
    """Too many requests are waiting: the caller should retry later (503 + Retry-After)."""


class NotReadyError(Exception):
    """No model is loaded (503)."""


@dataclass
class Job:
    values: np.ndarray  # (n, L, F) raw windows, already cut to L
    timestamps: np.ndarray | None  # (n, L) datetime64, for calendar models
    attention: bool
    future: asyncio.Future = field(repr=False)

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


@dataclass
class Answer:
    prediction: Prediction
    model: LoadedModel


class Batcher:
    def __init__(
        self,
        store: ModelStore,
        metrics: ServiceMetrics,
        max_windows: int,
        max_wait_ms: float,
        queue_size: int,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.max_windows = max_windows
        self.max_wait = max_wait_ms / 1000
        self.queue: asyncio.Queue[Job] = asyncio.Queue(maxsize=queue_size)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="forward")
        self.task: asyncio.Task | None = None
        self._carry: Job | None = None
        self.arriving = 0  # predict requests received but not yet queued (body, validation)

    def arrive(self) -> Arrival:
        """Count a request on its way to the queue, so a forming batch waits for it instead of
        leaving without it. With nobody on the way a batch leaves at once: no added latency."""
        self.arriving += 1
        return Arrival(self)

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name="batcher")

    async def stop(self) -> None:
        if self.task:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        self.executor.shutdown(wait=False, cancel_futures=True)

    def enqueue(
        self,
        values: np.ndarray,
        timestamps: np.ndarray | None,
        attention: bool,
        arrival: Arrival | None = None,
    ) -> asyncio.Future[Answer]:
        """Queue the windows; the returned future resolves to their forecasts."""
        if arrival is not None:
            arrival.leave()
        if not self.store.ready:
            raise NotReadyError("no model is loaded yet")
        job = Job(values, timestamps, attention, asyncio.get_running_loop().create_future())
        try:
            self.queue.put_nowait(job)
        except asyncio.QueueFull:
            raise QueueFullError(f"{self.queue.maxsize} requests are already waiting") from None
        self.metrics.queue_depth.set(self.queue.qsize())
        return job.future

    async def _collect(self) -> list[Job]:
        """The first waiting job, then whatever arrives within max_wait, up to max_windows. A job
        that would overflow the batch is carried over to open the next one."""
        first = self._carry or await self.queue.get()
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
        self.metrics.queue_depth.set(self.queue.qsize())
        return jobs

    async def _next_before(self, deadline: float) -> Job | None:
        """The next queued job; waits (until ``deadline``) only while a request is on its way."""
        loop = asyncio.get_running_loop()
        while True:
            with contextlib.suppress(asyncio.QueueEmpty):
                return self.queue.get_nowait()
            remaining = deadline - loop.time()
            if self.arriving == 0 or remaining <= 0:
                return None
            try:
                return await asyncio.wait_for(self.queue.get(), min(remaining, 0.0005))
            except TimeoutError:
                continue

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = await self._collect()
            model = self.store.current  # the batch runs on this object even if a swap happens now
            try:
                predictions = await loop.run_in_executor(self.executor, forward, model, jobs)
            except Exception as exc:  # reported to every caller of this batch, the loop lives on
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(exc)
                continue
            self.metrics.batch_windows.observe(sum(job.windows for job in jobs))
            for job, prediction in zip(jobs, predictions, strict=True):
                if not job.future.done():  # the caller may have given up
                    job.future.set_result(Answer(prediction, model))


def forward(model: LoadedModel, jobs: list[Job]) -> list[Prediction]:
    """One forward pass over every job's windows, split back per job."""
    values = np.concatenate([job.values for job in jobs])  # (sum n, L, F)
    timestamps = None
    if model.predictor.uses_calendar:
        timestamps = np.concatenate([job.timestamps for job in jobs])
    prediction = model.predict(values, timestamps, attention=any(job.attention for job in jobs))
    bounds = np.cumsum([0, *(job.windows for job in jobs)])
    return [
        Prediction(
            mean=prediction.mean[lo:hi],
            attention=None
            if prediction.attention is None or not job.attention
            else prediction.attention[lo:hi],
            quantiles={q: bound[lo:hi] for q, bound in prediction.quantiles.items()},
        )
        for job, lo, hi in zip(jobs, bounds[:-1], bounds[1:], strict=True)
    ]
