"""Serving latency by decoder at H=96 (issue 11): the same API serving, side by side in one run,

  - `lstm`: many-to-one LSTM 2 x 64 (a direct head: all H values from one state),
  - `seq2seq-attention`: GRU 1 x 64 encoder-decoder with Bahdanau attention and the step-by-step
    (autoregressive) decoder: H Python-level decoder steps, each attending over L encoder states,
  - `seg-seq2seq-attention`: the benchmark's segment seq2seq + attention (GRU 1 x 128, one-day
    segments, the direct decoder: H/24 decoder steps in one fused call, attention in one batch),

all at look-back 96 on ETTh1, each loaded by `wrk` in turn (the order reverses every round):
`-c1` (latency of one request alone) and `-c32` (throughput, and the server's CPU per request:
its whole process group's CPU time while wrk ran), one window per request, plus the network's own
CPU time per window (the network call alone, inside the predictor: the runtime's, with the
scaling around it excluded) at batch 1, 32 and 256. Accuracy is not measured here (the models
train for one short epoch): see ett_benchmark.py for that.

``--runtimes torch,onnx`` measures every model once per runtime (issue 33): a server each, with
INFERENCE_RUNTIME set, so torch eager and ONNX Runtime on the export verified at registration are
loaded by wrk in the same rounds; the default (``auto``) measures what the service runs unset
(ONNX Runtime on a CPU).

    .venv/bin/python benchmarks/decoder_serving.py [--rounds 3] [--seconds 10] [--horizon 96]
        [--runtimes auto | torch,onnx] [--output results.json]
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

from serve_bench import ONE_THREAD  # noqa: E402
from wrk import Wrk, ensure_wrk, group_cpu_seconds  # noqa: E402

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
NETWORK_BATCHES = (1, 32, 256)  # windows per network call, for its CPU per window


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
    windows = prepared.windows("test").past()[: max(NETWORK_BATCHES), :, 0]  # (256, L)
    return json.dumps({"series": [{"values": windows[0].round(4).tolist()}]}).encode(), (predictor, windows)


class TimedNetwork:
    """The predictor's network call with its CPU time counted: what the runtime alone costs."""

    def __init__(self, runtime) -> None:
        self.runtime, self.name, self.cpu_s = runtime, runtime.name, 0.0

    def __call__(self, batch):
        started = time.process_time()
        out = self.runtime(batch)
        self.cpu_s += time.process_time() - started
        return out


def network_cpu(predictor, windows, runtime: str) -> dict[str, float]:
    """Median CPU microseconds per window of the network call at each of NETWORK_BATCHES, one
    thread, with ``runtime`` (the one actually used is under ``runtime``: a model without a
    verified export runs torch whatever is asked)."""
    inner = predictor.use_runtime(runtime).runtime  # one thread: main() set it before the load
    timed = predictor.runtime = TimedNetwork(inner)
    costs: dict[str, float] = {"runtime": timed.name}
    for size in NETWORK_BATCHES:
        batch, samples = windows[:size], []
        for _ in range(max(5, 400 // size)):
            timed.cpu_s = 0.0
            predictor.predict(batch, return_attention=predictor.has_attention)
            samples.append(timed.cpu_s / size)
        costs[f"network_us_per_window_b{size}"] = 1e6 * statistics.median(samples)
    predictor.runtime = inner
    return costs


def served_with(url: str) -> str:
    """The runtime a server says it runs (GET /v1/model)."""
    from urllib.request import urlopen

    with urlopen(f"{url}/v1/model", timeout=10) as answer:
        return json.load(answer)["runtime"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--horizon", type=int, default=96)
    parser.add_argument(
        "--runtimes",
        default="auto",
        help="comma-separated INFERENCE_RUNTIME values, a server each (auto, torch, onnx)",
    )
    parser.add_argument("--output", type=Path, help="write every wrk run and the summary as JSON")
    args = parser.parse_args()
    runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
    import torch

    torch.set_num_threads(1)  # before any model loads: ONNX Runtime's sessions take this count too
    ensure_wrk()
    runs: list[dict] = []
    servers = [(name, runtime) for name in DECODERS for runtime in runtimes]
    with tempfile.TemporaryDirectory(prefix="decoder-serving-") as tmp, contextlib.ExitStack() as stack:
        workdir = Path(tmp)
        uri = f"sqlite:///{workdir / 'mlflow.db'}"
        models, bodies, network = {}, {}, {}
        for name in DECODERS:
            print(f"training {name} (L={LOOKBACK}, H={args.horizon}, one short epoch) ...", flush=True)
            models[name] = train(workdir, uri, name, args.horizon)
            bodies[name], (predictor, windows) = window_body(uri, models[name])
            for runtime in runtimes:
                network[name, runtime] = network_cpu(predictor, windows, runtime)
        urls = {}
        for name, runtime in servers:
            log_dir = workdir / f"{name}-{runtime}"  # the server's log
            log_dir.mkdir()
            env = {**ONE_THREAD, "INFERENCE_RUNTIME": runtime}
            urls[name, runtime] = stack.enter_context(
                prediction_service(log_dir, uri, models[name], env=env, quiet=True)
            )
        for name, runtime in servers:
            network[name, runtime]["served_with"] = served_with(urls[name, runtime])
        for name, runtime in servers:  # warm-up, not counted
            Wrk(f"{urls[name, runtime]}/v1/predict", bodies[name], 8, 2, workdir=workdir).run()
        for round_no in range(1, args.rounds + 1):
            order = servers if round_no % 2 else list(reversed(servers))
            for connections in (1, 32):
                for name, runtime in order:
                    url = urls[name, runtime]
                    before = group_cpu_seconds(url.pid)
                    result = Wrk(
                        f"{url}/v1/predict", bodies[name], connections, args.seconds, workdir=workdir
                    )
                    record = result.run()
                    cpu = group_cpu_seconds(url.pid) - before
                    runs.append(
                        {
                            "round": round_no,
                            "model": name,
                            "runtime": runtime,
                            "connections": connections,
                            **record.as_dict(),
                            "server_cpu_s": cpu,
                            "cpu_us_per_request": 1e6 * cpu / record.requests if record.requests else 0.0,
                        }
                    )
                    time.sleep(0.5)
            print(f"round {round_no}/{args.rounds} done", flush=True)
    summary = summarise(runs, network)
    print_table(summary, args.horizon)
    if args.output:
        args.output.write_text(
            json.dumps({"horizon": args.horizon, "runs": runs, "summary": summary}, indent=1)
        )


def summarise(runs: list[dict], network: dict[tuple[str, str], dict]) -> dict[str, dict]:
    """Medians over rounds per model, runtime and connection count; failed answers summed. Keyed
    ``model`` for the default single runtime (as before), ``model/runtime`` when several."""
    several = len({runtime for _, runtime in network}) > 1
    summary = {}
    for (name, runtime), costs in network.items():
        mine = {
            c: [r for r in runs if (r["model"], r["runtime"], r["connections"]) == (name, runtime, c)]
            for c in (1, 32)
        }
        summary[f"{name}/{runtime}" if several else name] = {
            "model": name,
            "asked": runtime,
            **costs,
            "c1_p50_ms": statistics.median(r["latency_ms"]["p50"] for r in mine[1]),
            "c1_p99_ms": statistics.median(r["latency_ms"]["p99"] for r in mine[1]),
            "c32_rps": statistics.median(r["rps"] for r in mine[32]),
            "c32_p99_ms": statistics.median(r["latency_ms"]["p99"] for r in mine[32]),
            "c32_cpu_us_per_request": statistics.median(r["cpu_us_per_request"] for r in mine[32]),
            "failed": sum(
                sum(v for k, v in r["statuses"].items() if not k.startswith("2")) for r in mine[1] + mine[32]
            ),
        }
    return summary


def print_table(summary: dict[str, dict], horizon: int) -> None:
    print(
        f"\nServing at L={LOOKBACK}, H={horizon} (medians over rounds; one thread per server; network: "
        "CPU us per window of the network call alone, at batch 1 / 32 / 256):"
    )
    print(
        "| model | runtime (served) | network b1 | b32 | b256 | c1 p50 ms | c1 p99 ms | c32 req/s | c32 p99 ms "
        "| c32 CPU us/request | failed |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in summary.values():
        network = " | ".join(f"{s[f'network_us_per_window_b{b}']:.0f}" for b in NETWORK_BATCHES)
        print(
            f"| {s['model']} | {s['runtime']} ({s['served_with']}) | {network} | {s['c1_p50_ms']:.2f} | {s['c1_p99_ms']:.2f} "
            f"| {s['c32_rps']:.0f} | {s['c32_p99_ms']:.1f} | {s['c32_cpu_us_per_request']:.0f} | {s['failed']} |"
        )


if __name__ == "__main__":
    main()
