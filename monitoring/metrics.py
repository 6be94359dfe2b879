"""The forecast log's and the monitor's Prometheus metrics, registered in the registry the host
process exposes (the service's /metrics)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class LogMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.records = Counter(
            "forecast_log_records_total",
            "Forecasts (one per series) handed to the forecast log, by outcome: written, dropped "
            "(queue full), failed (the database refused or was unreachable), duplicate (a retry of "
            "an Idempotency-Key already logged) or abandoned (still queued when shutdown's budget ran out)",
            ["outcome"],
            registry=registry,
        )
        self.writer_cpu = Counter(
            "forecast_log_writer_cpu_seconds",
            "CPU time the forecast log's writer thread spent building and inserting rows",
            registry=registry,
        )
        self.queue_depth = Gauge(
            "forecast_log_queue_depth",
            "Requests' forecasts waiting for the forecast log's writer",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self.up = Gauge(
            "forecast_log_up",
            "1 while the forecast log's last write succeeded, 0 while it fails",
            registry=registry,
            multiprocess_mode="livemin",
        )
        self.refreshes = Counter(
            "forecast_monitor_refreshes_total",
            "Refreshes of the monitor's gauges by outcome: computed (this process computed the figures "
            "for every process sharing the log), shared (read what another computed) or failed",
            ["outcome"],
            registry=registry,
        )
