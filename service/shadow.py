"""A challenger served in shadow: a second model URI, loaded and kept current like the champion
(its own ModelStore and Reloader), scored on the very requests the champion answers, its
forecasts written to the forecast log as role ``challenger`` and never returned. The monitor then
shows both on the same live windows: the next promotion decision, on live data.

Why a thread of its own, behind a bounded queue: the challenger's forward pass must not delay the
champion's answers, nor the log's writer. A full queue drops the request (counted); a challenger
that is not loaded yet, or cannot read a window (other features, a longer look-back than was sent,
another frequency), skips it (counted, with the reason)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.data.clock import LEGACY
from forecaster.data.frequency import step_of
from forecaster.predictor import Predictor
from monitoring.queue_worker import QueueWorker
from monitoring.scoring import CHALLENGER
from monitoring.writer import ForecastLog
from service.log_records import forecast_record
from service.metrics import ServiceMetrics
from service.model_store import ModelStore

log = logging.getLogger("service.shadow")


@dataclass
class ShadowJob:
    """What the champion was asked, for the kept series (those logged)."""

    request_id: str
    series_ids: list[str]
    values: list[np.ndarray]  # per series: (T, F) as sent
    future: list[np.ndarray]  # per series: (H_champion,) the champion's forecast timestamps
    frequency: str  # the champion's: the requests were validated against it
    covariates: list[dict[str, np.ndarray] | None] = field(default_factory=list)  # per series, as sent
    idempotency_key: str | None = None  # the request's: a retry is logged once, the challenger's part too
    fingerprint: str | None = None  # its body's digest, beside the key
    clock: str = LEGACY  # the champion's training clock: the timestamps are wall times on it


class Shadow(QueueWorker[ShadowJob]):
    name = "shadow"

    def __init__(
        self, store: ModelStore, forecast_log: ForecastLog, metrics: ServiceMetrics, max_queued: int = 1000
    ) -> None:
        super().__init__(max_queued)
        self.store, self.forecast_log, self.metrics = store, forecast_log, metrics
        self.counts = {"scored": 0, "dropped": 0, "skipped": 0}

    def submit(self, job: ShadowJob) -> None:
        if not self.offer(job):
            self._count("dropped", "queue full")

    def _count(self, outcome: str, reason: str) -> None:
        self.counts[outcome] += 1
        self.metrics.shadow_requests.labels(outcome, reason).inc()

    def handle(self, job: ShadowJob) -> None:
        try:
            self._score(job)
        except Exception:  # a challenger that fails must not stop the next jobs
            log.exception("the challenger could not score a request")
            self._count("skipped", "forecast failed")

    def _score(self, job: ShadowJob) -> None:
        model = self.store.current
        if model is None:
            self._count("skipped", "not loaded")
            return
        predictor = model.predictor
        if predictor.frequency != job.frequency:
            self._count("skipped", "another frequency")
            return
        if predictor.clock != job.clock:  # its calendar features would read the stamps shifted
            self._count("skipped", "another clock")
            return
        lookback, features = predictor.lookback, len(predictor.features)
        kept = [
            i for i, v in enumerate(job.values) if v.shape[1] == features and len(v) >= lookback
        ]  # the windows it can read
        if not kept:
            self._count("skipped", "windows it cannot read")
            return
        ahead = None
        if predictor.future_covariates:
            sent = {i: covariates_for(predictor, job, i) for i in kept}
            kept = [i for i in kept if sent[i] is not None]
            if not kept:
                self._count("skipped", "future covariates it needs were not sent")
                return
            ahead = np.stack([sent[i] for i in kept])  # (n, H, Kf)
        step = step_of(job.frequency)
        lasts = np.array([(pd.Timestamp(job.future[i][0]) - step).to_datetime64() for i in kept])
        past = np.stack([job.values[i][-lookback:] for i in kept])  # (n, L, F)
        times = None
        if predictor.uses_calendar:
            offsets = [(lookback - 1 - k) * step for k in range(lookback)]
            times = np.array(
                [[(pd.Timestamp(last) - offset).to_datetime64() for offset in offsets] for last in lasts]
            )
        series_ids: list[str | None] | None = None
        if predictor.is_panel:  # a panel model forecasts a series it knows with its own vector
            series_ids = [job.series_ids[i] for i in kept]
        prediction = model.predict(past, times, attention=False, future=ahead, series_ids=series_ids)
        future = predictor.future_times(lasts)  # (n, H)
        series_ids = [job.series_ids[i] for i in kept]
        record = forecast_record(
            job.request_id, CHALLENGER, model, series_ids, past[:, :, 0], list(future), prediction,
            idempotency_key=job.idempotency_key, fingerprint=job.fingerprint,
        )  # fmt: skip
        self.forecast_log.submit(record)
        self._count("scored", "")


def covariates_for(predictor: Predictor, job: ShadowJob, i: int) -> np.ndarray | None:
    """(H, Kf) the challenger's future covariates for series ``i``, from what was sent to the
    champion; None when a covariate it needs is missing or shorter than its horizon (the
    champion was validated against its own covariates and horizon, not the challenger's)."""
    given = job.covariates[i] if i < len(job.covariates) else None
    names, horizon = predictor.future_covariates, predictor.horizon
    if given is None or any(name not in given or len(given[name]) < horizon for name in names):
        return None
    return np.stack([np.asarray(given[name][:horizon], dtype=np.float64) for name in names], axis=-1)
