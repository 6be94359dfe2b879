"""A placebo for the attention ablation: the attention network retrieving other windows' look-backs
(issue 41).

    .venv/bin/python benchmarks/ett_placebo.py --lookbacks 96,336 --seeds 0,1,2
    .venv/bin/python benchmarks/ett_placebo.py --render [--readme benchmarks/README.md]

The ablation (benchmarks/README.md, "Attention against none") sets the segment seq2seq with
attention against the same network without it (seg-seq2seq, "the twin"): the same starting weights
and batches per seed, so that in one seed the only difference is the attention. Where the two are
within a fraction of a percent of each other, two things could make the difference: what the
attention retrieves, or the attention's mere presence, which changes every gradient step and so
where training ends. The placebo tells them apart. It is the ablation's attention network, trained
and scored exactly as the benchmark does, except that what a forecast step retrieves comes from
another window:
- in training, each window of a batch retrieves from another window of the same batch (the
  batches are shuffled, so a random one; a permutation with no fixed point, from a generator of
  its own, so the batches, dropout and starting weights are the attention run's). Windows overlap
  (stride 1), so a partner's look-back can hold some of this window's future, at an offset that
  changes with every draw; the scores are computed from this window's own states and positions,
  never from the partner's, so they cannot find it;
- in evaluation (validation, selection, test) it retrieves nothing (zeros), so no forecast carries
  another window's look-back: what is scored is the network trained beside an attention that
  retrieved noise.
Its scores, weights, parameters and cost in training are the attention's; what it added there
said nothing about the window being forecast. So the placebo against the twin is what the
attention's presence in training does, and attention against the placebo what its retrieval
does, in training and in the forecast.

Per look-back, horizon and seed: the selection MSE (the mean of the benchmark's selection folds'
MSEs) and every test window's loss. Test is read to report, as the ablation does: the placebo's
window losses, pooled over seeds, are set against the twin's in the tenth pass's records
(ett_ablation_significance.py's, of today's runs) with paired_loss_test.py, and the attention
network's pooled losses there against the placebo's. Nothing reads these records to choose
anything.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ett_ablation_significance as ablation  # noqa: E402
import ett_benchmark as bench  # noqa: E402  (the benchmark's protocol, networks and raw results)
import paired_loss_test as paired  # noqa: E402

from forecaster.models.step_attention import StepAttention  # noqa: E402

RESULTS = bench.REPO / "benchmarks" / "results" / "ett-placebo.jsonl"
BEGIN, END = bench.readme_markers(RESULTS, "ett_placebo.py")
ATTENTION, TWIN = ablation.ATTENTION, ablation.NONE
TWIN_LOSSES = ablation.RESULTS_LAG_SCALE_10  # the twin's pooled test window losses, today's runs


def derangement(size: int, generator: torch.Generator) -> torch.Tensor:
    """(size,): for each row, the row it reads instead; a random cycle through all rows, so none
    reads itself (size >= 2)."""
    order = torch.randperm(size, generator=generator)
    source = torch.empty_like(order)
    source[order] = order.roll(-1)  # row order[k] reads row order[k + 1]
    return source


@contextmanager
def values_from_other_windows(seed: int) -> Iterator[None]:
    """Within it, every StepAttention retrieves another window's look-back in training and nothing
    in evaluation (the module docstring)."""
    generator = torch.Generator().manual_seed(seed)
    original = StepAttention.input_values_of

    def other_windows(self: StepAttention, past: torch.Tensor) -> torch.Tensor:  # (B, L, F) -> (B, L, V)
        batch = past.shape[0]
        if not self.training or batch == 1:  # evaluation, or a batch with no other window
            return original(self, torch.zeros_like(past))
        return original(self, past[derangement(batch, generator)])

    StepAttention.input_values_of = other_windows
    try:
        yield
    finally:
        StepAttention.input_values_of = original


def placebo_run(lookback: int, horizon: int, seed: int) -> dict:
    """Train the placebo at this cell and seed as the benchmark trains the attention network ->
    its selection MSE (the mean over folds), its test window losses (N,), epochs and seconds."""
    with values_from_other_windows(seed):
        trained, prepared, seconds = bench.retrain(ATTENTION, lookback, horizon, seed)
        scores = ablation.scored(trained.predictor, prepared, bench.ot_train_std())
    return {**scores, "epochs": trained.epochs_run, "seconds": seconds}


def twin_losses(lookback: int, horizon: int, seeds: list[int] | None = None) -> dict:
    """The tenth pass's record of this cell: the twin's pooled test window losses and both
    networks' test MSE per seed; with ``seeds``, a stop unless it pools exactly those (a
    measurement's pooled losses are set against it)."""
    for record in ablation.read(TWIN_LOSSES):
        if (record["lookback"], record["horizon"]) == (lookback, horizon):
            if seeds is not None and record["seeds"] != seeds:
                raise SystemExit(f"--seeds: {TWIN_LOSSES} pools seeds {record['seeds']}, not {seeds}")
            return record
    raise SystemExit(f"L={lookback} H={horizon}: no record in {TWIN_LOSSES}")


def measure(lookback: int, horizon: int, seeds: list[int]) -> dict:
    """The placebo's runs at every seed, pooled over seeds, tested against the twin's losses."""
    twin = twin_losses(lookback, horizon, seeds)
    started = time.perf_counter()
    runs = [placebo_run(lookback, horizon, seed) for seed in seeds]
    losses = ablation.kept(np.mean([run["losses"] for run in runs], axis=0))
    test = paired.paired_test(np.array(losses), np.array(twin["losses"][TWIN]), horizon)
    retrieval = paired.paired_test(np.array(twin["losses"][ATTENTION]), np.array(losses), horizon)
    return {
        "lookback": lookback,
        "horizon": horizon,
        "seeds": seeds,
        "selection_mse": [run["selection_mse"] for run in runs],
        "test_mse": [float(run["losses"].mean()) for run in runs],
        "epochs": [run["epochs"] for run in runs],
        "losses": losses,
        "epochs_cap": bench.EPOCHS,
        "seconds": time.perf_counter() - started,
        **test.fields(),  # the placebo against the twin
        "attention_against_placebo": retrieval.fields(),
    }


# what every record of a network's retrained runs holds, per cell: its seeds' selection and test MSE
CELL_FIELDS = ("lookback", "horizon", "seeds", "selection_mse", "test_mse")
# what the table reads of a record: a file without them stops, naming the line
FIELDS = (*CELL_FIELDS, "ratio", "low", "high", "p_value", "attention_against_placebo")


def read(path: Path = RESULTS) -> list[dict]:
    return bench.read_runs(path, FIELDS)


def committed_runs(network: str, lookback: int, horizon: int, seeds: list[int]) -> list[dict]:
    """The committed runs of ``network`` at this cell, one per seed, or a stop naming the cell."""
    runs = [bench.committed_run(network, lookback, horizon, seed) for seed in seeds]
    if any(run is None for run in runs):
        raise SystemExit(f"{network} L={lookback} H={horizon}: seeds {seeds} not all in {bench.RAW_RESULTS}")
    return runs


def committed_selection(network: str, lookback: int, horizon: int, seeds: list[int]) -> list[float]:
    """The committed runs' selection MSE per seed, on the scale the placebo's is (mean over folds)."""
    return [
        bench.folds_mse(run, bench.SELECTION_FOLDS)
        for run in committed_runs(network, lookback, horizon, seeds)
    ]


def per_seed(a: list[float], b: list[float]) -> str:
    return " / ".join(f"{x / y:.4f}" for x, y in zip(a, b, strict=True))


def of_means(a: list[float], b: list[float]) -> float:
    return statistics.mean(a) / statistics.mean(b)


def tested(test: dict) -> str:
    """A paired test's ratio, interval and p-value, as a table cell."""
    return f"{test['ratio']:.4f} ({test['low']:.3f} to {test['high']:.3f}, p {test['p_value']:.3f})"


def render(records: list[dict]) -> str:
    """Per look-back and horizon: the placebo against the twin on selection and on test (per seed,
    and the paired test of the pooled losses), attention against the twin as the ablation has it,
    and attention against the placebo."""
    lines = [
        "| L | H | selection: placebo / twin per seed | ratio | attention / twin | test: placebo / twin per seed "
        "| ratio (95% interval, p) | attention / twin (p) | attention / placebo per seed | ratio (95% interval, p) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    counts = {"placebo below": 0, "attention below": 0, "lower": 0, "higher": 0}
    for record in sorted(records, key=lambda r: (r["lookback"], r["horizon"])):
        lookback, horizon, seeds = record["lookback"], record["horizon"], record["seeds"]
        twin_selection = committed_selection(TWIN, lookback, horizon, seeds)
        attention_selection = committed_selection(ATTENTION, lookback, horizon, seeds)
        ablated = twin_losses(lookback, horizon)
        twin_test, attention_test = ablated["test_mse"][TWIN], ablated["test_mse"][ATTENTION]
        retrieval = record["attention_against_placebo"]
        counts["placebo below"] += of_means(record["test_mse"], twin_test) < 1
        counts["attention below"] += of_means(attention_test, twin_test) < 1
        verdict = paired.verdict(retrieval["p_value"], retrieval["ratio"])
        counts[verdict] = counts.get(verdict, 0) + 1
        lines.append(
            f"| {lookback} | {horizon} | {per_seed(record['selection_mse'], twin_selection)} "
            f"| {of_means(record['selection_mse'], twin_selection):.4f} "
            f"| {of_means(attention_selection, twin_selection):.4f} "
            f"| {per_seed(record['test_mse'], twin_test)} | {tested(record)} "
            f"| {of_means(attention_test, twin_test):.4f} (p {ablated['p_value']:.3f}) "
            f"| {per_seed(attention_test, record['test_mse'])} | {tested(retrieval)} |"
        )
    lines.append(
        f"\nOn test (ratio of the seed means) the placebo is below the twin in {counts['placebo below']} of "
        f"{len(records)} cells, attention in {counts['attention below']}. Attention against the placebo, "
        f"paired test of the pooled window losses: lower in {counts['lower']} of {len(records)} cells, higher "
        f"in {counts['higher']} (each cell tested alone, at {paired.LEVEL:.0%}; no correction for testing "
        f"{len(records)})."
    )
    return "\n".join([*lines, *by_period(records)])


def fold_ratios(lookback: int, horizon: int, seeds: list[int]) -> tuple[float, float]:
    """Attention / twin selection MSE (ratio of the seed means of the committed runs) on fold 2 and
    on fold 1 (each run's ``selection_folds`` holds fold 1 first)."""
    attention, twin = (
        committed_runs(ATTENTION, lookback, horizon, seeds),
        committed_runs(TWIN, lookback, horizon, seeds),
    )
    fold2, fold1 = (
        of_means(
            [run["selection_folds"][k]["model"]["mse"] for run in attention],
            [run["selection_folds"][k]["model"]["mse"] for run in twin],
        )
        for k in (1, 0)
    )
    return fold2, fold1


def by_period(records: list[dict]) -> list[str]:
    """Attention against the twin on each stretch of time the committed runs were scored on, oldest
    first: whether the two selection folds, and test, put attention on the same side of the twin."""
    lines = [
        "",
        "Attention / twin by stretch of time, the committed runs (ratio of the seed means): selection "
        "fold 2 (late June to late August 2017, the rows early stopping watched), fold 1 (late August to "
        "late October), test (late October to February; reported only).",
        "",
        "| L | H | fold 2 | fold 1 | test | the folds on one side |",
        "|---|---|---|---|---|---|",
    ]
    agree = {"folds": 0, "fold 1": 0, "fold 2": 0}
    for record in sorted(records, key=lambda r: (r["lookback"], r["horizon"])):
        fold2, fold1 = fold_ratios(record["lookback"], record["horizon"], record["seeds"])
        ablated = twin_losses(record["lookback"], record["horizon"])  # the ablation's test, as above
        test = of_means(ablated["test_mse"][ATTENTION], ablated["test_mse"][TWIN])
        agree["folds"] += (fold1 < 1) == (fold2 < 1)
        agree["fold 1"] += (fold1 < 1) == (test < 1)
        agree["fold 2"] += (fold2 < 1) == (test < 1)
        same = "yes" if (fold1 < 1) == (fold2 < 1) else "no"
        lines.append(
            f"| {record['lookback']} | {record['horizon']} | {fold2:.4f} | {fold1:.4f} | {test:.4f} | {same} |"
        )
    lines.append(
        f"\nThe two folds put attention on the same side of the twin in {agree['folds']} of {len(records)} "
        f"cells. Test is on fold 1's side in {agree['fold 1']}, on fold 2's in {agree['fold 2']}."
    )
    return lines


def summary(record: dict) -> str:
    twin = twin_losses(record["lookback"], record["horizon"])
    return (
        f"L={record['lookback']} H={record['horizon']}: placebo / twin, test "
        f"{per_seed(record['test_mse'], twin['test_mse'][TWIN])}; pooled {record['ratio']:.4f} "
        f"({record['low']:.3f} to {record['high']:.3f}, p {record['p_value']:.3f})"
    )


def main() -> None:
    bench.cell_script(__doc__, RESULTS, render, measure, read, ablation.merged, summary, (BEGIN, END))


if __name__ == "__main__":
    main()
