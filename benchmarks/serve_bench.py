"""Serving benchmark (issue 10): this service vs `mlflow models serve --env-manager local` (same
model) vs the HTTP floor (`floor_app.py`: a bare Starlette route on the same uvicorn that parses the
same body and returns a fixed answer of H values), all three up at once in one run, loaded in turn
by a C load generator (`wrk`, installed with apt-get when run as root and missing).

    .venv/bin/python benchmarks/serve_bench.py [--rounds 3] [--seconds 10] [--output bench.json]
        [--model-uri URI --tracking-uri URI | --quick] [--heavy-rounds 2] [--forecast-log]
        [--runtime auto|torch|onnx]

--runtime sets INFERENCE_RUNTIME for our API and MLflow's server (the pyfunc reads it too) and for
the forward time printed last: torch eager, or ONNX Runtime on the export verified at
registration (auto, the default: ONNX on a CPU). decoder_serving.py --runtimes torch,onnx puts
the two side by side per decoder.

--forecast-log runs benchmarks/forecast_log_bench.py instead: the same API with the forecast log
off, on SQLite, on PostgreSQL, and on a database that refuses or hangs, side by side.

Without --model-uri it trains the issue's model into a temporary SQLite store first:
`forecast train --data data/ETTh1.csv --time-column date --target OT --model lstm --lookback 96
--horizon 24` (minutes on 2 cores; --quick adds `--epochs 1`, for trying the script out only).
Our API and MLflow's server run with OMP_NUM_THREADS=1 (the machine has 2 cores and wrk needs one);
ours and the floor run under the same uvicorn settings (uvloop/httptools as installed, one process,
--no-access-log, log level warning); `mlflow models serve` runs as MLflow starts it.

Each of --rounds rounds (the order of the servers reverses every other round) runs, for --seconds:
  - `wrk -t1 -c32`, one window of L values per request: ours, ours with --workers 2 (metrics in
    prometheus-client's multiprocess mode), MLflow's, the floor;
  - `wrk -t1 -c1`, the same window: ours, the floor;
  - `wrk -t1 -c32`, 64 windows per request: ours (windows/s = req/s x 64).
Bodies: ours and the floor `{"series": [{"values": [...]}]}`, MLflow's `{"inputs": [[...]]}`.
A --warmup-seconds run of each precedes round 1 and is not counted.

Prints per scenario and server the medians over rounds of req/s (and windows/s), p50 and p99, the
per-round req/s, the server's CPU while loaded (cores, and CPU microseconds per request, its whole
process group: the measure of per-request work on a machine wrk shares), and non-2xx answers and
socket errors summed over rounds; then the --workers 2 factor and each target of the
issue with its measured ratio and PASS/FAIL. A run in which any answer failed is invalid: it says so
and exits 1 (a missed target alone exits 0). Then the raw forward time of the network per window.

Heavy neighbour (--heavy-rounds 0 skips it), after the rounds above: normal clients (`wrk -t1
-c32`, one window per request) on our API alone, then the same beside a heavy client (`wrk -c1`
looping a ~7.8 MB JSON body the API reads, parses and rejects with a 4xx), alternating for
--heavy-rounds rounds each; prints the normal clients' req/s and p99 in both conditions and their
ratio.

--output writes every wrk run (warm-up, rounds, heavy neighbour) and the summary as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import operator
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from wrk import Wrk, WrkResult, end_leftovers, ensure_wrk, group_cpu_seconds, heavy_rejected_body  # noqa: E402

from tests.conftest import free_port  # noqa: E402
from tests.servers import ServerURL, mlflow_model_server, prediction_service, running  # noqa: E402

ISSUE_TRAIN_ARGS = [
    "--data",
    str(REPO / "data/ETTh1.csv"),
    "--time-column",
    "date",
    "--target",
    "OT",
    "--model",
    "lstm",
    "--lookback",
    "96",
    "--horizon",
    "24",
]
QUICK_TRAIN_ARGS = ["--epochs", "1"]
BATCH_WINDOWS = 64
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TORCH_THREADS": "1"}
SERVERS = ("ours", "ours-2w", "mlflow", "floor")  # ours-2w: the same API with --workers 2
# (scenario, connections, windows per request, servers in round order)
SCENARIOS = (
    ("c32", 32, 1, ("ours", "ours-2w", "mlflow", "floor")),
    ("c1", 1, 1, ("ours", "floor")),
    (f"c32x{BATCH_WINDOWS}", 32, BATCH_WINDOWS, ("ours",)),
)
LABELS = {
    "c32": "c32, 1 window",
    "c1": "c1, 1 window",
    f"c32x{BATCH_WINDOWS}": f"c32, {BATCH_WINDOWS} windows",
}


def train_issue_model(workdir: Path, quick: bool) -> tuple[str, str]:
    """Trains the issue's model into a SQLite store in ``workdir``; returns (tracking URI, model URI)."""
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    extra = QUICK_TRAIN_ARGS if quick else []
    print(f"training: {train_command(quick)} (into a temporary store) ...", flush=True)
    started = time.monotonic()
    command = [sys.executable, "-m", "pipelines.cli", "train", *ISSUE_TRAIN_ARGS, *extra]
    command += ["--register", "bench", "--tracking-uri", uri, "--json"]
    # cwd: the SQLite store's artifacts (./mlruns) and Lightning's logs land in the temporary folder
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"training failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}")
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    mae = {k: round(v["mae"], 4) for k, v in outcome["metrics"].items() if "mae" in v}
    print(
        f"  trained in {time.monotonic() - started:.0f} s: registered bench v{outcome['registered_version']}; "
        f"test MAE {mae}",
        flush=True,
    )
    return uri, f"models:/bench/{outcome['registered_version']}"


def model_to_serve(
    args: argparse.Namespace, workdir: Path, train: Callable[[Path], tuple[str, str]]
) -> tuple[str, str]:
    """(tracking URI, model URI): the registered model given by --model-uri (in --tracking-uri or
    $MLFLOW_TRACKING_URI), or one ``train`` registers in a temporary store under ``workdir``."""
    if args.model_uri:
        tracking_uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
        return tracking_uri, args.model_uri
    return train(workdir)


def train_quick_model(workdir: Path) -> tuple[str, str]:
    """The quick LSTM (pipelines/configs/quick-lstm.yaml) in a SQLite store in ``workdir``; soak.py
    uses it. Returns (tracking URI, model URI)."""
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
            "--allow-worse-than-naive",  # it measures serving, not forecasting skill
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


def train_command(quick: bool) -> str:
    """The training command as the issue writes it (the data path relative to the repository)."""
    args = ISSUE_TRAIN_ARGS + (QUICK_TRAIN_ARGS if quick else [])
    return "forecast train " + " ".join(a.replace(str(REPO) + "/", "") for a in args)


@contextlib.contextmanager
def http_floor(workdir: Path, horizon: int) -> Iterator[ServerURL]:
    """benchmarks/floor_app.py under uvicorn on loopback, with our API's uvicorn settings."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "floor_app:app", "--app-dir", str(REPO / "benchmarks")]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"]
    url = f"http://127.0.0.1:{port}"
    env = {"FLOOR_HORIZON": str(horizon), **ONE_THREAD}
    with running(command, f"{url}/healthz", workdir / "floor.log", env=env) as process:
        yield ServerURL(url, process.pid)


def bodies(windows: np.ndarray) -> dict[str, dict[int, bytes]]:
    """Request bodies by server and windows per request."""
    first = windows[0].round(4).tolist()
    batch = windows[:BATCH_WINDOWS].round(4).tolist()
    ours = {
        1: json.dumps({"series": [{"values": first}]}).encode(),
        BATCH_WINDOWS: json.dumps({"series": [{"values": w} for w in batch]}).encode(),
    }
    mlflow = {1: json.dumps({"inputs": [first]}).encode()}
    return {"ours": ours, "ours-2w": ours, "floor": ours, "mlflow": mlflow}


def forward_cost(predictor, windows: np.ndarray) -> tuple[float, float]:
    """Median seconds per window for the bare network: one window at a time, and in a batch of 32."""
    import torch

    torch.set_num_threads(1)
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


def run_rounds(
    urls: dict[str, str],
    pids: dict[str, int],
    body: dict[str, dict[int, bytes]],
    args: argparse.Namespace,
    workdir: Path,
) -> tuple[list[dict], list[dict]]:
    """The warm-up, then --rounds rounds of every scenario; returns (warm-up runs, measured runs).
    Each run also records the server's CPU time (its whole process group) while wrk ran."""

    def one(scenario: str, connections: int, windows: int, server: str, seconds: int) -> dict:
        before = group_cpu_seconds(pids[server])
        result = Wrk(urls[server], body[server][windows], connections, seconds, workdir=workdir).run()
        cpu = group_cpu_seconds(pids[server]) - before
        time.sleep(args.pause)
        return {
            "scenario": scenario,
            "server": server,
            "windows_per_request": windows,
            **as_record(result),
            "server_cpu_s": cpu,
            "server_cores": cpu / result.duration_s if result.duration_s else 0.0,
            "cpu_us_per_request": 1e6 * cpu / result.requests if result.requests else 0.0,
        }

    warmup = []
    if args.warmup_seconds:
        print(f"warm-up: {args.warmup_seconds} s of each scenario and server ...", flush=True)
        for scenario, connections, windows, servers in SCENARIOS:
            for server in servers:
                warmup.append(one(scenario, connections, windows, server, args.warmup_seconds))
    runs = []
    for round_no in range(1, args.rounds + 1):
        line = []
        for scenario, connections, windows, servers in SCENARIOS:
            order = servers if round_no % 2 else tuple(reversed(servers))
            for server in order:
                record = one(scenario, connections, windows, server, args.seconds)
                runs.append({"round": round_no, **record})
                line.append(f"{scenario} {server} {record['rps']:.0f}")
        print(f"round {round_no}/{args.rounds} (req/s): " + ", ".join(line), flush=True)
    return warmup, runs


def as_record(result: WrkResult) -> dict:
    return {
        **result.as_dict(),
        "non_2xx": result.non_2xx,
        "socket_errors": result.socket_errors,
    }


def summarise(runs: list[dict]) -> dict[str, dict[str, dict]]:
    """Medians over rounds per scenario and server; errors summed."""
    summary: dict[str, dict[str, dict]] = {}
    for scenario, _, windows, servers in SCENARIOS:
        summary[scenario] = {}
        for server in servers:
            mine = [r for r in runs if r["scenario"] == scenario and r["server"] == server]
            rps = [r["rps"] for r in mine]
            summary[scenario][server] = {
                "rounds": len(mine),
                "rps": statistics.median(rps),
                "windows_per_s": windows * statistics.median(rps),
                "p50_ms": statistics.median(r["latency_ms"]["p50"] for r in mine),
                "p99_ms": statistics.median(r["latency_ms"]["p99"] for r in mine),
                "server_cores": statistics.median(r["server_cores"] for r in mine),
                "cpu_us_per_request": statistics.median(r["cpu_us_per_request"] for r in mine),
                "rps_per_round": rps,
                "requests": sum(r["requests"] for r in mine),
                "non_2xx": sum(r["non_2xx"] for r in mine),
                "socket_errors": sum(r["socket_errors"] for r in mine),
                "statuses": merge_statuses(r["statuses"] for r in mine),
            }
    return summary


def merge_statuses(all_statuses) -> dict[str, int]:
    merged: dict[str, int] = {}
    for statuses in all_statuses:
        for status, n in statuses.items():
            merged[status] = merged.get(status, 0) + n
    return dict(sorted(merged.items()))


def targets(s: dict[str, dict[str, dict]]) -> list[dict]:
    """The issue's targets, each with its measured figure and verdict."""
    ours, mlflow, floor = s["c32"]["ours"], s["c32"]["mlflow"], s["c32"]["floor"]
    batch = s[f"c32x{BATCH_WINDOWS}"]["ours"]
    c1_gap = s["c1"]["ours"]["p50_ms"] - s["c1"]["floor"]["p50_ms"]
    rows = [
        ("c32: ours / floor req/s >= 0.5", ours["rps"] / floor["rps"], ">=", 0.5, "x"),
        ("c32: ours / mlflow req/s >= 8", ours["rps"] / mlflow["rps"], ">=", 8.0, "x"),
        ("c32: ours p99 < mlflow p99 (ours / mlflow)", ours["p99_ms"] / mlflow["p99_ms"], "<", 1.0, "x"),
        ("c32: ours p99 < 50 ms", ours["p99_ms"], "<", 50.0, " ms"),
        ("c1: ours p50 - floor p50 <= 1 ms", c1_gap, "<=", 1.0, " ms"),
        (
            f"{BATCH_WINDOWS}-window / 1-window windows/s >= 20 (c32)",
            batch["windows_per_s"] / ours["windows_per_s"],
            ">=",
            20.0,
            "x",
        ),
    ]
    compare = {">=": operator.ge, "<": operator.lt, "<=": operator.le}
    return [
        {"target": name, "measured": value, "unit": unit.strip(), "met": bool(compare[op](value, bound))}
        for name, value, op, bound, unit in rows
    ]


def print_summary(summary: dict[str, dict[str, dict]], args: argparse.Namespace) -> bool:
    """Prints the table and the targets; returns whether the run is valid (no failed answers)."""
    print(
        f"\nmedians of {args.rounds} round(s) of {args.seconds} s; wrk -t1, keep-alive; "
        "errors summed over rounds (non-2xx answers / socket errors)"
    )
    header = (
        f"{'scenario':<16} {'server':<8}{'req/s':>9} {'windows/s':>10} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'cores':>6} {'CPU us/req':>10} {'errors':>9}  req/s per round"
    )
    print(header)
    print("-" * len(header))
    valid = True
    for scenario, _, _, servers in SCENARIOS:
        for server in servers:
            r = summary[scenario][server]
            valid &= not (r["non_2xx"] or r["socket_errors"])
            per_round = " / ".join(f"{x:.0f}" for x in r["rps_per_round"])
            print(
                f"{LABELS[scenario]:<16} {server:<8}{r['rps']:>9.1f} {r['windows_per_s']:>10.1f} "
                f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['server_cores']:>6.2f} "
                f"{r['cpu_us_per_request']:>10.0f} {r['non_2xx']:>4}/{r['socket_errors']:<4}  {per_round}"
            )
    two = summary["c32"]["ours-2w"]["rps"] / summary["c32"]["ours"]["rps"]
    print(f"\n--workers 2 / 1 worker, c32 req/s: {two:.2f}x (2 cores, shared with wrk)")
    print("\ntargets (issue 10):")
    for t in targets(summary):
        unit = " ms" if t["unit"] == "ms" else "x"
        print(f"  {'PASS' if t['met'] else 'FAIL'}  {t['target']:<50} measured {t['measured']:.2f}{unit}")
    if not valid:
        print("\nINVALID: some answers failed (non-2xx or socket errors above); the figures do not count")
        for scenario, _, _, servers in SCENARIOS:
            for server in servers:
                r = summary[scenario][server]
                if r["non_2xx"] or r["socket_errors"]:
                    print(
                        f"  {LABELS[scenario]} {server}: statuses {r['statuses']}, "
                        f"{r['socket_errors']} socket errors of {r['requests']} requests"
                    )
    return valid


def markdown_table(report: dict) -> str:
    """benchmarks/README.md's serving table and target lines, from a saved --output report."""
    summary = report["summary"]
    lines = [
        "| scenario | server | req/s | windows/s | p50 ms | p99 ms | server cores | CPU us/request | "
        "errors | req/s per round |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for scenario, _, _, servers in SCENARIOS:
        for server in servers:
            r = summary[scenario][server]
            per_round = " / ".join(f"{x:.0f}" for x in r["rps_per_round"])
            lines.append(
                f"| {LABELS[scenario]} | {server} | {r['rps']:.1f} | {r['windows_per_s']:.1f} | "
                f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['server_cores']:.2f} | "
                f"{r['cpu_us_per_request']:.0f} | {r['non_2xx'] + r['socket_errors']} | {per_round} |"
            )
    two = summary["c32"]["ours-2w"]["rps"] / summary["c32"]["ours"]["rps"]
    lines += [
        "",
        f"`--workers 2` / 1 worker at c32: {two:.2f}x req/s.",
        "",
        "Targets (issue 10), as printed:",
    ]
    for t in report["targets"]:
        unit = " ms" if t["unit"] == "ms" else "x"
        lines.append(f"- {'PASS' if t['met'] else 'FAIL'} {t['target']}: measured {t['measured']:.2f}{unit}")
    forward = report["forward_ms_per_window"]
    lines += [
        "",
        f"Raw network forward per window: {forward['alone']:.3f} ms alone, "
        f"{forward['batch_of_32']:.4f} ms in a batch of 32.",
    ]
    return "\n".join(lines)


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
    parser.add_argument("--tracking-uri", help="with --model-uri (default: $MLFLOW_TRACKING_URI)")
    parser.add_argument("--model-uri", help="serve this model instead of training the issue's")
    parser.add_argument("--quick", action="store_true", help="train for 1 epoch (trying the script out)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10, help="length of each wrk run")
    parser.add_argument("--warmup-seconds", type=int, default=2, help="per scenario and server; 0: none")
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between wrk runs")
    parser.add_argument("--heavy-rounds", type=int, default=2, help="heavy-neighbour rounds (0: skip)")
    parser.add_argument("--output", type=Path, help="write the raw runs and the summary as JSON")
    parser.add_argument(
        "--runtime",
        choices=("auto", "torch", "onnx"),
        default="auto",
        help="INFERENCE_RUNTIME of the servers",
    )
    parser.add_argument(
        "--forecast-log",
        action="store_true",
        help="instead: the forecast log's cost, off vs sqlite vs postgres vs a failing database "
        "(benchmarks/forecast_log_bench.py)",
    )
    parser.add_argument(
        "--table",
        type=Path,
        metavar="RESULTS_JSON",
        help="print the README table of a saved --output; no run",
    )
    args = parser.parse_args()
    if args.table:
        print(markdown_table(json.loads(args.table.read_text())))
        return
    if args.rounds < 1 or args.seconds < 1:
        parser.error("--rounds and --seconds must be at least 1")
    ensure_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    tracking_uri, model_uri = model_to_serve(args, workdir, lambda into: train_issue_model(into, args.quick))
    if args.forecast_log:
        import forecast_log_bench

        forecast_log_bench.run(args, workdir, tracking_uri, model_uri, ONE_THREAD)
        return

    import mlflow
    import torch

    torch.set_num_threads(1)  # before the load: ONNX Runtime's session takes torch's thread count
    mlflow.set_tracking_uri(tracking_uri)
    predictor = mlflow.pyfunc.load_model(model_uri).unwrap_python_model().predictor
    predictor.use_runtime(args.runtime)
    served = {**ONE_THREAD, "INFERENCE_RUNTIME": args.runtime}
    rng = np.random.default_rng(0)
    windows = predictor.scaler.mean[0] + rng.normal(0, 3, size=(200, predictor.lookback))
    body = bodies(windows)

    print(
        f"starting the three servers (model {model_uri}, L={predictor.lookback}, H={predictor.horizon}) ..."
    )
    urls: dict[str, ServerURL] = {}
    neighbour: dict[str, list[WrkResult]] = {}
    with contextlib.ExitStack() as stack:
        base = {
            "ours": stack.enter_context(
                prediction_service(workdir, tracking_uri, model_uri, served, quiet=True)
            ),
            "ours-2w": stack.enter_context(
                prediction_service(workdir, tracking_uri, model_uri, served, quiet=True, workers=2)
            ),
            "mlflow": stack.enter_context(mlflow_model_server(workdir, tracking_uri, model_uri, served)),
            "floor": stack.enter_context(http_floor(workdir, predictor.horizon)),
        }
        paths = {
            "ours": "/v1/predict",
            "ours-2w": "/v1/predict",
            "mlflow": "/invocations",
            "floor": "/v1/predict",
        }
        urls = {name: base[name] + paths[name] for name in SERVERS}
        pids = {name: base[name].pid for name in SERVERS}
        warmup, runs = run_rounds(urls, pids, body, args, workdir)
        if args.heavy_rounds:
            print(f"heavy neighbour: {args.heavy_rounds} round(s) ...", flush=True)
            neighbour = heavy_neighbour(
                urls["ours"], body["ours"][1], args.heavy_rounds, args.seconds, workdir
            )
    for name in SERVERS:
        if leftovers := end_leftovers(base[name].pid):
            print(f"  {name}: processes it started outlived it by 10 s: {leftovers} (ended by this script)")
    single, batched = forward_cost(predictor, windows)

    summary = summarise(runs)
    print(
        f"\nmodel {model_uri} (L={predictor.lookback}, H={predictor.horizon}); "
        f"servers: ours = service.main:create_app (uvicorn, 1 process), ours-2w = the same with --workers 2, "
        f"mlflow = mlflow models serve "
        f"--env-manager local, floor = benchmarks/floor_app.py (uvicorn, 1 process)"
    )
    valid = print_summary(summary, args)
    print(
        f"\nraw network forward per window ({predictor.runtime.name}): {1e3 * single:.3f} ms alone, "
        f"{1e3 * batched:.4f} ms in a batch of 32"
    )
    if neighbour:
        print_heavy_neighbour(neighbour, args.seconds)
    if args.output:
        report = {
            "model_uri": model_uri,
            "trained_with": None if args.model_uri else train_command(args.quick),
            "lookback": predictor.lookback,
            "horizon": predictor.horizon,
            "quick": args.quick and not args.model_uri,
            "rounds": args.rounds,
            "seconds": args.seconds,
            "valid": valid,
            "summary": summary,
            "targets": targets(summary),
            "forward_ms_per_window": {"alone": 1e3 * single, "batch_of_32": 1e3 * batched},
            "runtime": args.runtime,
            "warmup": warmup,
            "runs": runs,
            "heavy_neighbour": {k: [as_record(r) for r in v] for k, v in neighbour.items()},
        }
        args.output.write_text(json.dumps(report, indent=2))
        print(f"\nwrote {args.output}")
    if not valid:
        sys.exit(1)


if __name__ == "__main__":
    main()
