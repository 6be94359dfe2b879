"""Soak test of the prediction service: a steady paced load beside a heavy, rejected neighbour,
with the API's memory sampled throughout.

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--load 0.8] [--output soak.json]
    .venv/bin/python benchmarks/soak.py --minutes 0.5          # a quick try

Without --model-uri it trains pipelines/configs/quick-lstm.yaml (L=28) into a temporary SQLite
store first. It starts the API on 127.0.0.1 (one process, OMP_NUM_THREADS=1), measures its
peak with `wrk -t1 -c32 -d10s` (one window per request, L from GET /v1/model), then for --minutes
runs two wrk processes side by side:

- normal clients: 32 connections held at --load x the peak (a bounded offered rate, not a flood),
  run as consecutive wrk processes of --sample-seconds (10 s) each, "slices". wrk's delay() waits
  after each answer, so a connection's cycle is delay + latency: after each slice the next slice's
  per-connection delay is set from the rate the slice achieved (feedback), so the achieved rate
  converges to the target within a few slices; the first slice's delay comes from the peak run;
- a heavy client: one connection looping a ~7.8 MB JSON body (one series of ~400k numbers plus a
  field the schema forbids) that the API must read, parse and reject with a 4xx; one wrk process
  across all the slices.

The API's RSS is sampled after every slice. Prints one line per slice (time, delay, achieved
req/s, p99, errors, RSS), then the target and overall achieved rate, the normal clients' errors
summed over all slices, the first ones included (non-2xx answers and socket errors: any one fails
the run), their latency (p50: median of the slices' p50; p90/p99/max: the largest slice's), the
heavy client's requests and statuses, and RSS at start/end/max with the growth and every sample.
Exits non-zero when a normal client saw an error or the heavy client was not answered with 4xx.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
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

from serve_bench import model_to_serve, train_quick_model  # noqa: E402
from wrk import (  # noqa: E402
    MAX_DELAY_FRACTION,
    Wrk,
    WrkResult,
    end_leftovers,
    ensure_wrk,
    group_members,
    heavy_rejected_body,
    window_body,
)

from tests.servers import prediction_service  # noqa: E402

CONNECTIONS = 32
SMOOTHING = 0.5  # weight of the newest slice in the estimate of a cycle's non-delay part
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


def cycle_rest_ms(delay_ms: float, achieved_rps: float) -> float | None:
    """The part of a connection's cycle that is not its delay (latency, writing, event-loop time),
    from the rate a slice achieved: CONNECTIONS * 1000 / achieved ms is the measured cycle. It is
    measured on the same basis as the rate (partial cycles at a slice's ends included), so a steady
    bias corrects itself. None without any answer."""
    return CONNECTIONS * 1000.0 / achieved_rps - delay_ms if achieved_rps > 0 else None


def delay_for(rest_ms: float | None, target_rps: float, ceiling_ms: float) -> float:
    """The per-connection delay that makes the cycle CONNECTIONS * 1000 / target ms given the rest;
    0 (unpaced) when the rest alone is longer or nothing was answered."""
    wanted_cycle_ms = CONNECTIONS * 1000.0 / target_rps
    if rest_ms is None:
        return 0.0
    return min(max(0.0, wanted_cycle_ms - rest_ms), wanted_cycle_ms, ceiling_ms)


def aggregate(results: list[WrkResult]) -> dict:
    """The slices' counts summed. wrk gives percentiles per process only: the p50 reported is the
    median of the slices' p50, p90/p99/max the largest slice's, the mean weighted by requests."""
    requests = sum(r.requests for r in results)
    duration = sum(r.duration_s for r in results)
    errors: dict[str, int] = {}
    statuses: dict[int, int] = {}
    for r in results:
        for key, n in r.errors.items():
            errors[key] = errors.get(key, 0) + n
        for status, n in r.statuses.items():
            statuses[status] = statuses.get(status, 0) + n
    lat = [r.latency_ms for r in results if r.requests]
    latency = {
        "p50": round(statistics.median(x["p50"] for x in lat), 3) if lat else 0.0,
        "p90": max((x["p90"] for x in lat), default=0.0),
        "p99": max((x["p99"] for x in lat), default=0.0),
        "max": max((x["max"] for x in lat), default=0.0),
        "mean": round(sum(r.latency_ms["mean"] * r.requests for r in results) / requests, 3)
        if requests
        else 0.0,
    }
    return {
        "requests": requests,
        "duration_s": round(duration, 3),
        "rps": round(requests / duration, 2) if duration else 0.0,
        "errors": errors,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "latency_ms": latency,
        "latency_aggregation": "p50: median of the slices' p50; p90, p99, max: largest slice's; "
        "mean: weighted by requests",
    }


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
        slice_s = max(1, round(args.sample_seconds))  # wrk runs whole seconds
        ceiling_ms = MAX_DELAY_FRACTION * 1000 * args.timeout_s
        rest = cycle_rest_ms(0.0, peak.rps)  # first guess: the peak run, a slice at delay 0
        delay = delay_for(rest, target, ceiling_ms)
        print(
            f"soak: {seconds} s at {target:.1f} req/s ({args.load:g} x peak) in slices of {slice_s} s "
            f"beside one heavy client; per-connection delay set after each slice from the rate it "
            f"achieved (first {delay:.2f} ms; {CONNECTIONS * 1000 / target:.2f} ms would hold the "
            "target only with instant answers); RSS after every slice",
            flush=True,
        )
        started = time.monotonic()
        end_of_soak = started + seconds
        samples = [sample(started, pid)]
        heavy = Wrk(url, heavy_body, 1, seconds, timeout_s=args.heavy_timeout_s, workdir=workdir).start()
        results: list[WrkResult] = []
        slices: list[dict] = []
        while (left := end_of_soak - time.monotonic()) >= 0.5:
            begin = time.monotonic() - started
            # slices end on the grid started + k * slice_s (the last one at the soak's end), so a
            # slice's start-up time does not push later slices back; never a slice under half the length
            boundary = math.ceil((begin + slice_s / 2) / slice_s) * slice_s
            length = max(1, round(min(boundary - begin, left)))
            result = (
                Wrk(
                    url,
                    normal_body,
                    CONNECTIONS,
                    length,
                    delay_ms=delay,
                    timeout_s=args.timeout_s,
                    workdir=workdir,
                )
                .start()
                .result(grace_s=10)
            )
            samples.append(sample(started, pid))
            t, own, helpers = samples[-1]
            results.append(result)
            errors = result.socket_errors + result.non_2xx
            measured = cycle_rest_ms(delay, result.rps)
            slices.append(
                {
                    "start_s": round(begin, 1),
                    "end_s": round(t, 1),
                    "duration_s": round(result.duration_s, 3),
                    "delay_ms": round(delay, 3),
                    "requests": result.requests,
                    "rps": round(result.rps, 2),
                    "of_target": round(result.rps / target, 4),
                    "cycle_rest_ms": None if measured is None else round(measured, 3),
                    "errors": errors,
                    "latency_ms": result.latency_ms,
                    "rss_mib": mib(own),
                    "helpers_rss_mib": mib(helpers),
                }
            )
            print(
                f"  slice {len(slices):3d}  t={begin:6.1f}..{t:6.1f} s  delay {delay:6.2f} ms  "
                f"{result.rps:7.1f} req/s ({100 * result.rps / target:5.1f}% of target)  "
                f"p50 {result.latency_ms['p50']:6.2f} ms  p99 {result.latency_ms['p99']:7.2f} ms  "
                f"errors {errors}  RSS {mib(own):.1f} MiB (helpers {mib(helpers):.1f} MiB)",
                flush=True,
            )
            # feedback: the first slice's measurement replaces the peak's guess (the heavy client was
            # not there); later ones are averaged in, so one noisy slice moves the delay half as much
            rest = (
                measured
                if len(slices) == 1 or rest is None or measured is None
                else (SMOOTHING * measured + (1 - SMOOTHING) * rest)
            )
            delay = delay_for(rest, target, ceiling_ms)
        normal_wall_s = time.monotonic() - started
        heavy_result = heavy.result(grace_s=10)
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
        "slice_seconds": slice_s,
        "normal": {**aggregate(results), "wall_s": round(normal_wall_s, 3)},
        "normal_errors": sum(r.socket_errors + r.non_2xx for r in results),
        "slices": slices,
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
    slices = result["slices"]
    wall_rps = normal["requests"] / normal["wall_s"] if normal["wall_s"] else 0.0
    print(
        f"achieved rate     {normal['rps']:.1f} req/s ({100 * normal['rps'] / result['target_rps']:.1f}% "
        f"of target; {normal['requests']} requests in {len(slices)} slices of wrk totalling "
        f"{normal['duration_s']:.1f} s, all slices counted; {wall_rps:.1f} req/s over "
        f"{normal['wall_s']:.1f} s including the gaps between slices)"
    )
    print(
        "per slice         "
        + ", ".join(f"{x['rps']:.0f} ({100 * x['of_target']:.0f}%) @{x['delay_ms']:.1f} ms" for x in slices)
        + " (req/s (of target) @ delay per connection)"
    )
    print(
        f"normal errors     {result['normal_errors']} (statuses {normal['statuses']}; socket errors: "
        f"{socket_errors(normal['errors'])})"
    )
    print(
        f"normal latency    p50 {lat['p50']:.2f} ms (median of the slices' p50), p90 {lat['p90']:.2f} ms, "
        f"p99 {lat['p99']:.2f} ms, max {lat['max']:.2f} ms (largest slice's), mean {lat['mean']:.2f} ms"
    )
    if slices and normal["rps"] < 0.9 * result["target_rps"]:
        print(
            f"WARNING: the normal clients achieved {100 * normal['rps'] / result['target_rps']:.0f}% of "
            f"the target (last slice {100 * slices[-1]['of_target']:.0f}% at a delay of "
            f"{slices[-1]['delay_ms']:.2f} ms): the API did not sustain it beside the heavy client"
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
    parser.add_argument(
        "--sample-seconds",
        type=float,
        default=10.0,
        help="RSS sampling period, also the length of a pacing slice (rounded to whole seconds)",
    )
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
    if not args.model_uri:
        print("training the quick LSTM into a temporary store ...", flush=True)
    tracking_uri, model_uri = model_to_serve(args, workdir, train_quick_model)

    result = soak(args, workdir, tracking_uri, model_uri)
    failures = report(result)
    if args.output:
        result["failures"] = failures
        args.output.write_text(json.dumps(result, indent=2) + "\n")
        print(f"raw results: {args.output}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
