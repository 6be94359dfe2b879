"""Peer rows for the ETTh1 tables, reproducible from this repository: Darts' BlockRNN LSTM (with
and without RevIN) and neuralforecast's LSTM, trained on the same windows as this project's `lstm`
(2 layers x 64, L=96), which runs in the same invocation so training speed is compared side by
side too.

    pip install -e '.[peers]' -c requirements.lock      # darts, neuralforecast (not in make test)
    .venv/bin/python benchmarks/peers.py [--horizons 24,96] [--seeds 1] [--epochs 10] [--threads 1]

Same protocol as ett_benchmark.py (its split, its z-scoring with the train rows' statistics, every
test window with stride 1: 2881 - H of them): the peers get the z-scored series (train rows to fit,
validation rows for early stopping, patience 3) and forecast every test window from its own L
values; MSE and MAE on the z-scored scale. Same network size everywhere: LSTM 2 layers x 64
(Darts: `hidden_dim=64, n_rnn_layers=2`; neuralforecast: `encoder_hidden_size=64,
encoder_n_layers=2`), batch 128, Adam(W) lr 1e-3, up to --epochs epochs. Seconds per epoch are
each library's whole fit time (validation included) over the epochs it ran.

Raw results: one JSON line per run appended to benchmarks/results/peers-runs.jsonl (library,
model, horizon, seed, versions, figures, seconds); `--render` prints the table from that file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

# Darts' and neuralforecast's loaders ask for pinned memory on a CPU machine; nothing to act on
warnings.filterwarnings("ignore", message="'pin_memory' argument is set as true")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from ett_benchmark import run_config  # noqa: E402
from provenance import commit  # noqa: E402

RAW_RESULTS = REPO / "benchmarks" / "results" / "peers-runs.jsonl"
LOOKBACK = 96
HIDDEN, LAYERS, BATCH, LR, PATIENCE = 64, 2, 128, 1e-3, 3


class Protocol:
    """The z-scored OT series and the test windows exactly as ett_benchmark's runs see them."""

    def __init__(self, horizon: int) -> None:
        from forecaster.data.datamodule import prepare_series
        from forecaster.data.source import load_from_config

        config = run_config(LOOKBACK, horizon, "lstm", 0, 1, "cpu").forecast_config()
        prepared = prepare_series(load_from_config(config.data), config)
        self.horizon = horizon
        self.mean, self.std = float(prepared.scaler.mean[0]), float(prepared.scaler.std[0])
        frame = prepared.series.frame
        self.times = frame.index
        self.z = (frame.iloc[:, 0].to_numpy(np.float64) - self.mean) / self.std
        borders = prepared.borders
        self.train_end, self.val_end = borders.train_end, borders.val_end
        test = prepared.windows("test")
        self.test_past = (test.past()[:, :, 0] - self.mean) / self.std  # (N, L)
        self.test_target = (test.target() - self.mean) / self.std  # (N, H)
        self.test_start = borders.val_end  # first target row of the first test window
        self.test_rows = len(self.test_target) + horizon - 1  # rows the test targets cover

    def scores(self, forecast: np.ndarray) -> dict[str, float]:
        error = forecast - self.test_target
        return {"mse": float(np.mean(error**2)), "mae": float(np.mean(np.abs(error)))}


def run_darts(protocol: Protocol, seed: int, epochs: int, revin: bool) -> dict:
    from darts import TimeSeries
    from darts.models import BlockRNNModel
    from pytorch_lightning.callbacks import EarlyStopping

    def series(values: np.ndarray, start: int) -> TimeSeries:
        return TimeSeries.from_times_and_values(
            protocol.times[start : start + len(values)], values.astype(np.float32)
        )

    p, h = protocol, protocol.horizon
    train = series(p.z[: p.train_end], 0)
    val_from = p.train_end - LOOKBACK
    val = series(p.z[val_from : p.val_end], val_from)
    model = BlockRNNModel(
        input_chunk_length=LOOKBACK,
        output_chunk_length=h,
        model="LSTM",
        hidden_dim=HIDDEN,
        n_rnn_layers=LAYERS,
        dropout=0.1,
        batch_size=BATCH,
        n_epochs=epochs,
        optimizer_kwargs={"lr": LR},
        random_state=seed,
        use_reversible_instance_norm=revin,
        pl_trainer_kwargs={
            "accelerator": "cpu",
            "callbacks": [EarlyStopping("val_loss", patience=PATIENCE)],
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "logger": False,
        },
    )
    started = time.perf_counter()
    model.fit(train, val_series=val, verbose=False)
    seconds = time.perf_counter() - started
    ran = model.epochs_trained or epochs
    first = p.test_start - LOOKBACK
    windows = [series(p.test_past[i], first + i) for i in range(len(p.test_past))]
    predicted = model.predict(n=h, series=windows, verbose=False, batch_size=512)
    forecast = np.stack([s.values()[:, 0] for s in predicted])
    return {"seconds": seconds, "epochs": ran, **p.scores(forecast)}


def run_neuralforecast(protocol: Protocol, seed: int, epochs: int) -> dict:
    import pandas as pd
    from neuralforecast import NeuralForecast
    from neuralforecast.models import LSTM

    p, h = protocol, protocol.horizon
    end = p.test_start + p.test_rows
    frame = pd.DataFrame({"unique_id": "OT", "ds": p.times[:end], "y": p.z[:end]})
    windows_per_epoch = (p.train_end - LOOKBACK - h + 1) // BATCH + 1
    model = LSTM(
        h=h,
        input_size=LOOKBACK,
        encoder_hidden_size=HIDDEN,
        encoder_n_layers=LAYERS,
        encoder_dropout=0.1,
        decoder_hidden_size=HIDDEN,
        max_steps=epochs * windows_per_epoch,
        val_check_steps=windows_per_epoch,
        early_stop_patience_steps=PATIENCE,
        learning_rate=LR,
        windows_batch_size=BATCH,
        scaler_type="identity",  # the series is z-scored already, as for every other row
        random_seed=seed,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        accelerator="cpu",
    )
    started = time.perf_counter()
    forecaster = NeuralForecast(models=[model], freq="h")
    result = forecaster.cross_validation(
        frame, val_size=p.val_end - p.train_end, test_size=p.test_rows, n_windows=None, step_size=1
    )
    seconds = time.perf_counter() - started  # fit, then one forecast per test window
    result = result.sort_values(["cutoff", "ds"])
    forecast = result["LSTM"].to_numpy().reshape(-1, h)
    truth = result["y"].to_numpy().reshape(-1, h)
    if truth.shape != p.test_target.shape or not np.allclose(truth, p.test_target, atol=1e-6):
        raise SystemExit(
            f"neuralforecast scored other windows than ours: {truth.shape} vs {p.test_target.shape}"
        )
    trajectory = forecaster.models[0].train_trajectories  # (global step, loss) per training step
    steps = trajectory[-1][0] + 1 if trajectory else epochs * windows_per_epoch
    return {"seconds": seconds, "epochs": steps / windows_per_epoch, **p.scores(forecast)}


def run_ours(protocol: Protocol, seed: int, epochs: int, tracking_uri: str) -> dict:
    from pipelines.train import run_training

    config = run_config(LOOKBACK, protocol.horizon, "lstm", seed, epochs, "cpu")
    started = time.perf_counter()
    outcome = run_training(config, tracking_uri, quiet=True)
    seconds = time.perf_counter() - started
    forecast = (outcome.test_forecasts - protocol.mean) / protocol.std
    return {"seconds": seconds, "epochs": outcome.epochs, **protocol.scores(forecast)}


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("darts", "neuralforecast", "torch", "pytorch-lightning")}


def render(runs: list[dict]) -> str:
    """Mean over seeds per (model, horizon): MSE/MAE (+- their sample std when n > 1) and seconds
    per epoch."""
    horizons = sorted({r["horizon"] for r in runs})
    models = list(dict.fromkeys(r["model"] for r in runs))
    lines = ["| model (L=96, LSTM 2 x 64) | " + " | ".join(f"H={h}" for h in horizons) + " |"]
    lines.append("|---|" + "---|" * len(horizons))
    for model in models:
        cells = []
        for h in horizons:
            mine = [r for r in runs if r["model"] == model and r["horizon"] == h]
            if not mine:
                cells.append("")
                continue
            mse, mae = (statistics.mean(r[k] for r in mine) for k in ("mse", "mae"))
            spread = ""
            if len(mine) > 1:  # sample std over seeds, as the ETT tables give it
                spread = " +-{:.4f}/{:.4f}".format(
                    *(statistics.stdev(r[k] for r in mine) for k in ("mse", "mae"))
                )
            per_epoch = statistics.mean(r["seconds"] / max(r["epochs"], 1) for r in mine)
            cells.append(f"{mse:.4f}/{mae:.4f}{spread}, {per_epoch:.1f} s/epoch (n={len(mine)})")
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--horizons", default="24,96")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--results", type=Path, default=RAW_RESULTS)
    parser.add_argument(
        "--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    )
    parser.add_argument("--models", help="comma-separated: only these rows (default: all)")
    parser.add_argument("--render", action="store_true", help="only print the table from --results")
    args = parser.parse_args()
    read = [json.loads(x) for x in args.results.read_text().splitlines()] if args.results.exists() else []
    if args.render:
        print(render(read))
        return
    import torch

    from pipelines.cli import quiet_libraries

    quiet_libraries()
    torch.set_num_threads(args.threads)
    runners = {
        "ours: lstm": lambda p, s: run_ours(p, s, args.epochs, args.tracking_uri),
        "Darts BlockRNN LSTM": lambda p, s: run_darts(p, s, args.epochs, revin=False),
        "Darts BlockRNN LSTM + RevIN": lambda p, s: run_darts(p, s, args.epochs, revin=True),
        "neuralforecast LSTM": lambda p, s: run_neuralforecast(p, s, args.epochs),
    }
    if args.models:
        runners = {name: run for name, run in runners.items() if name in args.models.split(",")}
    meta = {"commit": commit(), "versions": versions(), "threads": args.threads}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    for horizon in (int(h) for h in args.horizons.split(",")):
        protocol = Protocol(horizon)
        for seed in range(args.seeds):
            for model, run in runners.items():  # side by side: every model per horizon and seed
                record = {"model": model, "horizon": horizon, "seed": seed, **run(protocol, seed), **meta}
                with args.results.open("a") as raw:
                    raw.write(json.dumps(record) + "\n")
                print(
                    f"H={horizon} seed {seed} {model}: MSE {record['mse']:.4f} MAE {record['mae']:.4f}, "
                    f"{record['seconds']:.0f} s, {record['epochs']:.1f} epochs",
                    flush=True,
                )
    print("\n" + render([json.loads(x) for x in args.results.read_text().splitlines()]))


if __name__ == "__main__":
    main()
