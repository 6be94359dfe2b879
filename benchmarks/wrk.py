"""Helpers to drive the API with `wrk` (https://github.com/wg/wrk) from the benchmarks.

One Lua script serves every use: POST a JSON body read from a file, optionally paced with wrk's
``delay()`` (a bounded offered rate), count answers per status per thread, and print one JSON line
from ``done()`` (requests, socket errors, statuses, latency percentiles, duration). `soak.py` and
`serve_bench.py` share this copy.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

MARKER = "WRK_JSON "
MAX_DELAY_FRACTION = 0.5  # a delay() longer than this x --timeout risks wrk counting timeouts
LOOPBACK = {"127.0.0.1", "localhost", "::1"}

LUA = r"""-- written by benchmarks/wrk.py
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
do
  local f = assert(io.open(%(body_path)s, "rb"))
  wrk.body = f:read("*a")
  f:close()
end

local delay_ms = %(delay_ms).6f  -- per connection; 0: as fast as answers come back
if delay_ms > 0 then
  local base = math.floor(delay_ms)
  local frac = delay_ms - base
  -- wrk truncates delay() to whole ms: round at random so the mean is exactly delay_ms
  function delay()
    if math.random() < frac then return base + 1 end
    return base
  end
end

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

statuses = {}
function response(status, headers, body)
  local key = tostring(status)
  statuses[key] = (statuses[key] or 0) + 1
end

function done(summary, latency, requests)
  local merged = {}
  for _, thread in ipairs(threads) do
    local counts = thread:get("statuses") or {}
    for key, n in pairs(counts) do merged[key] = (merged[key] or 0) + n end
  end
  local parts = {}
  for key, n in pairs(merged) do parts[#parts + 1] = string.format('"%%s": %%d', key, n) end
  local e = summary.errors
  io.write(string.format(
    '%(marker)s{"requests": %%d, "duration_us": %%d, "bytes": %%d, '
      .. '"errors": {"connect": %%d, "read": %%d, "write": %%d, "timeout": %%d, "status": %%d}, '
      .. '"statuses": {%%s}, '
      .. '"latency_us": {"p50": %%.0f, "p90": %%.0f, "p99": %%.0f, "max": %%.0f, "mean": %%.1f}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.timeout, e.status,
    table.concat(parts, ", "),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
"""


def ensure_wrk() -> str:
    """The wrk binary; as root, installs Debian's package when it is missing."""
    found = shutil.which("wrk")
    if found:
        return found
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print("wrk is missing: installing it with `apt-get install -y wrk` ...", flush=True)
        subprocess.run(["apt-get", "install", "-y", "wrk"], check=False, timeout=300)
        found = shutil.which("wrk")
        if found:
            return found
    sys.exit(
        "wrk is not installed: `sudo apt-get install -y wrk` (Debian/Ubuntu) or `brew install wrk` (macOS)"
    )


def check_loopback(url: str) -> None:
    host = urlsplit(url).hostname
    if host not in LOOPBACK:
        raise SystemExit(f"{url}: the benchmarks only load loopback servers (127.0.0.1)")


def window_body(lookback: int, n_features: int = 1, seed: int = 0) -> bytes:
    """One valid request: one window of ``lookback`` values (rows of ``n_features`` when > 1)."""
    rng = np.random.default_rng(seed)
    values = (10.0 + rng.normal(0, 3, size=(lookback, n_features))).round(4)
    window = values[:, 0].tolist() if n_features == 1 else values.tolist()
    return json.dumps({"series": [{"values": window}]}).encode()


def heavy_rejected_body(target_bytes: int = 7_800_000, seed: int = 1) -> bytes:
    """A ~``target_bytes`` JSON body the API must read, parse and then reject with a 4xx: one
    series of ~400k numbers plus a field the schema forbids. It stays under the default
    MAX_BODY_BYTES (8 MiB) so it is not turned away from its Content-Length alone."""
    rng = np.random.default_rng(seed)

    def build(n: int) -> bytes:
        values = (10.0 + rng.normal(0, 3, size=n)).tolist()
        return json.dumps({"series": [{"values": values}], "bogus": 1}).encode()

    body = build(400_000)
    n = int(400_000 * target_bytes / len(body))
    body = build(n)
    while len(body) > target_bytes:  # a handful of steps at most
        n -= max(1, (len(body) - target_bytes) // 15)
        body = build(n)
    return body


@dataclass
class WrkResult:
    requests: int
    duration_s: float
    errors: dict[str, int]
    statuses: dict[int, int]
    latency_ms: dict[str, float]
    text: str = field(repr=False, default="")

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s else 0.0

    @property
    def socket_errors(self) -> int:
        return sum(self.errors[k] for k in ("connect", "read", "write", "timeout"))

    @property
    def non_2xx(self) -> int:
        return sum(n for status, n in self.statuses.items() if not 200 <= status < 300)

    def as_dict(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "duration_s": round(self.duration_s, 3),
            "rps": round(self.rps, 2),
            "errors": self.errors,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "latency_ms": self.latency_ms,
        }


class Wrk:
    """One wrk process: POST ``body`` to ``url`` with ``connections`` for ``seconds``, paced when
    ``rate`` or ``delay_ms`` is given. ``start()`` returns at once; ``result()`` waits (bounded) and
    parses the JSON line printed by ``done()``.

    Pacing is wrk's ``delay()``: each connection waits ``delay_ms`` after every answer before its
    next request, so its cycle is delay + latency. ``rate`` sets ``delay_ms = connections * 1000 /
    rate``, which bounds the offered rate by ``rate`` but reaches it only when answers are instant;
    to hold a rate, set ``delay_ms`` from a measured latency (as soak.py does, slice by slice)."""

    def __init__(
        self,
        url: str,
        body: bytes,
        connections: int,
        seconds: int,
        threads: int = 1,
        rate: float | None = None,
        timeout_s: float = 5.0,
        workdir: Path | None = None,
        delay_ms: float | None = None,
    ) -> None:
        check_loopback(url)
        if seconds < 1:
            raise ValueError("wrk runs for whole seconds, at least 1")
        if rate and delay_ms is not None:
            raise ValueError("give rate or delay_ms, not both")
        if delay_ms is not None and delay_ms < 0:
            raise ValueError(f"delay_ms {delay_ms} < 0")
        self.url, self.connections, self.seconds, self.threads = url, connections, int(seconds), threads
        self.timeout_s = timeout_s
        self.delay_ms = delay_ms or (connections * 1000.0 / rate if rate else 0.0)
        if self.delay_ms and self.delay_ms > MAX_DELAY_FRACTION * 1000 * timeout_s:
            # wrk counts a timeout for a connection whose last request started > --timeout ago,
            # even while it merely waits out its delay()
            raise ValueError(
                f"a delay of {self.delay_ms:.1f} ms per connection is too slow a pace for wrk "
                f"(--timeout {timeout_s:g} s)"
            )
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="wrk-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        tag = f"{os.getpid()}-{id(self):x}"
        self.body_path = self.workdir / f"body-{tag}.json"
        self.body_path.write_bytes(body)
        self.script_path = self.workdir / f"post-{tag}.lua"
        self.script_path.write_text(
            LUA % {"body_path": lua_string(str(self.body_path)), "delay_ms": self.delay_ms, "marker": MARKER}
        )
        self.process: subprocess.Popen | None = None

    @property
    def command(self) -> list[str]:
        return [
            ensure_wrk(),
            f"-t{self.threads}",
            f"-c{self.connections}",
            f"-d{self.seconds}s",
            "--timeout",
            f"{math.ceil(self.timeout_s)}s",
            "-s",
            str(self.script_path),
            self.url,
        ]

    def start(self) -> Wrk:
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def result(self, grace_s: float = 30.0) -> WrkResult:
        """Waits until the run's length plus ``grace_s`` after start(); then SIGINT (wrk still
        prints its results), then kill."""
        assert self.process is not None, "start() first"
        remaining = self.started + self.seconds + grace_s - time.monotonic()
        try:
            text, _ = self.process.communicate(timeout=max(1.0, remaining))
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGINT)
            try:
                text, _ = self.process.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                text, _ = self.process.communicate()
        return parse(text, self.process.returncode)

    def run(self) -> WrkResult:
        return self.start().result()


def group_members(pgid: int) -> dict[int, tuple[int, str]]:
    """Live (non-zombie) processes of process group ``pgid`` (Linux /proc): {pid: (ppid, state)}.
    The test servers start the API with start_new_session=True, so its group id is its pid and
    its helper processes are in that group too."""
    members: dict[int, tuple[int, str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        state, ppid, pgrp = fields[0], int(fields[1]), int(fields[2])
        if pgrp == pgid and state != "Z":
            members[int(stat.parent.name)] = (ppid, state)
    return members


def group_cpu_seconds(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of group ``pgid``, every
    thread included (Linux /proc; 0.0 elsewhere). A server's whole cost: its event loop, forward
    thread and helper processes, or MLflow's workers."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def end_leftovers(pgid: int, grace_s: float = 10.0, wait_s: float = 5.0) -> list[int]:
    """After the API's own process has exited: gives the rest of its process group ``grace_s`` to
    exit too; any process still alive then was left behind by it. Ends those (SIGTERM, then
    SIGKILL after ``wait_s``) and returns their pids. Linux only (an empty list elsewhere)."""
    if not Path("/proc").is_dir():
        return []
    deadline = time.monotonic() + grace_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    leftovers = sorted(group_members(pgid))
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(pid in group_members(pgid) for pid in leftovers):
        time.sleep(0.1)
    for pid in group_members(pgid):
        if pid in leftovers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return leftovers


def lua_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse(text: str, returncode: int | None = 0) -> WrkResult:
    line = next((ln for ln in text.splitlines() if ln.startswith(MARKER)), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result (exit {returncode}):\n{text[-2000:]}")
    data = json.loads(line[len(MARKER) :])
    return WrkResult(
        requests=data["requests"],
        duration_s=data["duration_us"] / 1e6,
        errors=data["errors"],
        statuses={int(k): v for k, v in data["statuses"].items()},
        latency_ms={k: v / 1000.0 for k, v in data["latency_us"].items()},
        text=text,
    )
