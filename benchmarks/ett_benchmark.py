"""ETTh1 univariate (target OT) on the protocol of the Informer and DLinear papers, every network
beside the naive baselines and the published figures. Every configuration is a normal
`forecast train` run logged to MLflow (experiment "ett-benchmark"), so results can be compared in
the UI.

Protocol: train rows 0-8639, val 8640-11519, test 11520-14399 (12/4/4 months of 30 days; the last
3,020 rows unused); val/test inputs may start L rows before their border; z-score with the train
rows' statistics; stride-1 windows, every test window scored (2881 - H of them); MSE and MAE on
the z-scored scale (as the papers report) and MAE in degC.

    .venv/bin/python benchmarks/ett_benchmark.py                 # the CPU plan (about 40 min on 2 cores)
    .venv/bin/python benchmarks/ett_benchmark.py --full          # every network x horizon x 3 seeds (GPU)
    .venv/bin/python benchmarks/ett_benchmark.py --full --accelerator gpu --tracking-uri http://mlflow:5000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAPER_SPLIT = {"val_start": "2017-06-26", "test_start": "2017-10-24", "end": "2018-02-21"}

# name -> model settings. "seg-lstm" is the recommended recurrent model for this data: SegRNN-style
# segment inputs (24 steps = one day per RNN step) and a direct head, forecasting relative to the
# last value.
NETWORKS = {
    "rnn": {"cell": "rnn", "hidden_size": 64, "layers": 2},
    "lstm": {"cell": "lstm", "hidden_size": 64, "layers": 2},
    "gru": {"cell": "gru", "hidden_size": 64, "layers": 2},
    "bi-lstm": {"cell": "lstm", "hidden_size": 64, "layers": 2, "bidirectional": True},
    "seq2seq": {
        "architecture": "seq2seq",
        "cell": "gru",
        "attention": "none",
        "hidden_size": 64,
        "layers": 1,
    },
    "seq2seq-attention": {
        "architecture": "seq2seq",
        "cell": "gru",
        "attention": "bahdanau",
        "hidden_size": 64,
        "layers": 1,
    },
    "seg-lstm": {"cell": "lstm", "hidden_size": 128, "layers": 1, "segment_length": 24},
    "seg-gru": {"cell": "gru", "hidden_size": 128, "layers": 1, "segment_length": 24},
}

PUBLISHED = {
    96: {
        "LSTMa (Informer, AAAI 2021)": {
            24: (0.114, 0.272),
            48: (0.193, 0.358),
            168: (0.236, 0.392),
            336: (0.590, 0.698),
            720: (0.683, 0.768),
        },
        "Informer (AAAI 2021)": {
            24: (0.098, 0.247),
            48: (0.158, 0.319),
            168: (0.183, 0.346),
            336: (0.222, 0.387),
            720: (0.269, 0.435),
        },
        "Darts 0.48 BlockRNN LSTM (measured by the issue)": {24: (0.130, 0.296), 96: (0.334, 0.512)},
        "Darts BlockRNN LSTM + RevIN (measured by the issue)": {24: (0.0383, 0.152), 96: (0.0649, 0.197)},
        "neuralforecast 3.3 LSTM (measured by the issue)": {24: (0.0461, 0.166)},
    },
    336: {
        "DLinear (AAAI 2023)": {
            96: (0.056, 0.180),
            192: (0.071, 0.204),
            336: (0.098, 0.244),
            720: (0.189, 0.359),
        },
        "NLinear (AAAI 2023)": {
            96: (0.053, 0.177),
            192: (0.069, 0.204),
            336: (0.081, 0.226),
            720: (0.080, 0.226),
        },
        "PatchTST (ICLR 2023)": {
            96: (0.055, 0.179),
            192: (0.071, 0.205),
            336: (0.081, 0.225),
            720: (0.087, 0.232),
        },
    },
}

HORIZONS = {96: [24, 48, 96, 168, 336, 720], 336: [96, 192, 336, 720]}


@dataclass
class Plan:
    lookback: int
    network: str
    horizons: list[int]
    seeds: int


def cpu_plan() -> list[Plan]:
    """What fits a 2-core CPU in about 40 minutes. Seq2seq decodes step by step, so beyond H=48 it
    is left to a GPU (--full); the plain RNNs at L=336 step through 336 inputs, so one seed each."""
    return [
        Plan(96, "seg-lstm", HORIZONS[96], 3),
        *(Plan(96, n, HORIZONS[96], 1) for n in ("lstm", "gru", "rnn", "bi-lstm")),
        *(Plan(96, n, [24, 48], 1) for n in ("seq2seq", "seq2seq-attention")),
        Plan(336, "seg-lstm", HORIZONS[336], 3),
        Plan(336, "seg-gru", HORIZONS[336], 1),
        Plan(336, "lstm", HORIZONS[336], 1),
    ]


def full_plan() -> list[Plan]:
    return [Plan(lookback, n, HORIZONS[lookback], 3) for lookback in HORIZONS for n in NETWORKS]


@dataclass
class Result:
    scores: list[tuple[float, float, float]] = field(default_factory=list)  # (zMSE, zMAE, MAE degC)
    seconds: list[float] = field(default_factory=list)
    coverage: list[float] = field(default_factory=list)
    windows: int = 0


def run_config(lookback: int, horizon: int, network: str, seed: int, epochs: int, accelerator: str):
    from pipelines.config import RunConfig

    return RunConfig.model_validate(
        {
            "data": {"dataset": "etth1"},
            "split": PAPER_SPLIT,
            "window": {"lookback": lookback, "horizon": horizon, "stride": 1},
            "model": {"dropout": 0.1, "level_norm": "last", **NETWORKS[network]},
            "train": {
                "epochs": epochs,
                "patience": 3,
                "batch_size": 128,
                "learning_rate": 1e-3,
                "seed": seed,
                "progress_bar": False,
                "accelerator": accelerator,
            },
            "tracking": {
                "experiment": "ett-benchmark",
                "run_name": f"{network}-L{lookback}-H{horizon}-seed{seed}",
            },
        }
    )


def fmt(pair: tuple[float, float] | None, digits: int = 3) -> str:
    return "" if pair is None else f"{pair[0]:.{digits}f}/{pair[1]:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="every network, horizon and 3 seeds")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument(
        "--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    )
    parser.add_argument("--output", default=str(REPO / "benchmarks" / "results"))
    args = parser.parse_args()

    import torch

    from forecaster.data.datamodule import prepare_series
    from forecaster.data.source import load_from_config
    from pipelines.cli import quiet_libraries
    from pipelines.train import run_training

    quiet_libraries()
    torch.set_num_threads(os.cpu_count() or 1)
    plans = full_plan() if args.full else cpu_plan()
    probe = run_config(96, 24, "lstm", 0, 1, args.accelerator).forecast_config()
    std = float(prepare_series(load_from_config(probe.data), probe).scaler.std[0])  # OT, train rows
    results: dict[tuple[int, str, int], Result] = {}
    baselines: dict[tuple[int, int], dict[str, tuple[float, float, float]]] = {}
    started = time.perf_counter()
    for plan in plans:
        for horizon in plan.horizons:
            for seed in range(plan.seeds):
                config = run_config(plan.lookback, horizon, plan.network, seed, args.epochs, args.accelerator)
                tick = time.perf_counter()
                outcome = run_training(config, args.tracking_uri)
                seconds = time.perf_counter() - tick
                result = results.setdefault((plan.lookback, plan.network, horizon), Result())
                m = outcome.metrics["model"]
                result.scores.append((m["rmse"] ** 2 / std**2, m["mae"] / std, m["mae"]))
                result.seconds.append(seconds)
                result.windows = outcome.test_windows
                if "80" in outcome.intervals:
                    result.coverage.append(outcome.intervals["80"]["coverage"])
                baselines[(plan.lookback, horizon)] = {
                    name: (v["rmse"] ** 2 / std**2, v["mae"] / std, v["mae"])
                    for name, v in outcome.metrics.items()
                    if name != "model"
                }
                print(
                    f"{plan.network:>17} L={plan.lookback:<3} H={horizon:<3} seed {seed}: "
                    f"MSE {result.scores[-1][0]:.4f} MAE {result.scores[-1][1]:.4f} "
                    f"({m['mae']:.3f} degC) {seconds:6.1f} s",
                    flush=True,
                )
    report = render(results, baselines, time.perf_counter() - started, std)
    print("\n" + report)
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / f"ett-{stamp}.md").write_text(report)
    (out / f"ett-{stamp}.json").write_text(
        json.dumps({f"{k[0]}/{k[1]}/{k[2]}": vars(v) for k, v in results.items()}, indent=1)
    )


def mean_pair(result: Result) -> tuple[tuple[float, float], tuple[float, float]]:
    mse = [s[0] for s in result.scores]
    mae = [s[1] for s in result.scores]
    spread = (statistics.stdev(mse), statistics.stdev(mae)) if len(mse) > 1 else (0.0, 0.0)
    return (statistics.mean(mse), statistics.mean(mae)), spread


def render(results, baselines, total_seconds: float, std: float) -> str:
    lines = [
        f"ETTh1 univariate (OT), paper protocol; z-score std of OT on train rows = {std:.4f} degC.",
        "Cells: MSE/MAE on the z-scored scale; learned models: mean over seeds (n), +- sample std.",
        "",
    ]
    for lookback, horizons in HORIZONS.items():
        lines.append(f"### Look-back {lookback}")
        lines.append("")
        lines.append("| model | " + " | ".join(f"H={h}" for h in horizons) + " |")
        lines.append("|---|" + "---|" * len(horizons))
        for name in ("naive", "seasonal_naive"):
            cells = [
                fmt(baselines.get((lookback, h), {}).get(name, (None, None))[:2], 4)
                if (lookback, h) in baselines
                else ""
                for h in horizons
            ]
            lines.append(f"| {name.replace('_', ' ')} | " + " | ".join(cells) + " |")
        for network in NETWORKS:
            row = []
            for h in horizons:
                result = results.get((lookback, network, h))
                if result is None:
                    row.append("")
                    continue
                (mse, mae), (smse, smae) = mean_pair(result)
                n = len(result.scores)
                row.append(
                    f"{mse:.4f}/{mae:.4f}" + (f" (+-{smse:.4f}/{smae:.4f}, n={n})" if n > 1 else " (n=1)")
                )
            if any(row):
                lines.append(f"| **{network}** | " + " | ".join(row) + " |")
        for paper, figures in PUBLISHED[lookback].items():
            lines.append(f"| {paper} | " + " | ".join(fmt(figures.get(h)) for h in horizons) + " |")
        lines.append("")
        lines.append("| model | " + " | ".join(f"H={h}" for h in horizons) + " |")
        lines.append("|---|" + "---|" * len(horizons))
        windows = []
        for h in horizons:
            counts = {r.windows for (lb, _, hh), r in results.items() if lb == lookback and hh == h}
            windows.append(str(counts.pop()) if counts else "")
        lines.append("| test windows (2881 - H) | " + " | ".join(windows) + " |")
        for network in NETWORKS:
            row = []
            for h in horizons:
                result = results.get((lookback, network, h))
                if result is None:
                    row.append("")
                    continue
                mae_c = statistics.mean(s[2] for s in result.scores)
                coverage = f", 80% cov {statistics.mean(result.coverage):.1%}" if result.coverage else ""
                row.append(f"{mae_c:.3f} degC, {statistics.mean(result.seconds):.0f} s{coverage}")
            if any(row):
                lines.append(f"| {network}: MAE degC, s/config | " + " | ".join(row) + " |")
        naive_c = [
            f"{baselines[(lookback, h)]['naive'][2]:.3f} degC" if (lookback, h) in baselines else ""
            for h in horizons
        ]
        lines.append("| naive: MAE degC | " + " | ".join(naive_c) + " |")
        lines.append("")
    lines.append(f"Total wall time: {total_seconds / 60:.1f} min.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
