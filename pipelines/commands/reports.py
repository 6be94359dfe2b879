"""What `forecast train` prints once a run is logged (also after `forecast retrain`): the test
metrics beside the baselines, a panel's per-series table, the intervals, the run and the registry."""

from __future__ import annotations

from typing import Any

from pipelines.commands.common import print_json


def report_training(outcome: Any, alias: str, as_json: bool) -> None:
    """What `forecast train` prints once the run is logged (nothing in a DDP worker)."""
    from pipelines.console import console, metrics_table

    if outcome is None:  # a DDP worker: rank zero reports
        return
    metrics_table(
        f"{outcome.run_name}: test split, {outcome.test_windows} windows, original units", outcome.metrics
    )
    if outcome.per_series:
        series_table(outcome.per_series, outcome.run_id)
    for level, result in outcome.intervals.items():
        console.print(
            f"{level}% prediction interval on test: coverage {result['coverage']:.1%}, "
            f"mean width {result['width']:.4g}"
        )
    console.print(
        f"run {outcome.run_id}  model {outcome.model_uri}  ({outcome.seconds:.1f} s, {outcome.epochs} epochs)"
    )
    if outcome.registered_name:
        promotion = outcome.promotion
        verdict = "now holds" if promotion.promoted else "did not take"
        console.print(
            f"registered {outcome.registered_name} v{outcome.registered_version}; "
            f"{verdict} @{alias}: {promotion.reason}"
        )
    if as_json:
        print_json(outcome.as_json())


SERIES_SHOWN = 10  # a panel of more series shows its best, median and worst, not every row


def series_table(per_series: dict[str, dict[str, dict[str, float]]], run_id: str) -> None:
    """A panel's test MASE per series (scale-free, so series compare), model beside baselines:
    every series of a small panel; of a large one the best, median and worst by the model's MASE,
    and where the full table is (a table of thousands of rows fits no screen)."""
    from pipelines.console import console, table

    names = list(next(iter(per_series.values())))
    ranked = sorted(per_series.items(), key=lambda item: item[1][names[0]]["mase"])
    if len(ranked) <= SERIES_SHOWN:
        chosen = [(key, key) for key, _ in ranked]
        title = "test MASE per series (below naive's: better than repeating the last value)"
    else:
        middle = len(ranked) // 2
        picks = {"best": 0, "median": middle, "worst": len(ranked) - 1}
        chosen = [(f"{ranked[i][0]} ({label})", ranked[i][0]) for label, i in picks.items()]
        title = f"test MASE of {len(ranked)} series: the best, median and worst by the model's"
    shown = dict(ranked)
    table(
        title, ["series", *names], [[label, *(shown[key][n]["mase"] for n in names)] for label, key in chosen]
    )
    if len(ranked) > SERIES_SHOWN:
        beats = sum(m[names[0]]["mase"] < m["naive"]["mase"] for _, m in ranked)
        console.print(
            f"{beats} of {len(ranked)} series beat naive; every series: per_series.csv in run {run_id} "
            "(and under per_series in --json)"
        )
