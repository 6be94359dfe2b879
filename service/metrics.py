"""Prometheus metrics, in a registry per app so several apps (tests) never collide.

With several worker processes (`forecast serve --workers N`, or uvicorn's --workers with
PROMETHEUS_MULTIPROC_DIR set), each process writes its values to files in that directory
(prometheus-client's multiprocess mode) and /metrics, answered by whichever worker, adds them all
up: counters and histograms summed, the queue depth summed over live workers, the model version
shown per worker (``pid`` label) so a reload that reached only some of them shows."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess
from prometheus_client.registry import Collector

from monitoring.metrics import LogMetrics

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """The shared metrics directory when this process is one of several workers, else None."""
    return os.environ.get(MULTIPROC_DIR) or os.environ.get(MULTIPROC_DIR.lower()) or None


class LoadMetrics:
    """A loaded model's figures, by what a Reloader keeps current: its version, what runs its
    network, its (re)loads by outcome. ``role``: ``model`` (the served one, as before:
    forecast_model_version ...) or ``challenger`` (forecast_challenger_version ...)."""

    def __init__(self, registry: CollectorRegistry, role: str, version_help: str) -> None:
        self.version = Gauge(
            f"forecast_{role}_version",
            f"{version_help} (0: none or unversioned)",
            ["name"],
            registry=registry,
            multiprocess_mode="liveall",
        )
        self.runtime = Gauge(
            f"forecast_{role}_runtime",
            f"1 for what runs the {role}'s network (runtime: torch or onnx)",
            ["runtime"],
            registry=registry,
            multiprocess_mode="liveall",
        )
        self.reloads = Counter(
            f"forecast_{role}_reloads_total", f"{role.capitalize()} (re)loads by outcome", ["outcome"],
            registry=registry,
        )  # fmt: skip

    def loaded(self, name: str | None, version: str | None, runtime: str) -> None:
        """A new version swapped in: the gauges show it alone."""
        self.reloads.labels("success").inc()
        self.version.clear()
        number = float(version) if version and version.isdigit() else 0.0
        self.version.labels(name or "unregistered").set(number)
        self.runtime.clear()
        self.runtime.labels(runtime).set(1)


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
            "forecast_queue_depth",
            "Windows waiting for a batch",
            registry=self.registry,
            multiprocess_mode="livesum",
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
        # the served model's loads, and the shadow challenger's apart (service/shadow.py): both on /metrics
        self.served = LoadMetrics(self.registry, "model", "Registered version being served")
        self.challenger = LoadMetrics(self.registry, "challenger", "Registered version in shadow")
        self.log = LogMetrics(self.registry)  # the forecast log's and the monitor's
        self.shadow_requests = Counter(
            "forecast_shadow_requests_total",
            "Requests given to the shadow challenger, by outcome (scored, dropped, skipped) and reason",
            ["outcome", "reason"],
            registry=self.registry,
        )
        self.collectors: list[Collector] = []  # computed at scrape time (the monitor's figures)
        self._answered: dict[tuple[str, int], Counter] = {}  # labelled children, bound once
        self._timed: dict[str, Histogram] = {}

    def count_request(self, route: str, status: int, seconds: float) -> None:
        """One answered request, on either request path (the plain predict handler and FastAPI's
        middleware both call this). The labelled children are looked up once per (route, status):
        ``labels`` costs more than the increment on the hot path."""
        counter = self._answered.get((route, status))
        if counter is None:
            counter = self._answered[route, status] = self.requests.labels(route, str(status))
        counter.inc()
        latency = self._timed.get(route)
        if latency is None:
            latency = self._timed[route] = self.latency.labels(route)
        latency.observe(seconds)

    def add_collector(self, collector: Collector) -> None:
        """A collector whose samples are computed elsewhere (the monitor's cached figures): in this
        process's registry, and in the one /metrics builds in multiprocess mode."""
        self.registry.register(collector)
        self.collectors.append(collector)

    def exposition(self) -> bytes:
        """The text /metrics answers: this process's registry, or every worker's values added up."""
        if multiprocess_dir() is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        for collector in self.collectors:
            registry.register(collector)
        return generate_latest(registry)

    @staticmethod
    def process_exited() -> None:
        """A worker that stops drops out of the live gauges (its counters stay counted)."""
        if multiprocess_dir() is not None:
            multiprocess.mark_process_dead(os.getpid())
