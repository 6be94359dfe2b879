"""Serving benchmark: this service vs `mlflow models serve --env-manager local`, same model, same
windows, same machine, side by side.

    .venv/bin/python benchmarks/serve_bench.py [--requests 600] [--concurrency 1 8 32]

Without --model-uri it trains the quick LSTM into a temporary SQLite store first. Both servers
get one torch/OMP thread (the machine has 2 cores and the load generator needs one). Prints
requests/s, p50 and p99 per concurrency, their ratios, and the raw forward time per window.
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tracking-uri")
    parser.add_argument("--model-uri")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
