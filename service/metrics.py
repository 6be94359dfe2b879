"""Prometheus metrics, in a registry per app so several apps (tests, workers) never collide."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "forecast_http_requests_total",
            "HTTP requests by route and status",
            ["route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "forecast_http_request_duration_seconds",
            "Request latency by route",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry,
        )
        self.batch_windows = Histogram(
            "forecast_batch_windows",
            "Windows per forward pass",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "forecast_queue_depth", "Windows waiting for a batch", registry=self.registry
        )
        self.abandoned = Counter(
            "forecast_abandoned_requests_total",
            "Requests dropped before the forward pass because the caller went away",
            registry=self.registry,
        )
        self.failed_requests = Counter(
            "forecast_failed_requests_total",
            "Requests whose own windows could not be forecast, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.batcher_restarts = Counter(
            "forecast_batcher_restarts_total",
            "Times the batcher died and was restarted",
            registry=self.registry,
        )
        self.model_version = Gauge(
            "forecast_model_version",
            "Registered version being served (0: none or unversioned)",
            ["name"],
            registry=self.registry,
        )
        self.reloads = Counter(
            "forecast_model_reloads_total", "Model (re)loads by outcome", ["outcome"], registry=self.registry
        )
