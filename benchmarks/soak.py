"""Soak test of the prediction service: a steady paced load beside a heavy, rejected neighbour,
with the API's memory sampled throughout.

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--load 0.8] [--output soak.json]
    .venv/bin/python benchmarks/soak.py --minutes 0.5          # a quick try

Without --model-uri it trains the quick LSTM into a temporary SQLite store first (as
serve_bench.py does). It starts the API on 127.0.0.1 (one process, OMP_NUM_THREADS=1), measures its
peak with `wrk -t1 -c32 -d10s` (one window per request, L from GET /v1/model), then for --minutes
runs two wrk processes side by side:

- normal clients: 32 connections paced with wrk's delay() to --load x the peak (a bounded offered
  rate, not a flood);
- a heavy client: one connection looping a ~7.8 MB JSON body (one series of ~400k numbers plus a
  field the schema forbids) that the API must read, parse and reject with a 4xx.

The API's RSS is sampled every 10 s. Prints the target and achieved rate, the normal clients'
errors (non-2xx answers and socket errors: any one fails the run), their p50/p99, the heavy
client's requests and statuses, and RSS at start/end/max with the growth and every sample. Exits
non-zero when a normal client saw an error or the heavy client was not answered with 4xx.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from serve_bench import train_quick_model  # noqa: E402
from wrk import Wrk, end_leftovers, ensure_wrk, group_members, heavy_rejected_body, window_body  # noqa: E402

from tests.servers import prediction_service  # noqa: E402

CONNECTIONS = 32
MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    """Resident set size of one process (Linux /proc; `ps` elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except FileNotFoundError:
        pass
    out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, text=True, timeout=10)
    return int(out.stdout.strip() or 0) * 1024


def helpers_rss_bytes(pid: int) -> int:
    """RSS of the API's helper processes (everything else in its process group)."""
    if not Path("/proc").is_dir():
        return 0
    return sum(rss_bytes(p) for p in group_members(pid) if p != pid)


def sample(started: float, pid: int) -> tuple[float, int, int]:
    return time.monotonic() - started, rss_bytes(pid), helpers_rss_bytes(pid)


def post(url: str, body: bytes, timeout: float = 60.0) -> tuple[int, float]:
    """(status, seconds) of one POST; 4xx/5xx are answers here, not exceptions."""
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        exc.read()
        status = exc.code
    return status, time.perf_counter() - started


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def mib(n: int) -> float:
    return round(n / MIB, 1)


def soak(args: argparse.Namespace, workdir: Path, tracking_uri: str, model_uri: str) -> dict:
    one_thread = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TORCH_THREADS": "1"}
    with prediction_service(workdir, tracking_uri, model_uri, one_thread, quiet=True) as base_url:
        pid, url = base_url.pid, base_url + "/v1/predict"
        description = get_json(base_url + "/v1/model")
        lookback, features = description["lookback"], description["features"]
        normal_body = window_body(lookback, len(features))
        heavy_body = heavy_rejected_body(args.heavy_bytes)
        normal_status, _ = post(url, normal_body)
        heavy_status, heavy_seconds = post(url, heavy_body)
        print(
            f"API pid {pid} on {base_url}; model {model_uri} (L={lookback}, {len(features)} feature(s)); "
            f"one window -> {normal_status}; heavy body {len(heavy_body) / 1e6:.2f} MB -> {heavy_status} "
            f"in {heavy_seconds:.2f} s",
            flush=True,
        )
        if normal_status != 200:
            raise SystemExit(
                f"the API answered {normal_status} to one valid window; see {workdir / 'api.log'}"
            )

        Wrk(url, normal_body, CONNECTIONS, 2, workdir=workdir).run()  # warm-up
        peak = Wrk(url, normal_body, CONNECTIONS, args.peak_seconds, workdir=workdir).run()
        target = args.load * peak.rps
        if peak.requests < 10 * CONNECTIONS:
            raise SystemExit(
                f"no usable peak ({peak.requests} answers in {args.peak_seconds} s): see {workdir}"
            )
        print(
            f"peak (wrk -t1 -c{CONNECTIONS} -d{args.peak_seconds}s): {peak.rps:.1f} req/s, "
            f"p50 {peak.latency_ms['p50']:.2f} ms, p99 {peak.latency_ms['p99']:.2f} ms, "
            f"errors {peak.socket_errors + peak.non_2xx}",
            flush=True,
        )

        seconds = max(1, round(args.minutes * 60))
        print(
            f"soak: {seconds} s at {target:.1f} req/s ({args.load:g} x peak; delay "
            f"{CONNECTIONS * 1000 / target:.2f} ms per connection) beside one heavy client; "
            f"RSS every {args.sample_seconds:g} s",
            flush=True,
        )
        started = time.monotonic()
        samples = [sample(started, pid)]
        heavy = Wrk(url, heavy_body, 1, seconds, timeout_s=args.heavy_timeout_s, workdir=workdir).start()
        normal = Wrk(
            url, normal_body, CONNECTIONS, seconds, rate=target, timeout_s=args.timeout_s, workdir=workdir
        ).start()
        deadline = started + seconds + 60
        next_sample = started + args.sample_seconds
        while (normal.running() or heavy.running()) and time.monotonic() < deadline:
            time.sleep(min(0.5, max(0.0, next_sample - time.monotonic())))
            if time.monotonic() >= next_sample:
                samples.append(sample(started, pid))
                t, own, helpers = samples[-1]
                print(
                    f"  t={t:6.1f} s  RSS {mib(own):.1f} MiB (helper processes {mib(helpers):.1f} MiB)",
                    flush=True,
                )
                next_sample += args.sample_seconds
        normal_result, heavy_result = normal.result(grace_s=5), heavy.result(grace_s=5)
        samples.append(sample(started, pid))
        ready_after = post(base_url + "/v1/predict", normal_body)[0]
        stopping = time.monotonic()
    exit_s = time.monotonic() - stopping  # SIGTERM to exit; the harness kills it after 15 s
    leftovers = end_leftovers(pid, grace_s=args.exit_grace_s)  # its helpers get this long to follow it

    rss = [b for _, b, _ in samples]
    return {
        "model_uri": model_uri,
        "lookback": lookback,
        "features": features,
        "seconds": seconds,
        "load": args.load,
        "connections": CONNECTIONS,
        "heavy_body_bytes": len(heavy_body),
        "peak": peak.as_dict(),
        "target_rps": round(target, 2),
        "normal": normal_result.as_dict(),
        "normal_errors": normal_result.socket_errors + normal_result.non_2xx,
        "heavy": heavy_result.as_dict(),
        "one_window_after_soak": ready_after,
        "rss_mib": {
            "start": mib(rss[0]),
            "end": mib(rss[-1]),
            "max": mib(max(rss)),
            "growth": mib(rss[-1] - rss[0]),
            "samples": [[round(t, 1), mib(b)] for t, b, _ in samples],
            "helpers_samples": [[round(t, 1), mib(h)] for t, _, h in samples],
        },
        "api_exit_s": round(exit_s, 2),
        "leftover_processes": leftovers,
        "exit_grace_s": args.exit_grace_s,
    }


def socket_errors(errors: dict[str, int]) -> str:
    return ", ".join(f"{k} {errors[k]}" for k in ("connect", "read", "write", "timeout"))


def report(result: dict) -> list[str]:
    normal, heavy, rss, peak = result["normal"], result["heavy"], result["rss_mib"], result["peak"]
    heavy_statuses = {int(k): v for k, v in heavy["statuses"].items()}
    lat, heavy_lat = normal["latency_ms"], heavy["latency_ms"]
    print(f"\nsoak {result['seconds']} s, model {result['model_uri']} (L={result['lookback']})")
    print(f"peak              {peak['rps']:.1f} req/s (p99 {peak['latency_ms']['p99']:.2f} ms)")
    print(f"target rate       {result['target_rps']:.1f} req/s ({result['load']:g} x peak)")
    print(
        f"achieved rate     {normal['rps']:.1f} req/s ({normal['requests']} requests in "
        f"{normal['duration_s']:.1f} s; each connection waits its delay after every answer, so slower "
        "answers lower it)"
    )
    print(
        f"normal errors     {result['normal_errors']} (statuses {normal['statuses']}; socket errors: "
        f"{socket_errors(normal['errors'])})"
    )
    print(
        f"normal latency    p50 {lat['p50']:.2f} ms, p90 {lat['p90']:.2f} ms, p99 {lat['p99']:.2f} ms, "
        f"max {lat['max']:.2f} ms"
    )
    print(
        f"heavy client      {heavy['requests']} requests of {result['heavy_body_bytes'] / 1e6:.2f} MB, "
        f"statuses {heavy['statuses']}; socket errors: {socket_errors(heavy['errors'])}; "
        f"p50 {heavy_lat['p50']:.0f} ms, max {heavy_lat['max']:.0f} ms"
    )
    print(
        f"API RSS           start {rss['start']:.1f} MiB, end {rss['end']:.1f} MiB, max {rss['max']:.1f} MiB, "
        f"growth {rss['growth']:+.1f} MiB"
    )
    print("RSS samples (s, MiB): " + ", ".join(f"{t:.0f}:{m:.1f}" for t, m in rss["samples"]))
    print(
        "helper processes' RSS (s, MiB): " + ", ".join(f"{t:.0f}:{m:.1f}" for t, m in rss["helpers_samples"])
    )
    print(f"API exit          {result['api_exit_s']:.2f} s after SIGTERM")
    if result["leftover_processes"]:
        print(
            f"WARNING: processes the API started were still alive {result['exit_grace_s']:g} s after it "
            f"exited: {result['leftover_processes']} (ended by this script)"
        )
    failures = []
    if result["normal_errors"]:
        failures.append(f"normal clients saw {result['normal_errors']} errors")
    if result["one_window_after_soak"] != 200:
        failures.append(f"one window after the soak got {result['one_window_after_soak']}")
    if not heavy["requests"]:
        failures.append("the heavy client got no answer at all")
    elif any(not 400 <= s < 500 for s in heavy_statuses):
        failures.append(f"the heavy client got non-4xx answers: {heavy['statuses']}")
    print("FAIL: " + "; ".join(failures) if failures else "PASS: no errors for normal clients")
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tracking-uri")
    parser.add_argument("--model-uri")
    parser.add_argument("--minutes", type=float, default=10.0, help="soak length (0.5: a quick try)")
    parser.add_argument("--load", type=float, default=0.8, help="offered rate as a fraction of the peak")
    parser.add_argument("--peak-seconds", type=int, default=10)
    parser.add_argument("--sample-seconds", type=float, default=10.0, help="RSS sampling period")
    parser.add_argument("--heavy-bytes", type=int, default=7_800_000, help="size of the rejected body")
    parser.add_argument(
        "--timeout-s", type=float, default=5.0, help="a normal request slower than this is an error"
    )
    parser.add_argument("--heavy-timeout-s", type=float, default=60.0)
    parser.add_argument(
        "--exit-grace-s", type=float, default=10.0, help="how long the API's helpers may outlive it"
    )
    parser.add_argument("--output", type=Path, help="write the raw results here as JSON")
    args = parser.parse_args()
    if not 0 < args.load <= 1.5 or not 0 < args.minutes <= 24 * 60 or args.sample_seconds <= 0:
        parser.error("--load in (0, 1.5], --minutes in (0, 1440], --sample-seconds > 0")
    ensure_wrk()

    workdir = Path(tempfile.mkdtemp(prefix="soak-"))
    if args.model_uri:
        tracking_uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
        model_uri = args.model_uri
    else:
        print("training the quick LSTM into a temporary store ...", flush=True)
        tracking_uri, model_uri = train_quick_model(workdir)

    result = soak(args, workdir, tracking_uri, model_uri)
    failures = report(result)
    if args.output:
        result["failures"] = failures
        args.output.write_text(json.dumps(result, indent=2) + "\n")
        print(f"raw results: {args.output}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
