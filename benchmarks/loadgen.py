"""A closed-loop HTTP load generator in Python, for machines without `wrk` (the accelerator
machine has none and cannot install it): ``connections`` keep-alive connections, each posting the
same JSON body again as soon as its answer is in, for ``seconds`` after ``warmup`` seconds.

    .venv/bin/python benchmarks/loadgen.py http://127.0.0.1:8000/v1/predict --lookback 28 \\
        --connections 32 --seconds 5 [--warmup 1] [--body-file body.json] [--json]

Prints req/s, latency p50 / p90 / p99 / max, the answers by status, socket errors and timeouts,
and this client's own CPU per request. Raw sockets on asyncio (uvloop when installed): no HTTP
library's per-request work.

Its limit: it is one Python process on one core. Where the server answers faster than the client
can ask, the figure is the client's, not the server's; a Python client runs out near the rate of
a Python server such as this service. Its CPU per request says where that is: about
1e6 / (CPU us per request) requests a second at most. `benchmarks/gpu_check.py` measures it
against the HTTP floor (`floor_app.py`) and prints it beside the service's figures; `wrk` (C,
`benchmarks/wrk.py`) remains what the CPU benchmarks use.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from wrk import check_loopback, window_body  # noqa: E402 - benchmarks/, the script's folder

TIMEOUT_S = 10.0  # an answer slower than this counts as a timeout and its connection is reopened


@dataclass
class LoadResult:
    """One closed-loop run: the answers completed inside the measured window, and what they took."""

    connections: int
    duration_s: float
    requests: int
    statuses: dict[str, int]
    errors: dict[str, int]
    latency_ms: dict[str, float]
    client_cpu_us_per_request: float | None  # one Python process: its ceiling is about 1e6 / this req/s

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    @property
    def failures(self) -> int:
        """Answers outside 2xx, and requests that got none."""
        bad = sum(n for status, n in self.statuses.items() if not status.startswith("2"))
        return bad + sum(self.errors.values())

    def as_dict(self) -> dict[str, object]:
        return asdict(self) | {"rps": round(self.rps, 2)}


def percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile of an ascending list (what wrk reports, too)."""
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def request_bytes(url: str, body: bytes) -> tuple[str, int, bytes]:
    """(host, port, the whole POST request) for ``url``; only loopback is loaded."""
    check_loopback(url)
    parts = urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"{url}: only http:// is supported")
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return host, port, head.encode() + body


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """(status, whether the server keeps the connection) of one HTTP/1.1 answer, body read whole."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        await reader.readuntil(b"\r\n")  # the last chunk's (empty) trailer
    return status, headers.get("connection") != "close"


class Tally:
    """What every connection reports, counted only between ``start`` and ``stop``."""

    def __init__(self, start: float, stop: float) -> None:
        self.start, self.stop = start, stop
        self.latencies: list[float] = []
        self.statuses: dict[str, int] = {}
        self.errors = {"connect": 0, "read": 0, "timeout": 0}

    def counts(self, sent: float, done: float) -> bool:
        return sent >= self.start and done <= self.stop

    def answer(self, status: int, sent: float, done: float) -> None:
        if self.counts(sent, done):
            self.latencies.append(done - sent)
            self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1

    def error(self, kind: str, sent: float, done: float) -> None:
        if self.counts(sent, done):
            self.errors[kind] += 1


async def connection(host: str, port: int, request: bytes, tally: Tally) -> None:
    """One closed-loop client: ask, wait for the whole answer, ask again, until ``tally.stop``."""
    writer: asyncio.StreamWriter | None = None
    while time.perf_counter() < tally.stop:
        sent = time.perf_counter()
        if writer is None:
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), TIMEOUT_S)
            except (OSError, TimeoutError):
                tally.error("connect", sent, time.perf_counter())
                await asyncio.sleep(0.01)
                continue
            sent = time.perf_counter()
        try:
            writer.write(request)
            status, keep = await asyncio.wait_for(read_answer(reader), TIMEOUT_S)
        except TimeoutError:
            tally.error("timeout", sent, time.perf_counter())
            keep = False
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, IndexError):
            tally.error("read", sent, time.perf_counter())
            keep = False
        else:
            tally.answer(status, sent, time.perf_counter())
        if not keep:
            writer.close()
            writer = None
    if writer is not None:
        writer.close()


async def closed_loop(url: str, body: bytes, connections: int, seconds: float, warmup: float) -> LoadResult:
    if connections < 1 or seconds <= 0 or warmup < 0:
        raise ValueError(f"connections {connections} >= 1, seconds {seconds} > 0, warmup {warmup} >= 0")
    host, port, request = request_bytes(url, body)
    start = time.perf_counter() + warmup
    tally = Tally(start, start + seconds)
    clients = [asyncio.create_task(connection(host, port, request, tally)) for _ in range(connections)]
    await asyncio.sleep(max(0.0, start - time.perf_counter()))
    cpu_before = time.process_time()
    await asyncio.sleep(max(0.0, tally.stop - time.perf_counter()))
    cpu = time.process_time() - cpu_before  # the measured window's, not the last answers' wait
    await asyncio.gather(*clients)
    ordered = sorted(tally.latencies)
    requests = len(ordered)
    return LoadResult(
        connections=connections,
        duration_s=seconds,
        requests=requests,
        statuses=tally.statuses,
        errors=tally.errors,
        latency_ms={
            name: round(percentile(ordered, q) * 1000, 3)
            for name, q in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))
        },
        client_cpu_us_per_request=round(cpu / requests * 1e6, 1) if requests else None,
    )


def run(url: str, body: bytes, connections: int, seconds: float, warmup: float = 0.0) -> LoadResult:
    """``closed_loop`` in a fresh event loop (uvloop's when it is installed, as the service's)."""
    loop_factory = None
    with contextlib.suppress(ImportError):
        import uvloop

        loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(closed_loop(url, body, connections, seconds, warmup))


def describe(result: LoadResult) -> str:
    latency = result.latency_ms
    statuses = ", ".join(f"{status}: {n}" for status, n in sorted(result.statuses.items())) or "none"
    errors = ", ".join(f"{kind} {n}" for kind, n in result.errors.items() if n) or "no errors"
    return (
        f"c{result.connections}: {result.rps:.1f} req/s over {result.duration_s:g} s; latency p50 "
        f"{latency['p50']:.2f} ms, p90 {latency['p90']:.2f}, p99 {latency['p99']:.2f}, max "
        f"{latency['max']:.2f}; answers {statuses}; {errors}; client CPU "
        f"{result.client_cpu_us_per_request} us per request (this one-process client tops out near "
        "1e6 / that, in req/s)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("url", help="http://127.0.0.1:PORT/PATH (loopback only)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--body-file", type=Path, help="the JSON body to post")
    source.add_argument("--lookback", type=int, help="post one window of this many values")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds loaded but not counted")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    try:
        body = args.body_file.read_bytes() if args.body_file else window_body(args.lookback)
        result = run(args.url, body, args.connections, args.seconds, args.warmup)
    except (OSError, ValueError, SystemExit) as exc:
        print(f"loadgen: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result.as_dict()) if args.json else describe(result))
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
