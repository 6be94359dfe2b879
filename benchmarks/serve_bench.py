"""Serving benchmark: this service vs `mlflow models serve --env-manager local`, same model, same
windows, same machine, side by side; then this service with and without a heavy neighbour.

    .venv/bin/python benchmarks/serve_bench.py [--requests 600] [--concurrency 1 8 32]
        [--rounds 2] [--round-seconds 10]

Without --model-uri it trains the quick LSTM into a temporary SQLite store first. Both servers
get one torch/OMP thread (the machine has 2 cores and the load generator needs one). Prints
requests/s, p50 and p99 per concurrency, their ratios, and the raw forward time per window.

Heavy neighbour (needs `wrk`; --rounds 0 skips it): normal clients (`wrk -t1 -c32`, one window per
request) alone, then the same beside a heavy client (`wrk -c1` looping a ~7.8 MB JSON body the API
reads, parses and rejects with a 4xx), alternating for --rounds rounds each; prints the normal
clients' req/s and p99 in both conditions and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from wrk import Wrk, WrkResult, end_leftovers, ensure_wrk, heavy_rejected_body  # noqa: E402

from tests.servers import mlflow_model_server, prediction_service  # noqa: E402


def train_quick_model(workdir: Path) -> tuple[str, str]:
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "train",
            "--config",
            str(REPO / "pipelines/configs/quick-lstm.yaml"),
            "--register",
            "bench",
            "--tracking-uri",
            uri,
            "--json",
            "--set",
            "train.progress_bar=false",
        ],
        cwd=workdir,
        check=True,
        capture_output=True,
    )
    return uri, "models:/bench@champion"


class Connection:
    """A bare HTTP/1.1 keep-alive connection: the load generator must cost far less CPU than the
    servers it measures (httpx costs ~1 ms a request, as much as the servers themselves)."""

    def __init__(self, host: str, port: int, path: str) -> None:
        self.host, self.port, self.path = host, port, path

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, body: bytes) -> int:
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        await self.reader.readexactly(length)
        return int(status_line.split()[1])

    def close(self) -> None:
        self.writer.close()


async def drive(url: str, bodies: list[bytes], concurrency: int) -> tuple[float, list[float], int]:
    """Send every body once with ``concurrency`` in flight; returns (seconds, latencies, failures)."""
    parsed = httpx.URL(url)
    latencies: list[float] = []
    failures = 0
    pending = list(reversed(bodies))
    connections = [Connection(parsed.host, parsed.port, parsed.path) for _ in range(concurrency)]
    await asyncio.gather(*(c.open() for c in connections))

    async def worker(connection: Connection) -> None:
        nonlocal failures
        while pending:
            body = pending.pop()
            started = time.perf_counter()
            status = await connection.post(body)
            latencies.append(time.perf_counter() - started)
            failures += status != 200

    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in connections))
    seconds = time.perf_counter() - started
    for connection in connections:
        connection.close()
    return seconds, latencies, failures


def summarise(seconds: float, latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "rps": len(latencies) / seconds,
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
    }


def forward_floor(tracking_uri: str, model_uri: str, windows: np.ndarray) -> tuple[float, float]:
    """Median seconds per window for the bare network: one window at a time, and in a batch of 32."""
    import mlflow
    import torch

    torch.set_num_threads(1)
    mlflow.set_tracking_uri(tracking_uri)
    predictor = mlflow.pyfunc.load_model(model_uri).unwrap_python_model().predictor
    single, batched = [], []
    for i in range(200):
        started = time.perf_counter()
        predictor.predict(windows[i % len(windows)][None])
        single.append(time.perf_counter() - started)
    for _ in range(50):
        started = time.perf_counter()
        predictor.predict(windows[:32])
        batched.append((time.perf_counter() - started) / 32)
    return statistics.median(single), statistics.median(batched)


def heavy_neighbour(
    url: str, normal_body: bytes, rounds: int, seconds: int, workdir: Path
) -> dict[str, list[WrkResult]]:
    """Normal clients alone and beside a heavy rejected-body client, alternating, ``rounds`` each."""
    heavy_body = heavy_rejected_body()
    runs: dict[str, list[WrkResult]] = {"alone": [], "heavy": [], "heavy_client": []}
    for _ in range(rounds):
        runs["alone"].append(Wrk(url, normal_body, 32, seconds, workdir=workdir).run())
        # the heavy client starts first and ends last, so it is busy for the whole measured window
        heavy = Wrk(url, heavy_body, 1, seconds + 2, timeout_s=60, workdir=workdir).start()
        time.sleep(1.0)
        runs["heavy"].append(Wrk(url, normal_body, 32, seconds, workdir=workdir).run())
        runs["heavy_client"].append(heavy.result(grace_s=30))
        time.sleep(2.0)  # let the API finish a heavy body still in flight
    return runs


def print_heavy_neighbour(runs: dict[str, list[WrkResult]], seconds: int) -> None:
    print(
        f"\nheavy neighbour: normal clients wrk -t1 -c32, one window each, {seconds} s a round; "
        f"beside them wrk -c1 looping a rejected {len(heavy_rejected_body()) / 1e6:.1f} MB body"
    )
    print(f"{'round':>5} | {'alone rps':>9} {'p99 ms':>7} | {'heavy rps':>9} {'p99 ms':>7} | heavy client")
    for i, (alone, heavy, client) in enumerate(
        zip(runs["alone"], runs["heavy"], runs["heavy_client"], strict=True), 1
    ):
        statuses = ", ".join(f"{k}x{n}" for k, n in sorted(client.statuses.items())) or "none"
        print(
            f"{i:>5} | {alone.rps:>9.1f} {alone.latency_ms['p99']:>7.2f} | {heavy.rps:>9.1f} "
            f"{heavy.latency_ms['p99']:>7.2f} | {client.requests} answers ({statuses}), "
            f"{client.socket_errors} socket errors"
        )
    mean = {k: statistics.mean(r.rps for r in runs[k]) for k in ("alone", "heavy")}
    p99 = {k: statistics.mean(r.latency_ms["p99"] for r in runs[k]) for k in ("alone", "heavy")}
    print(
        f" mean | {mean['alone']:>9.1f} {p99['alone']:>7.2f} | {mean['heavy']:>9.1f} {p99['heavy']:>7.2f} | "
        f"with/without heavy: req/s {mean['heavy'] / mean['alone']:.2f}x, p99 {p99['heavy'] / p99['alone']:.2f}x"
    )
    errors = {k: sum(r.socket_errors + r.non_2xx for r in runs[k]) for k in ("alone", "heavy")}
    if any(errors.values()):
        print(
            f"  normal clients saw errors: {errors['alone']} alone, {errors['heavy']} beside the heavy client"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tracking-uri")
    parser.add_argument("--model-uri")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--rounds", type=int, default=2, help="heavy-neighbour rounds of each kind (0: skip)")
    parser.add_argument("--round-seconds", type=int, default=10)
    args = parser.parse_args()
    if args.rounds:
        ensure_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    if args.model_uri:
        tracking_uri, model_uri = (
            args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db"),
            args.model_uri,
        )
    else:
        print("training the quick LSTM into a temporary store ...", flush=True)
        tracking_uri, model_uri = train_quick_model(workdir)

    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    info = mlflow.pyfunc.load_model(model_uri).unwrap_python_model().predictor
    rng = np.random.default_rng(0)
    windows = info.scaler.mean[0] + rng.normal(0, 3, size=(args.requests, info.lookback))
    ours_bodies = [json.dumps({"series": [{"values": w.tolist()}]}).encode() for w in windows]
    mlflow_bodies = [json.dumps({"inputs": [w.tolist()]}).encode() for w in windows]

    one_thread = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TORCH_THREADS": "1"}
    servers = [
        (
            "ours",
            prediction_service(workdir, tracking_uri, model_uri, one_thread, quiet=True),
            "/v1/predict",
            ours_bodies,
        ),
        (
            "mlflow",
            mlflow_model_server(workdir, tracking_uri, model_uri, one_thread),
            "/invocations",
            mlflow_bodies,
        ),
    ]
    results: dict[str, dict[int, dict[str, float]]] = {}
    neighbour: dict[str, list[WrkResult]] = {}
    for name, server, path, bodies in servers:
        with server as base_url:
            url = base_url + path
            asyncio.run(drive(url, bodies[:50], 4))  # warm-up
            results[name] = {}
            for concurrency in args.concurrency:
                seconds, latencies, failures = asyncio.run(drive(url, bodies, concurrency))
                results[name][concurrency] = summarise(seconds, latencies)
                if failures:
                    print(f"  {name}: {failures} non-200 answers at concurrency {concurrency}")
            if name == "ours" and args.rounds:
                neighbour = heavy_neighbour(url, bodies[0], args.rounds, args.round_seconds, workdir)
            pid = getattr(base_url, "pid", None)
        if pid is not None and (leftovers := end_leftovers(pid)):
            print(f"  {name}: processes it started outlived it by 10 s: {leftovers} (ended by this script)")
    single, batched = forward_floor(tracking_uri, model_uri, windows)

    print(
        f"\nmodel {model_uri} (L={info.lookback}, H={info.horizon}); {args.requests} requests of one window each"
    )
    print(
        f"{'conc':>4} | {'ours rps':>9} {'p50 ms':>7} {'p99 ms':>7} | {'mlflow rps':>10} {'p50 ms':>7} {'p99 ms':>7} "
        f"| {'rps ratio':>9} {'p99 ratio':>9}"
    )
    for concurrency in args.concurrency:
        o, m = results["ours"][concurrency], results["mlflow"][concurrency]
        print(
            f"{concurrency:>4} | {o['rps']:>9.1f} {o['p50_ms']:>7.2f} {o['p99_ms']:>7.2f} | {m['rps']:>10.1f} "
            f"{m['p50_ms']:>7.2f} {m['p99_ms']:>7.2f} | {o['rps'] / m['rps']:>8.2f}x {o['p99_ms'] / m['p99_ms']:>8.2f}x"
        )
    print(
        f"raw network forward per window: {1e3 * single:.3f} ms alone, {1e3 * batched:.4f} ms in a batch of 32"
    )
    if neighbour:
        print_heavy_neighbour(neighbour, args.round_seconds)


if __name__ == "__main__":
    main()
