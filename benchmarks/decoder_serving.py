"""Serving latency by decoder at H=96 (issue 11): the same API serving, side by side in one run,

  - `lstm`: many-to-one LSTM 2 x 64 (a direct head: all H values from one state),
  - `seq2seq-attention`: GRU 1 x 64 encoder-decoder with Bahdanau attention and the step-by-step
    (autoregressive) decoder: H Python-level decoder steps, each attending over L encoder states,
  - `seg-seq2seq-attention`: the benchmark's segment seq2seq + attention (GRU 1 x 128, one-day
    segments, the direct decoder: H/24 decoder steps in one fused call, attention in one batch),

all at look-back 96 on ETTh1, each loaded by `wrk` in turn (the order reverses every round):
`-c1` (latency of one request alone) and `-c32` (throughput), one window per request, plus the
bare network's forward time per window. Accuracy is not measured here (the models train for one
short epoch): see ett_benchmark.py for that.

    .venv/bin/python benchmarks/decoder_serving.py [--rounds 3] [--seconds 10] [--horizon 96]
        [--output results.json]
"""

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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from serve_bench import ONE_THREAD, forward_cost  # noqa: E402
from wrk import Wrk, ensure_wrk  # noqa: E402

from tests.servers import prediction_service  # noqa: E402

LOOKBACK = 96
DECODERS = {
    "lstm": ["model.cell=lstm", "model.hidden_size=64", "model.layers=2"],
    "seq2seq-attention": [
        "model.architecture=seq2seq",
        "model.cell=gru",
        "model.attention=bahdanau",
        "model.hidden_size=64",
        "model.layers=1",
    ],
    "seg-seq2seq-attention": [
        "model.architecture=seq2seq",
        "model.decoder=direct",
        "model.cell=gru",
        "model.attention=bahdanau",
        "model.hidden_size=128",
        "model.layers=1",
        "model.segment_length=24",
    ],
}
SHORT_TRAINING = ["train.epochs=1", "train.limit_train_batches=20", "train.progress_bar=false"]


def train(workdir: Path, uri: str, name: str, horizon: int) -> str:
    """One short `forecast train` of ``name`` on ETTh1 (OT), registered as ``name``."""
    settings = [*DECODERS[name], *SHORT_TRAINING, f"window.lookback={LOOKBACK}", f"window.horizon={horizon}"]
    command = [sys.executable, "-m", "pipelines.cli", "train", "--data", "etth1", "--quiet"]
    command += [arg for s in settings for arg in ("--set", s)]
    command += ["--register", name, "--tracking-uri", uri, "--json"]
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"training {name} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    return f"models:/{name}/{json.loads(done.stdout.strip().splitlines()[-1])['registered_version']}"


def window_body(uri: str, model_uri: str) -> tuple[bytes, object]:
    """One real ETTh1 window of L values as a request body, and the loaded predictor."""
    import mlflow

    from forecaster.data.datamodule import prepare_series
    from forecaster.data.source import load_from_config

    mlflow.set_tracking_uri(uri)
    predictor = mlflow.pyfunc.load_model(model_uri).unwrap_python_model().predictor
    prepared = prepare_series(load_from_config(predictor.config.data), predictor.config)
    windows = prepared.windows("test").past()[:64, :, 0]  # (64, L)
    return json.dumps({"series": [{"values": windows[0].round(4).tolist()}]}).encode(), (predictor, windows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--horizon", type=int, default=96)
    parser.add_argument("--output", type=Path, help="write every wrk run and the summary as JSON")
    args = parser.parse_args()
    ensure_wrk()
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="decoder-serving-") as tmp, contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        uri = f"sqlite:///{workdir / 'mlflow.db'}"
        models, bodies, forward = {}, {}, {}
        for name in DECODERS:
            print(f"training {name} (L={LOOKBACK}, H={args.horizon}, one short epoch) ...", flush=True)
            models[name] = train(workdir, uri, name, args.horizon)
            bodies[name], (predictor, windows) = window_body(uri, models[name])
            forward[name] = forward_cost(predictor, windows)
            (workdir / name).mkdir()  # the server's log
        urls = {
            name: stack.enter_context(
                prediction_service(workdir / name, uri, models[name], env=ONE_THREAD, quiet=True)
            )
            for name in DECODERS
        }
        for name in DECODERS:  # warm-up, not counted
            Wrk(f"{urls[name]}/v1/predict", bodies[name], 8, 2, workdir=workdir).run()
        for round_no in range(1, args.rounds + 1):
            order = list(DECODERS) if round_no % 2 else list(reversed(DECODERS))
            for connections in (1, 32):
                for name in order:
                    result = Wrk(
                        f"{urls[name]}/v1/predict", bodies[name], connections, args.seconds, workdir=workdir
                    )
                    record = result.run()
                    runs.append(
                        {"round": round_no, "model": name, "connections": connections, **record.as_dict()}
                    )
                    time.sleep(0.5)
            print(f"round {round_no}/{args.rounds} done", flush=True)
    summary = summarise(runs, forward)
    print_table(summary, args.horizon)
    if args.output:
        args.output.write_text(
            json.dumps({"horizon": args.horizon, "runs": runs, "summary": summary}, indent=1)
        )


def summarise(runs: list[dict], forward: dict[str, tuple[float, float]]) -> dict[str, dict]:
    """Medians over rounds per model and connection count; failed answers summed."""
    summary = {}
    for name, (single, batched) in forward.items():
        mine = {c: [r for r in runs if r["model"] == name and r["connections"] == c] for c in (1, 32)}
        summary[name] = {
            "c1_p50_ms": statistics.median(r["latency_ms"]["p50"] for r in mine[1]),
            "c1_p99_ms": statistics.median(r["latency_ms"]["p99"] for r in mine[1]),
            "c32_rps": statistics.median(r["rps"] for r in mine[32]),
            "c32_p99_ms": statistics.median(r["latency_ms"]["p99"] for r in mine[32]),
            "forward_ms_one_window": 1e3 * single,
            "forward_ms_per_window_in_32": 1e3 * batched,
            "failed": sum(
                sum(v for k, v in r["statuses"].items() if not k.startswith("2")) for r in mine[1] + mine[32]
            ),
        }
    return summary


def print_table(summary: dict[str, dict], horizon: int) -> None:
    print(f"\nServing at L={LOOKBACK}, H={horizon} (medians over rounds; one torch thread per server):")
    print(
        "| model | c1 p50 ms | c1 p99 ms | c32 req/s | c32 p99 ms | forward ms, 1 window | forward ms/window in 32 | failed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, s in summary.items():
        print(
            f"| {name} | {s['c1_p50_ms']:.2f} | {s['c1_p99_ms']:.2f} | {s['c32_rps']:.0f} | {s['c32_p99_ms']:.1f} | "
            f"{s['forward_ms_one_window']:.2f} | {s['forward_ms_per_window_in_32']:.3f} | {s['failed']} |"
        )


if __name__ == "__main__":
    main()
