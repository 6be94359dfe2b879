"""Which of the attention ablation's test differences the test period can resolve (issue 41).

    .venv/bin/python benchmarks/ett_ablation_significance.py --lookbacks 96,336 --seeds 0,1,2
    .venv/bin/python benchmarks/ett_ablation_significance.py --render [--readme benchmarks/README.md]

--results names the records file (default: the seventh pass's); --render --readme writes its table
into the README block named after that file (``markers``).

The ablation table (benchmarks/README.md, "Attention against none") compares the segment seq2seq
with attention and the same network without it by their test MSE, mean over 3 seeds; in 8 of its
10 cells the ratio is within 1.4% of 1. Whether such a ratio says anything depends on how much the
test period's windows can tell apart. Per look-back and horizon this retrains both networks' committed
runs exactly (ett_benchmark's run_config, the same seeds: each run's test MSE is checked against
the committed one), forecasts every test window, and averages each window's squared error over its
H steps and over the seeds: two paired losses per window. paired_loss_test.py then gives the
ratio of their means (the table's ratio), its 95% interval and the p-value of "no difference",
with the dependence of overlapping windows taken into account. The pooled window losses are kept
in the record (6 significant digits, the test computed from them), so ``--retest`` can compute
the test again, after a change to paired_loss_test.py, without training anything.

What it reads: the test split, to report on it, as the ablation table does. Nothing it computes
feeds a choice: no network, setting or selection reads these records (the benchmark's configurations
are chosen on the selection folds). Records go to --results, one per look-back and horizon (a rerun
replaces its own).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ett_benchmark as bench  # noqa: E402  (the benchmark's protocol, networks and raw results)
import paired_loss_test as paired  # noqa: E402
from provenance import commit  # noqa: E402

# the seventh pass's records, of the runs at the default lag scale (c3aaf70, superseded since), which
# the eighth pass's table reads; the tenth pass's, of the ablation's runs at a lag scale of 10
RESULTS = bench.REPO / "benchmarks" / "results" / "ett-ablation-significance.jsonl"
RESULTS_LAG_SCALE_10 = RESULTS.with_name("ett-ablation-significance-lag-scale-10.jsonl")


def markers(results: Path) -> tuple[str, str]:
    """The README block a records file's table goes to (``bench.readme_markers``)."""
    return bench.readme_markers(results, "ett_ablation_significance.py")


BEGIN, END = markers(RESULTS)
ATTENTION, NONE = "seg-seq2seq-attention", "seg-seq2seq"
DIGITS = 6  # significant digits of a kept window loss


def window_losses(network: str, lookback: int, horizon: int, seed: int) -> np.ndarray:
    """Train ``network`` as the benchmark does and return each test window's squared error, mean
    over its H steps, on the z-scored scale (N,), in origin order; stop unless the run is the
    committed one (``reproduced``)."""
    trained, prepared, _ = bench.retrain(network, lookback, horizon, seed)
    losses = window_losses_of(trained.predictor, prepared)
    reproduced(network, lookback, horizon, seed, float(losses.mean()))
    return losses


def window_losses_of(predictor, prepared) -> np.ndarray:
    """(N,): each test window's squared error, mean over its H steps, on the z-scored scale, in
    origin order."""
    truth = prepared.windows("test", scaled=True).target()  # (N, H)
    return np.mean((truth - bench.split_forecasts(predictor, prepared, "test")) ** 2, axis=1)


def scored(predictor, prepared, std: float) -> dict:
    """A trained network's selection MSE (the mean of the benchmark's folds' MSEs, z-scored with
    ``std``, the train rows' std of OT) and its test window losses (N,): what the placebo and the
    decomposition record of each run."""
    from forecaster.data.splitting import selection_splits
    from forecaster.evaluation import evaluate

    folds = [evaluate(predictor, prepared, split) for split in selection_splits(bench.SELECTION_FOLDS)]
    return {
        "selection_mse": statistics.mean(fold.metrics["model"]["rmse"] ** 2 / std**2 for fold in folds),
        "losses": window_losses_of(predictor, prepared),
    }


def reproduced(network: str, lookback: int, horizon: int, seed: int, test_mse: float) -> None:
    """Stop unless a retrained run's test MSE is the committed run's: the test would otherwise be
    about other weights than the ablation table's."""
    run = bench.committed_run(network, lookback, horizon, seed)
    if run is None:
        raise SystemExit(
            f"{network} L={lookback} H={horizon} seed {seed}: no committed run in {bench.RAW_RESULTS}"
        )
    committed = run["test"]["model"]["mse"]
    if abs(test_mse - committed) > 1e-4 * committed:
        raise SystemExit(
            f"{network} L={lookback} H={horizon} seed {seed}: test MSE {test_mse:.6f} retrained, "
            f"{committed:.6f} committed: the code no longer trains the committed run"
        )


def kept(losses: np.ndarray) -> list[float]:
    """Window losses as the record keeps them (DIGITS significant digits)."""
    return [float(f"{loss:.{DIGITS}g}") for loss in losses]


def tested(record: dict) -> dict:
    """``record`` with the paired test of its kept window losses."""
    test = paired.paired_test(
        np.array(record["losses"][ATTENTION]), np.array(record["losses"][NONE]), record["horizon"]
    )
    # tested_at: the test's code (``commit`` is the training's; --retest keeps that)
    return record | test.fields() | {"tested_at": commit()}


def measure(lookback: int, horizon: int, seeds: list[int]) -> dict:
    """Both networks' test losses per window for every seed, pooled over seeds, and the paired test."""
    started = time.perf_counter()
    losses = {
        network: [window_losses(network, lookback, horizon, s) for s in seeds]
        for network in (ATTENTION, NONE)
    }
    return tested(
        {
            "lookback": lookback,
            "horizon": horizon,
            "seeds": seeds,
            "epochs_cap": bench.EPOCHS,
            "test_mse": {network: [float(run.mean()) for run in runs] for network, runs in losses.items()},
            "losses": {network: kept(np.mean(runs, axis=0)) for network, runs in losses.items()},  # (N,) each
            "seconds": time.perf_counter() - started,
        }
    )


# what the table and a rerun read of a record: a file without them stops, naming the line
FIELDS = ("lookback", "horizon", "test_mse", "losses", "ratio", "low", "high", "p_value", "windows")


def read(path: Path = RESULTS) -> list[dict]:
    return bench.read_runs(path, FIELDS)


def merged(records: list[dict], record: dict) -> list[dict]:
    """``records`` with ``record`` in place of an earlier one of the same look-back and horizon."""
    key = (record["lookback"], record["horizon"])
    return [*(r for r in records if (r["lookback"], r["horizon"]) != key), record]


def verdict(record: dict) -> str:
    return paired.verdict(record["p_value"], record["ratio"])


def render(records: list[dict]) -> str:
    """Per look-back and horizon: both test MSEs, the ratio per seed and pooled, its interval and
    p-value, and what the interval says."""
    lines = [
        "| L | H | test windows (horizons in the test period) | with / without attention, test MSE | ratio per seed | ratio | 95% interval | p | the interval says |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for record in sorted(records, key=lambda r: (r["lookback"], r["horizon"])):
        with_, without = record["test_mse"][ATTENTION], record["test_mse"][NONE]
        per_seed = " / ".join(f"{a / b:.4f}" for a, b in zip(with_, without, strict=True))
        horizons = (record["windows"] + record["horizon"] - 1) / record["horizon"]  # its hours / H
        lines.append(
            f"| {record['lookback']} | {record['horizon']} | {record['windows']} ({horizons:.1f}) "
            f"| {statistics.mean(with_):.4f} / {statistics.mean(without):.4f} | {per_seed} "
            f"| {record['ratio']:.3f} | {record['low']:.3f} to {record['high']:.3f} "
            f"| {record['p_value']:.4f} | {verdict(record)} |"
        )
    counts = {v: sum(verdict(r) == v for r in records) for v in ("lower", "higher", "not resolved")}
    lines.append(
        f"\nAttention lower in {counts['lower']} of {len(records)} cells, higher in {counts['higher']}, "
        f"not resolved by the test period in {counts['not resolved']} (each cell tested alone, at "
        f"{paired.LEVEL:.0%}: no correction for testing {len(records)})."
    )
    return "\n".join(lines)


def summary(record: dict) -> str:
    return (
        f"L={record['lookback']} H={record['horizon']}: ratio {record['ratio']:.4f}, "
        f"{record['low']:.4f} to {record['high']:.4f}, p {record['p_value']:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    bench.cell_options(parser, RESULTS)
    parser.add_argument(
        "--retest", action="store_true", help="test the kept window losses again; train nothing"
    )
    args = bench.parse_cell_options(parser)
    if args.render or args.retest:
        records = bench.records_to_render(read, args.results)
        if args.retest:
            bench.write_runs(args.results, [tested(r) for r in records])
            records = read(args.results)
        table = render(records)
        bench.show_table(table, args.readme, *markers(args.results))
        return
    bench.measure_cells(args, measure, read, merged, summary)


if __name__ == "__main__":
    main()
