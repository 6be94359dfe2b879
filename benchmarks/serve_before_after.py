"""The predict path before and after a change, side by side in one run: this working tree's API
and a git ref's (checked out into a temporary worktree), serving the same model, loaded in turn by
`wrk` (the order reverses every round: these machines are noisy, so only ratios within one run
mean anything).

    .venv/bin/python benchmarks/serve_before_after.py [--ref HEAD] [--rounds 5] [--seconds 10]
        [--model-uri URI --tracking-uri URI] [--output benchmarks/results/serve_before_after.json]

Without --model-uri it trains serve_bench's model (the issue-10 LSTM, L=96, H=24) for one epoch
into a temporary store: the speed of a forward pass does not depend on what the weights learnt.
Both APIs run as serve_bench runs ours (one process, one torch thread, uvicorn quiet); the ref's
code is put first on PYTHONPATH so its `service` and `forecaster` packages are the ones imported.

Per scenario (c32 and c1, one window per request) it prints the medians over rounds of req/s,
p50, p99 and server CPU per request for each side, and after/before ratios; --output keeps every
run and the summary as JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from serve_bench import ONE_THREAD, model_to_serve, train_issue_model  # noqa: E402
from wrk import Wrk, ensure_wrk, group_cpu_seconds  # noqa: E402

from tests.servers import prediction_service  # noqa: E402

SCENARIOS = (("c32", 32), ("c1", 1))
SIDES = ("before", "after")


@contextlib.contextmanager
def worktree(ref: str):
    """``ref`` checked out (detached) into a temporary directory, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="serve-before-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), ref], cwd=REPO, check=True,
                   capture_output=True)  # fmt: skip
    try:
        yield folder
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=REPO, capture_output=True)


def one_run(url: str, pid: int, body: bytes, connections: int, seconds: int, workdir: Path) -> dict:
    before = group_cpu_seconds(pid)
    result = Wrk(url, body, connections, seconds, workdir=workdir).run()
    cpu = group_cpu_seconds(pid) - before
    return {
        **result.as_dict(),
        "non_2xx": result.non_2xx,
        "socket_errors": result.socket_errors,
        "cpu_us_per_request": 1e6 * cpu / result.requests if result.requests else 0.0,
    }


def summarise(runs: list[dict]) -> dict[str, dict[str, dict[str, float]]]:
    """Medians over rounds per scenario and side, and the after/before ratio of each."""
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for scenario, _ in SCENARIOS:
        sides = {}
        for side in SIDES:
            mine = [r for r in runs if r["scenario"] == scenario and r["side"] == side]
            sides[side] = {
                "rps": statistics.median(r["rps"] for r in mine),
                "p50_ms": statistics.median(r["latency_ms"]["p50"] for r in mine),
                "p99_ms": statistics.median(r["latency_ms"]["p99"] for r in mine),
                "cpu_us_per_request": statistics.median(r["cpu_us_per_request"] for r in mine),
                "failed": sum(r["non_2xx"] + r["socket_errors"] for r in mine),
            }
        sides["ratio"] = {
            key: sides["after"][key] / sides["before"][key] if sides["before"][key] else float("nan")
            for key in ("rps", "p50_ms", "p99_ms", "cpu_us_per_request")
        }
        summary[scenario] = sides
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ref", default="HEAD", help="the 'before' side: a commit, branch or tag")
    parser.add_argument("--tracking-uri", help="with --model-uri (default: $MLFLOW_TRACKING_URI)")
    parser.add_argument("--model-uri", help="serve this model instead of training serve_bench's")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--output", type=Path, help="write every run and the summary as JSON")
    args = parser.parse_args()
    ensure_wrk()
    workdir = Path(tempfile.mkdtemp(prefix="serve-before-after-"))
    tracking_uri, model_uri = model_to_serve(args, workdir, lambda into: train_issue_model(into, quick=True))
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    predictor = mlflow.pyfunc.load_model(model_uri).unwrap_python_model().predictor
    window = predictor.scaler.mean[0] + np.random.default_rng(0).normal(0, 3, predictor.lookback)
    body = json.dumps({"series": [{"values": window.round(4).tolist()}]}).encode()
    runs: list[dict] = []
    with contextlib.ExitStack() as stack:
        old = stack.enter_context(worktree(args.ref))
        commit = subprocess.run(["git", "rev-parse", "--short", args.ref], cwd=REPO, capture_output=True,
                                text=True).stdout.strip()  # fmt: skip
        servers = {
            "before": stack.enter_context(
                prediction_service(
                    workdir, tracking_uri, model_uri, {**ONE_THREAD, "PYTHONPATH": str(old)}, True
                )
            ),
            "after": stack.enter_context(
                prediction_service(workdir, tracking_uri, model_uri, ONE_THREAD, True)
            ),
        }
        print(f"before = {args.ref} ({commit}), after = the working tree; model {model_uri}", flush=True)
        for side in SIDES:  # warm-up, not counted
            one_run(servers[side] + "/v1/predict", servers[side].pid, body, 32, 2, workdir)
        for round_no in range(1, args.rounds + 1):
            order = SIDES if round_no % 2 else tuple(reversed(SIDES))
            line = []
            for scenario, connections in SCENARIOS:
                for side in order:
                    record = one_run(
                        servers[side] + "/v1/predict",
                        servers[side].pid,
                        body,
                        connections,
                        args.seconds,
                        workdir,
                    )
                    runs.append({"round": round_no, "scenario": scenario, "side": side, **record})
                    line.append(f"{scenario} {side} {record['rps']:.0f}")
                    time.sleep(1.0)
            print(f"round {round_no}/{args.rounds} (req/s): " + ", ".join(line), flush=True)
    summary = summarise(runs)
    for scenario, sides in summary.items():
        print(f"\n{scenario}, one window per request (medians of {args.rounds} rounds)")
        print(f"  {'':8} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'CPU us/req':>11} {'failed':>7}")
        for side in SIDES:
            s = sides[side]
            print(f"  {side:8} {s['rps']:9.0f} {s['p50_ms']:8.2f} {s['p99_ms']:8.2f} "
                  f"{s['cpu_us_per_request']:11.0f} {s['failed']:7d}")  # fmt: skip
        r = sides["ratio"]
        print(
            f"  {'after/before':8} {r['rps']:5.3f} {r['p50_ms']:8.3f} {r['p99_ms']:8.3f} {r['cpu_us_per_request']:11.3f}"
        )
    if args.output:
        document = {
            "ref": args.ref,
            "commit": commit,
            "model_uri": model_uri,
            "runs": runs,
            "summary": summary,
        }
        args.output.write_text(json.dumps(document, indent=2) + "\n")
        print(f"\nwrote {args.output}")
    if any(sides[side]["failed"] for sides in summary.values() for side in SIDES):
        sys.exit("some requests failed: the figures above are not valid")


if __name__ == "__main__":
    main()
