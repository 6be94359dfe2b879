"""The monitor's figures as Prometheus gauges, computed off the scrape (monitoring/snapshot.py):
``forecast_monitor_mae{role,model,version,step}`` (step ``all`` for the whole window) and the
other figures alike, ``forecast_monitor_status{...,status}`` = 1, and whether they are current:
``forecast_monitor_stale`` (1: the last refresh failed or none succeeded for 2.5 periods) and
``forecast_monitor_age_seconds``."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from monitoring.snapshot import SharedMonitor

GAUGES = ("count", "mae", "rmse", "mase", "skill_naive", "skill_seasonal_naive", "coverage")


class MonitorCollector(Collector):
    def __init__(self, shared: SharedMonitor | None = None) -> None:
        self.shared = shared

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snapshot = None if self.shared is None else self.shared.snapshot
        if snapshot is None:
            return
        stale = snapshot.stale or self.shared.error is not None
        yield GaugeMetricFamily(
            "forecast_monitor_stale", "1 when the monitor's figures below are not current", value=float(stale)
        )
        age = snapshot.age_now()
        if age is not None:
            yield GaugeMetricFamily(
                "forecast_monitor_age_seconds", "How long ago the monitor's figures were computed", value=age
            )
        document = snapshot.document
        if document is None:
            return
        labels = ["role", "model", "version", "step"]
        families = {
            name: GaugeMetricFamily(
                f"forecast_monitor_{name}", f"Live {name} over the rolling window", labels=labels
            )
            for name in GAUGES
        }
        status = GaugeMetricFamily(
            "forecast_monitor_status",
            "1 for the status of each model version (ok, degraded, insufficient data)",
            labels=["role", "model", "version", "status"],
        )
        for model in document["models"]:
            key = [model["role"], model["name"], model["version"]]
            status.add_metric([*key, model["status"]], 1.0)
            for scored, step in [(model, "all"), *((s, str(s["step"])) for s in model["by_step"])]:
                for name, family in families.items():
                    if scored.get(name) is not None:
                        family.add_metric([*key, step], float(scored[name]))
        yield from families.values()
        yield status
