"""NLinear fitted by least squares (forecaster/baselines.py, ``LinearBaseline``) on the ETTh1
benchmark's own windows: the published figures' floor, measured on exactly the windows, split and
scaling the recurrent networks are scored on (ett_benchmark.py), so the two can be compared without
trusting that two protocols agree.

    .venv/bin/python benchmarks/ett_linear.py            # every look-back and horizon (about 20 s here)
    .venv/bin/python benchmarks/ett_linear.py --render   # print the rows the README tables show

It is fitted on the training windows only (stride 1, as the networks train), has nothing to tune
and no seed, and is scored like a network: the selection MSE over the benchmark's SELECTION_FOLDS
folds (what the "chosen" marks read) and the test MSE/MAE on the z-scored scale. Its records go to
benchmarks/results/ett-linear.jsonl, one per look-back and horizon (a rerun replaces them), and
ett_benchmark.py --render puts them in its tables beside the networks.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from forecaster.metrics import mae, rmse

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ett_benchmark as bench  # noqa: E402  (the benchmark's protocol and raw results)
from provenance import commit, machine  # noqa: E402


def errors(model, windows) -> dict[str, float]:
    """MSE and MAE over every window and step of ``windows`` (z-scored units), by the metrics the
    networks' evaluation uses (its MSE is their RMSE squared, as ett_benchmark.run_record takes it)."""
    past, actual = windows.past()[..., 0], windows.target()  # (N, L), (N, H)
    forecast = model.forecast(past)
    return {"mse": rmse(actual, forecast) ** 2, "mae": mae(actual, forecast)}


def measure(lookback: int, horizon: int, std: float, code: str, where: dict) -> dict:
    """Fit on the training windows of the benchmark's configuration at L, H and score it."""
    from forecaster.baselines import LinearBaseline
    from forecaster.data.datamodule import prepare_series
    from forecaster.data.source import load_from_config
    from forecaster.data.splitting import selection_splits

    config = bench.run_config(lookback, horizon, "seg-gru", 0, 1, "cpu").forecast_config()
    prepared = prepare_series(load_from_config(config.data), config)  # the networks' split and scaling
    started = time.perf_counter()
    train = prepared.windows("train", scaled=True)
    model = LinearBaseline.fit(train.past()[..., 0], train.target())
    seconds = time.perf_counter() - started
    folds = [
        {"model": errors(model, prepared.windows(split, scaled=True))}
        for split in selection_splits(bench.SELECTION_FOLDS)
    ]
    test = errors(model, prepared.windows("test", scaled=True))
    return {  # laid out as a network's run (ett_benchmark.run_record), so its readers read it
        "network": bench.LINEAR,
        "lookback": lookback,
        "horizon": horizon,
        "commit": code,
        "machine": where,
        "std_c": std,
        "seconds": seconds,
        "train_windows": len(train),
        "selection_folds": folds,  # fold 1 first
        "test": {"model": {**test, "mae_c": test["mae"] * std}},
        "test_windows": len(prepared.windows("test")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=bench.LINEAR_RESULTS)
    parser.add_argument("--render", action="store_true", help="only print what --results holds")
    args = parser.parse_args()
    if not args.render:
        std, code, where = bench.ot_train_std(), commit(), machine()
        records = [
            measure(lookback, horizon, std, code, where)
            for lookback, horizons in bench.HORIZONS.items()
            for horizon in horizons
        ]
        args.results.parent.mkdir(parents=True, exist_ok=True)
        args.results.write_text("".join(json.dumps(r) + "\n" for r in records))
    for (lookback, horizon), record in sorted(bench.read_linear(args.results).items()):
        test = record["test"]["model"]
        print(
            f"L={lookback:<3} H={horizon:<3} selection MSE {bench.folds_mse(record, bench.SELECTION_FOLDS):.4f}  "
            f"test MSE {test['mse']:.4f} MAE {test['mae']:.4f} ({test['mae_c']:.3f} degC)"
        )


if __name__ == "__main__":
    main()
