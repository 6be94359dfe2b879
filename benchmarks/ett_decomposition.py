"""Where the attention ablation's difference comes from: the retrieved term, or the network under it
(issue 41).

    .venv/bin/python benchmarks/ett_decomposition.py --lookbacks 96,336 --seeds 0,1,2
    .venv/bin/python benchmarks/ett_decomposition.py --render [--readme benchmarks/README.md]

The ablation's attention network (seg-seq2seq-attention) forecasts what the network under it emits
plus what its attention retrieves (``DirectDecoder``: ``emitted + retrieved``). Its difference from
the twin (seg-seq2seq, the same network without attention, the same starting weights and batches
per seed) is therefore the product of two factors, both measurable on one trained run:

    attention / twin  =  attention / base  x  base / twin

where ``base`` is the attention network's forecast with nothing retrieved (its emitted values
alone). attention / base is what the retrieved term does in the forecast; base / twin is what
training beside the attention did to the network under it. The fifth pass measured the two on
selection for two runs (the retrieved term helped, the network under it was worse than the twin);
this measures them at every cell and seed, on selection and on test.

Per look-back, horizon and seed it retrains the committed attention run exactly (ett_benchmark's
run_config; each run's test MSE is checked against the committed one), then scores it twice on the
selection folds and on the test windows: as it is, and with every StepAttention retrieving nothing
(``forecaster.models.step_attention.nothing_retrieved``, so ``retrieved`` is 0; the switch behind
the ``*_attention_retrieved_mse_ratio`` a run of a residual attention model logs). The twin's
figures are its committed runs' (the selection folds) and the tenth pass's pooled test window
losses (ett-ablation-significance-lag-scale-10.jsonl, the same runs), against which the base's
pooled losses are tested with paired_loss_test.py, as are the attention's against the base's.

What it reads: the test split, to report on it, as the ablation does. Nothing reads these records to
choose anything.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ett_ablation_significance as ablation  # noqa: E402
import ett_benchmark as bench  # noqa: E402  (the benchmark's protocol, networks and raw results)
import ett_placebo as placebo  # noqa: E402  (the twin's committed figures, the table's cells)
import paired_loss_test as paired  # noqa: E402

from forecaster.models.step_attention import nothing_retrieved  # noqa: E402

RESULTS = bench.REPO / "benchmarks" / "results" / "ett-decomposition.jsonl"
BEGIN, END = bench.readme_markers(RESULTS, "ett_decomposition.py")
ATTENTION, TWIN = ablation.ATTENTION, ablation.NONE
FORECASTS = ("attention", "base")  # as trained; with nothing retrieved


def decomposed_run(lookback: int, horizon: int, seed: int) -> dict:
    """Retrain the committed attention run at this cell and seed -> its scores as trained and with
    nothing retrieved (``ablation.scored``), the test MSE checked against the committed run's."""
    std = bench.ot_train_std()
    trained, prepared, _ = bench.retrain(ATTENTION, lookback, horizon, seed)
    attention = ablation.scored(trained.predictor, prepared, std)
    ablation.reproduced(ATTENTION, lookback, horizon, seed, float(attention["losses"].mean()))
    with nothing_retrieved(trained.predictor.network):
        base = ablation.scored(trained.predictor, prepared, std)
    return {"attention": attention, "base": base}


def measure(lookback: int, horizon: int, seeds: list[int]) -> dict:
    """Both forecasts of every seed's run, pooled over seeds; the base tested against the twin, and
    the attention against the base."""
    twin = placebo.twin_losses(lookback, horizon, seeds)
    started = time.perf_counter()
    runs = [decomposed_run(lookback, horizon, seed) for seed in seeds]
    pooled = {f: ablation.kept(np.mean([run[f]["losses"] for run in runs], axis=0)) for f in FORECASTS}
    base_test = paired.paired_test(np.array(pooled["base"]), np.array(twin["losses"][TWIN]), horizon)
    retrieved_test = paired.paired_test(np.array(pooled["attention"]), np.array(pooled["base"]), horizon)
    return {
        "lookback": lookback,
        "horizon": horizon,
        "seeds": seeds,
        "selection_mse": {f: [run[f]["selection_mse"] for run in runs] for f in FORECASTS},
        "test_mse": {f: [float(run[f]["losses"].mean()) for run in runs] for f in FORECASTS},
        "losses": pooled,
        "epochs_cap": bench.EPOCHS,
        "seconds": time.perf_counter() - started,
        "base_against_twin": base_test.fields(),
        "attention_against_base": retrieved_test.fields(),
    }


# the fields ``render`` reads; ``read`` stops at a record without one, naming its line
FIELDS = (*placebo.CELL_FIELDS, "base_against_twin", "attention_against_base")


def read(path: Path = RESULTS) -> list[dict]:
    return bench.read_runs(path, FIELDS)


def p_of(test: dict) -> str:
    return f"{test['ratio']:.4f} (p {test['p_value']:.3f})"


def render(records: list[dict]) -> str:
    """Per look-back and horizon, on selection and on test: attention / twin and its two factors,
    attention / base (the retrieved term) and base / twin (the network under it)."""
    lines = [
        "| L | H | selection: attention / twin | = attention / base | x base / twin "
        "| test: attention / twin | = attention / base, per seed | pooled (p) | x base / twin, per seed | pooled (p) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    counts = {
        "retrieved below": 0,
        "base above": 0,
        "retrieved below, selection": 0,
        "base above, selection": 0,
    }
    for record in sorted(records, key=lambda r: (r["lookback"], r["horizon"])):
        lookback, horizon, seeds = record["lookback"], record["horizon"], record["seeds"]
        selection, test = record["selection_mse"], record["test_mse"]
        twin_selection = placebo.committed_selection(TWIN, lookback, horizon, seeds)
        twin_test = placebo.twin_losses(lookback, horizon)["test_mse"][TWIN]
        of_means = placebo.of_means
        counts["retrieved below, selection"] += of_means(selection["attention"], selection["base"]) < 1
        counts["base above, selection"] += of_means(selection["base"], twin_selection) > 1
        counts["retrieved below"] += of_means(test["attention"], test["base"]) < 1
        counts["base above"] += of_means(test["base"], twin_test) > 1
        lines.append(
            f"| {lookback} | {horizon} | {of_means(selection['attention'], twin_selection):.4f} "
            f"| {of_means(selection['attention'], selection['base']):.4f} "
            f"| {of_means(selection['base'], twin_selection):.4f} "
            f"| {of_means(test['attention'], twin_test):.4f} "
            f"| {placebo.per_seed(test['attention'], test['base'])} | {p_of(record['attention_against_base'])} "
            f"| {placebo.per_seed(test['base'], twin_test)} | {p_of(record['base_against_twin'])} |"
        )
    cells = len(records)
    lines.append(
        f"\nRatios of the seed means. The retrieved term lowers the attention network's own forecast in "
        f"{counts['retrieved below, selection']} of {cells} cells on selection and {counts['retrieved below']} "
        f"on test; the network under it is above the twin in {counts['base above, selection']} on selection "
        f"and {counts['base above']} on test (p: paired test of the pooled window losses, each cell alone, "
        f"at {paired.LEVEL:.0%})."
    )
    return "\n".join(lines)


def summary(record: dict) -> str:
    test = record["test_mse"]
    return (
        f"L={record['lookback']} H={record['horizon']}: test attention / base "
        f"{placebo.per_seed(test['attention'], test['base'])}, "
        f"base / twin {p_of(record['base_against_twin'])}"
    )


if __name__ == "__main__":
    bench.cell_script(__doc__, RESULTS, render, measure, read, ablation.merged, summary, (BEGIN, END))
