"""A challenger served in shadow: a second model URI, loaded and kept current like the champion
(its own ModelStore and Reloader), scored on the very requests the champion answers, its
forecasts written to the forecast log as role ``challenger`` and never returned. The monitor then
shows both on the same live windows: the next promotion decision, on live data.

Why a thread of its own, behind a bounded queue: the challenger's forward pass must not delay the
champion's answers, nor the log's writer. A full queue drops the request (counted); a challenger
that is not loaded yet, or cannot read a window (other features, a longer look-back than was sent,
another frequency), skips it (counted, with the reason)."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.data.frequency import step_of
from service.forecast_log import ForecastLog, ForecastRecord
from service.metrics import ServiceMetrics
from service.model_store import ALIAS_URI, ModelStore
from service.monitor import CHALLENGER

log = logging.getLogger("service.shadow")


@dataclass
class ShadowJob:
    """What the champion was asked, for the kept series (those logged)."""

    request_id: str
    series_ids: list[str]
    values: list[np.ndarray]  # per series: (T, F) as sent
    future: list[np.ndarray]  # per series: (H_champion,) the champion's forecast timestamps
    frequency: str  # the champion's: the requests were validated against it


class Shadow:
    def __init__(
        self, store: ModelStore, forecast_log: ForecastLog, metrics: ServiceMetrics, max_queued: int = 1000
    ) -> None:
        self.store, self.forecast_log, self.metrics = store, forecast_log, metrics
        self.queue: queue.Queue[ShadowJob | None] = queue.Queue(maxsize=max_queued)
        self.thread: threading.Thread | None = None
        self.counts = {"scored": 0, "dropped": 0, "skipped": 0}

    def submit(self, job: ShadowJob) -> None:
        try:
            self.queue.put_nowait(job)
        except queue.Full:
            self._count("dropped", "queue full")

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="shadow", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        if self.thread is None:
            return
        with contextlib.suppress(queue.Full):
            self.queue.put(None, timeout=timeout / 2)
        self.thread.join(timeout / 2)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every job so far is scored (and handed to the log) or skipped (tests)."""
        import time

        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks > 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _count(self, outcome: str, reason: str) -> None:
        self.counts[outcome] += 1
        self.metrics.shadow_requests.labels(outcome, reason).inc()

    def _run(self) -> None:
        while True:
            job = self.queue.get()
            try:
                if job is None:
                    return
                self._score(job)
            except Exception:  # a challenger that fails must not stop the next jobs
                log.exception("the challenger could not score a request")
                self._count("skipped", "forecast failed")
            finally:
                self.queue.task_done()

    def _score(self, job: ShadowJob) -> None:
        model = self.store.current
        if model is None:
            self._count("skipped", "not loaded")
            return
        predictor = model.predictor
        if predictor.frequency != job.frequency:
            self._count("skipped", "another frequency")
            return
        lookback, features = predictor.lookback, len(predictor.features)
        kept = [
            i for i, v in enumerate(job.values) if v.shape[1] == features and len(v) >= lookback
        ]  # the windows it can read
        if not kept:
            self._count("skipped", "windows it cannot read")
            return
        step = step_of(job.frequency)
        lasts = np.array([(pd.Timestamp(job.future[i][0]) - step).to_datetime64() for i in kept])
        past = np.stack([job.values[i][-lookback:] for i in kept])  # (n, L, F)
        times = None
        if predictor.uses_calendar:
            offsets = [(lookback - 1 - k) * step for k in range(lookback)]
            times = np.array(
                [[(pd.Timestamp(last) - offset).to_datetime64() for offset in offsets] for last in lasts]
            )
        prediction = model.predict(past, times, attention=False)
        future = predictor.future_times(lasts)  # (n, H)
        ref = model.ref
        alias = ALIAS_URI.match(ref.uri)
        self.forecast_log.submit(
            ForecastRecord(
                request_id=job.request_id,
                role=CHALLENGER,
                model_name=ref.name or ref.shown_uri[:200],
                model_version=ref.version or "",
                model_alias=alias["alias"] if alias else "",
                frequency=predictor.frequency,
                series_ids=[job.series_ids[i] for i in kept],
                past_target=past[:, :, 0],
                future_times=list(future),
                mean=prediction.mean,
                quantiles=prediction.quantiles,
                levels=predictor.interval_levels,
            )
        )
        self._count("scored", "")
