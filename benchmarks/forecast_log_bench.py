"""The forecast log's cost on serving (issue 14), run by `serve_bench.py --forecast-log`: the same
API up five times at once, loaded in turn by wrk with the same body (one window with a
``series_id`` and timestamps, so every answered forecast is logged):

  off       no forecast log
  sqlite    FORECAST_LOG_URL=sqlite:///.../forecasts.db
  postgres  a throwaway PostgreSQL (tests/postgres.py; skipped when its binaries are missing)
  refused   a PostgreSQL URL on a port nobody listens on (every write fails at once)
  hanging   a PostgreSQL URL on a socket that accepts and never answers (every write waits for
            the connect timeout: the queue fills and records are dropped)

Scenarios: `wrk -t1 -c32` (throughput) and `wrk -t1 -c1` (latency), --rounds rounds, the server
order reversed every other round. Prints medians of req/s, p50 and p99 per server, each one's
req/s and p99 relative to `off`, and what each log wrote, dropped and failed (from /readyz)."""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import time
from pathlib import Path

import httpx
import numpy as np
from wrk import Wrk, group_cpu_seconds

from tests.conftest import free_port
from tests.postgres import postgres_server, why_unavailable
from tests.servers import prediction_service

SCENARIOS = (("c32", 32), ("c1", 1))
TARGET = 0.10  # the issue's target: the log costs under 10% of throughput


def logged_body(predictor, windows: np.ndarray) -> bytes:
    """One window with a series id and timestamps at the model's frequency."""
    start = np.datetime64("2024-01-01T00:00", "s")
    step = predictor.future_times(np.array([start]))[0, 0] - start
    times = start + step * np.arange(predictor.lookback)
    series = {
        "series_id": "bench",
        "values": windows[0].round(4).tolist(),
        "timestamps": [str(t) for t in np.datetime_as_string(times, "s")],
    }
    return json.dumps({"series": [series]}).encode()


def log_urls(stack: contextlib.ExitStack, workdir: Path) -> dict[str, str | None]:
    urls: dict[str, str | None] = {"off": None, "sqlite": f"sqlite:///{workdir / 'forecasts.db'}"}
    reason = why_unavailable()
    if reason is None:
        urls["postgres"] = stack.enter_context(postgres_server("forecasts"))
    else:
        print(f"postgres: skipped ({reason})")
    urls["refused"] = f"postgresql://bench:pw@127.0.0.1:{free_port()}/forecasts"
    silent = stack.enter_context(socket.socket())
    silent.bind(("127.0.0.1", 0))
    silent.listen(1024)
    urls["hanging"] = f"postgresql://bench:pw@127.0.0.1:{silent.getsockname()[1]}/forecasts"
    return urls


def run(args: argparse.Namespace, workdir: Path, tracking_uri: str, model_uri: str, env: dict) -> None:
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    predictor = mlflow.pyfunc.load_model(model_uri).unwrap_python_model().predictor
    rng = np.random.default_rng(0)
    windows = predictor.scaler.mean[0] + rng.normal(0, 3, size=(4, predictor.lookback))
    body = logged_body(predictor, windows)
    with contextlib.ExitStack() as stack:
        urls = log_urls(stack, workdir)
        servers = {}
        for name, url in urls.items():
            settings = {**env, **({"FORECAST_LOG_URL": url} if url else {})}
            (workdir / name).mkdir(parents=True, exist_ok=True)
            servers[name] = stack.enter_context(
                prediction_service(workdir / name, tracking_uri, model_uri, settings, quiet=True)
            )
        names = list(servers)
        print(
            f"servers up ({', '.join(names)}); model {model_uri} (L={predictor.lookback}, H={predictor.horizon})"
        )
        runs = []
        for round_no in range(0, args.rounds + (1 if args.warmup_seconds else 0)):
            warm = args.warmup_seconds and round_no == 0
            order = names if round_no % 2 == 0 else list(reversed(names))
            for scenario, connections in SCENARIOS:
                for name in order:
                    pid = servers[name].pid
                    before = group_cpu_seconds(pid)
                    seconds = args.warmup_seconds if warm else args.seconds
                    result = Wrk(
                        servers[name] + "/v1/predict", body, connections, seconds, workdir=workdir
                    ).run()
                    cpu = group_cpu_seconds(pid) - before
                    time.sleep(args.pause)
                    if warm:
                        continue
                    runs.append(
                        {
                            "round": round_no,
                            "scenario": scenario,
                            "server": name,
                            **result.as_dict(),
                            "non_2xx": result.non_2xx,
                            "socket_errors": result.socket_errors,
                            "cpu_us_per_request": 1e6 * cpu / result.requests if result.requests else 0.0,
                        }
                    )
            if not warm:
                line = ", ".join(
                    f"{r['scenario']} {r['server']} {r['rps']:.0f}" for r in runs if r["round"] == round_no
                )
                print(f"round {round_no}/{args.rounds} (req/s): {line}", flush=True)
        health = {
            name: httpx.get(servers[name] + "/readyz", timeout=10).json().get("forecast_log")
            for name in names
        }
        for name in names:
            if health[name] is not None:
                metrics = httpx.get(servers[name] + "/metrics", timeout=10).text
                health[name]["writer_cpu_s"] = writer_cpu(metrics)
    report = summarise(runs, names)
    print_report(report, health, args)
    if args.output:
        args.output.write_text(json.dumps({"summary": report, "log_health": health, "runs": runs}, indent=2))
        print(f"\nwrote {args.output}")


def writer_cpu(metrics: str) -> float:
    for line in metrics.splitlines():
        if line.startswith("forecast_log_writer_cpu_seconds_total "):
            return float(line.split()[1])
    return 0.0


def summarise(runs: list[dict], names: list[str]) -> dict[str, dict[str, dict]]:
    summary: dict[str, dict[str, dict]] = {}
    for scenario, _ in SCENARIOS:
        summary[scenario] = {}
        for name in names:
            mine = [r for r in runs if r["scenario"] == scenario and r["server"] == name]
            summary[scenario][name] = {
                "rps": statistics.median(r["rps"] for r in mine),
                "p50_ms": statistics.median(r["latency_ms"]["p50"] for r in mine),
                "p99_ms": statistics.median(r["latency_ms"]["p99"] for r in mine),
                "cpu_us_per_request": statistics.median(r["cpu_us_per_request"] for r in mine),
                "rps_per_round": [r["rps"] for r in mine],
                "errors": sum(r["non_2xx"] + r["socket_errors"] for r in mine),
            }
    return summary


def print_report(summary: dict, health: dict, args: argparse.Namespace) -> None:
    print(
        f"\nmedians of {args.rounds} round(s) of {args.seconds} s; wrk -t1, keep-alive, one logged window per request"
    )
    header = (
        f"{'scenario':<9}{'log':<10}{'req/s':>8} {'vs off':>7} {'p50 ms':>8} {'p99 ms':>8} {'p99 vs off':>10} "
        f"{'CPU us/req':>10} {'errors':>7}  req/s per round"
    )
    print(header)
    print("-" * len(header))
    for scenario, _ in SCENARIOS:
        off = summary[scenario]["off"]
        for name, r in summary[scenario].items():
            per_round = " / ".join(f"{x:.0f}" for x in r["rps_per_round"])
            print(
                f"{scenario:<9}{name:<10}{r['rps']:>8.1f} {r['rps'] / off['rps']:>7.3f} {r['p50_ms']:>8.2f} "
                f"{r['p99_ms']:>8.2f} {r['p99_ms'] / off['p99_ms']:>10.3f} {r['cpu_us_per_request']:>10.0f} "
                f"{r['errors']:>7}  {per_round}"
            )
    print("\nthe logs after the run (/readyz forecast_log):")
    off_cpu = summary["c32"]["off"]["cpu_us_per_request"]
    for name, h in health.items():
        if h is not None:
            per = 1e6 * h["writer_cpu_s"] / h["written"] if h["written"] else 0.0
            share = f", {per:.0f} us of writer CPU per logged forecast = {per / off_cpu:.1%} of off's CPU per request (c32)"
            print(
                f"  {name:<9} {h['status']:<8} written {h['written']}, dropped {h['dropped']}, failed {h['failed']}"
                + (share if h["written"] else "")
            )
    print(f"\ntarget (issue 14): the log costs under {TARGET:.0%} of c32 throughput")
    for name in ("sqlite", "postgres"):
        if name in summary["c32"]:
            cost = 1 - summary["c32"][name]["rps"] / summary["c32"]["off"]["rps"]
            print(f"  {'PASS' if cost < TARGET else 'FAIL'}  {name}: costs {cost:.1%} of off's req/s")
