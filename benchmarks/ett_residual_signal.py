"""How much of a network's error on the ETTh1 benchmark a linear function of the look-back could
still remove: the room an attention over the look-back's values has to add to it (issue 41).

    .venv/bin/python benchmarks/ett_residual_signal.py seg-seq2seq --lookbacks 96,336 --seeds 0,1,2
    .venv/bin/python benchmarks/ett_residual_signal.py --render

Each run trains ``network`` exactly as ett_benchmark.py does (its run_config: the same weights as
the committed run of that seed), then fits a correction of its forecasts on the training windows:
ridge regression of the residual (truth minus forecast, every horizon step) on the look-back
relative to its last value plus a bias, the features NLinear reads (forecaster/baselines.py). The
corrected forecast is scored on the benchmark's selection folds for each penalty in PENALTIES, as
the ratio of its selection MSE (the mean of the folds' MSEs, the benchmark's scale) to the
network's own.

The best ratio over the penalties is read with hindsight on selection, so it is an optimistic
bound on what any fixed linear map of the look-back's values adds to that network: the
`lags` attention's retrieval with weights that did not depend on the window would be one such map.
A bound of 1 or more says the look-back holds no linear signal left on the later data. The test
split is never evaluated. Records go to --results, one per network, look-back, horizon and seed
(a rerun replaces its own).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ett_benchmark as bench  # noqa: E402  (the benchmark's protocol, networks and raw results)
from provenance import commit, machine  # noqa: E402

RESULTS = bench.REPO / "benchmarks" / "results" / "ett-residual-signal.jsonl"
PENALTIES = (1.0, 10.0, 100.0, 1e3, 1e4, 1e5)  # ridge penalties on the z-scored scale


def features(past_target: np.ndarray) -> np.ndarray:
    """(N, L) -> (N, L): NLinear's inputs, the look-back minus its last value, and a bias column."""
    from forecaster.baselines import relative_to_last

    return np.hstack([relative_to_last(past_target), np.ones((len(past_target), 1))])


def ridge(design: np.ndarray, residual: np.ndarray, penalty: float) -> np.ndarray:
    """(N, L), (N, H) -> (L, H): the least-squares map plus ``penalty`` times its squared norm
    (the bias is penalised too: on residuals of a fitted network its best value is near 0)."""
    gram = design.T @ design + penalty * np.eye(design.shape[1])
    return np.linalg.solve(gram, design.T @ residual)


def forecasts(predictor, windows) -> np.ndarray:
    """The trained network's forecasts (N, H) of ``windows`` (z-scored), as evaluation makes them."""
    import torch

    from forecaster.data.windows import WindowDataset

    batch = WindowDataset([windows]).gather(np.arange(len(windows)))
    batch.pop("target")
    parts = []
    with torch.inference_mode():
        for start in range(0, len(windows), 1024):
            chunk = {
                key: None if value is None else value[start : start + 1024] for key, value in batch.items()
            }
            parts.append(predictor.runtime(chunk).mean.numpy().astype(np.float64))
    return np.concatenate(parts)


def measure(network: str, lookback: int, horizon: int, seed: int) -> dict:
    """Train ``network`` as the benchmark does and bound what a linear correction adds to it."""
    from forecaster.data.datamodule import prepare
    from forecaster.data.source import load_from_config
    from forecaster.data.splitting import selection_splits
    from forecaster.training import train_model

    config = bench.run_config(lookback, horizon, network, seed, bench.EPOCHS, "cpu").forecast_config()
    prepared = prepare(load_from_config(config.data), config)
    started = time.perf_counter()
    trained = train_model(config, prepared)
    seconds = time.perf_counter() - started
    train = prepared.windows("train", scaled=True)
    residual = train.target() - forecasts(trained.predictor, train)  # (N, H)
    design = features(train.past()[..., 0])
    folds = [prepared.windows(split, scaled=True) for split in selection_splits(bench.SELECTION_FOLDS)]
    scored = [(features(f.past()[..., 0]), f.target() - forecasts(trained.predictor, f)) for f in folds]
    own = statistics.mean(float(np.mean(error**2)) for _, error in scored)
    ratios = {}
    for penalty in PENALTIES:
        correction = ridge(design, residual, penalty)
        corrected = statistics.mean(float(np.mean((error - x @ correction) ** 2)) for x, error in scored)
        ratios[str(penalty)] = corrected / own
    return {
        "network": network,
        "lookback": lookback,
        "horizon": horizon,
        "seed": seed,
        "epochs": trained.epochs_run,
        "seconds": seconds,
        "selection_mse": own,  # the network's own, mean of the folds' MSEs
        "train_mse": float(np.mean(residual**2)),
        "ratios": ratios,  # penalty -> corrected / own selection MSE
    }


def read(path: Path = RESULTS) -> list[dict]:
    return bench.read_runs(path) if path.exists() else []


def bound(record: dict) -> float:
    """The best ratio over the penalties: chosen with hindsight, so optimistic."""
    return min(record["ratios"].values())


def render(records: list[dict]) -> str:
    """Per network, look-back and horizon: the bound per seed and its mean."""
    cells: dict[tuple[str, int, int], list[dict]] = {}
    for record in records:
        cells.setdefault((record["network"], record["lookback"], record["horizon"]), []).append(record)
    lines = [
        "| network | L | H | selection MSE | best linear correction / none, per seed | mean |",
        "|---|---|---|---|---|---|",
    ]
    for (network, lookback, horizon), runs in sorted(cells.items()):
        runs = sorted(runs, key=lambda r: r["seed"])
        per_seed = " / ".join(f"{bound(r):.4f}" for r in runs)
        mse = statistics.mean(r["selection_mse"] for r in runs)
        mean = statistics.mean(bound(r) for r in runs)
        lines.append(
            f"| {network} | {lookback} | {horizon} | {mse:.4f} | {per_seed} (n={len(runs)}) | {mean:.4f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("network", nargs="?", choices=list(bench.NETWORKS))
    parser.add_argument("--lookbacks", default="96,336", help="comma-separated: 96 and/or 336")
    parser.add_argument("--horizons", help="comma-separated (default: every horizon of the look-back)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--render", action="store_true", help="only print what --results holds")
    args = parser.parse_args()
    if not args.render:
        if args.network is None:
            raise SystemExit("name a network (one of ett_benchmark.NETWORKS), or --render")
        try:
            lookbacks = [int(x) for x in args.lookbacks.split(",")]
            seeds = [int(x) for x in args.seeds.split(",")]
            wanted = None if args.horizons is None else {int(x) for x in args.horizons.split(",")}
        except ValueError as exc:
            raise SystemExit(f"--lookbacks/--horizons/--seeds: comma-separated integers ({exc})") from None
        if set(lookbacks) - set(bench.HORIZONS):
            raise SystemExit(f"--lookbacks: each one of {list(bench.HORIZONS)}")
        import torch

        from pipelines.cli import quiet_libraries

        quiet_libraries()
        torch.set_num_threads(args.threads)
        code, where = commit(), machine()
        for lookback in lookbacks:
            for horizon in bench.HORIZONS[lookback]:
                if wanted is not None and horizon not in wanted:
                    continue
                for seed in seeds:
                    record = {
                        **measure(args.network, lookback, horizon, seed),
                        "commit": code,
                        "machine": where,
                    }
                    key = (record["network"], lookback, horizon, seed)
                    kept = [
                        r
                        for r in read(args.results)
                        if (r["network"], r["lookback"], r["horizon"], r["seed"]) != key
                    ]
                    args.results.parent.mkdir(parents=True, exist_ok=True)
                    args.results.write_text("".join(json.dumps(r) + "\n" for r in [*kept, record]))
                    print(
                        f"{args.network} L={lookback} H={horizon} seed {seed}: best {bound(record):.4f}",
                        flush=True,
                    )
    print(render(read(args.results)))


if __name__ == "__main__":
    main()
