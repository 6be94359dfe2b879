"""`forecast backtest`: rolling-origin evaluation. The last ``test`` fraction of the series is cut
into K consecutive blocks; fold k trains on everything before its validation block and is scored
on block k. Each fold is a nested MLflow run; the parent holds the spread."""

from __future__ import annotations

import time

import mlflow
import numpy as np
import pandas as pd

from forecaster.config import SplitConfig
from forecaster.data.datamodule import prepare
from forecaster.data.panel import LoadedPanel
from forecaster.data.source import load_from_config
from forecaster.evaluation import evaluate
from forecaster.training import train_model
from pipelines.config import RunConfig
from pipelines.console import console, quiet_lightning, table
from pipelines.logging_run import log_config_and_data
from pipelines.tracking import ensure_experiment, environment_tags
from pipelines.train import dataset_name, default_run_name


def timeline(loaded) -> pd.DatetimeIndex:
    """The series' timestamps; a panel's folds are cut on the union of all its series' (every
    series then shares each fold's dates)."""
    if not isinstance(loaded, LoadedPanel):
        return loaded.frame.index
    union = None
    for member in loaded.members.values():
        union = member.frame.index if union is None else union.union(member.frame.index)
    return union


def fold_splits(index, split: SplitConfig, folds: int) -> list[SplitConfig]:
    rows = len(index)
    test_rows = int(rows * split.test)
    val_rows = int(rows * split.val)
    block = test_rows // folds
    first_test = rows - block * folds
    splits = []
    for k in range(folds):
        test_lo = first_test + k * block
        test_hi = test_lo + block
        splits.append(
            SplitConfig(
                val_start=index[test_lo - val_rows].to_pydatetime(),
                test_start=index[test_lo].to_pydatetime(),
                end=None if test_hi >= rows else index[test_hi].to_pydatetime(),
            )
        )
    return splits


def fold_line(
    k: int, folds: int, split: SplitConfig, metrics: dict[str, dict[str, float]], seconds: float
) -> str:
    """One line per finished fold, e.g. ``fold 2/3  test 1989-05-01 .. 1990-01-01  MAE 1.7310
    (naive 2.0410, skill +0.152)  8.1 s``."""
    model, naive = metrics["model"]["mae"], metrics["naive"]["mae"]
    end = split.end.date() if split.end else "end"
    return (
        f"fold {k}/{folds}  test {split.test_start.date()} .. {end}  MAE {model:.4f} "
        f"(naive {naive:.4f}, skill {1 - model / naive:+.3f})  {seconds:.1f} s"
    )


def run_backtest(config: RunConfig, folds: int, tracking_uri: str, quiet: bool = False) -> dict[str, object]:
    """Unless ``quiet``, prints one line per fold as it finishes."""
    quiet_lightning()
    base = config.forecast_config()
    series = load_from_config(base.data)
    splits = fold_splits(timeline(series), base.split, folds)
    name = dataset_name(config)
    experiment_id = ensure_experiment(config.tracking.experiment, tracking_uri)
    per_fold: list[dict[str, dict[str, float]]] = []
    run_name = f"backtest-{default_run_name(config)}-{folds}folds"
    tags = {"role": "backtest", "dataset": name, "model.family": config.model.family, **environment_tags()}
    with mlflow.start_run(experiment_id=experiment_id, run_name=run_name, tags=tags) as parent:
        mlflow.log_param("backtest.folds", folds)
        for k, split in enumerate(splits, start=1):
            started = time.perf_counter()
            fold_config = base.model_copy(update={"split": split})
            prepared = prepare(series, fold_config)
            with mlflow.start_run(
                run_name=f"fold-{k}",
                nested=True,
                experiment_id=experiment_id,
                tags={**tags, "role": "backtest-fold"},
            ):
                if k == 1:
                    log_config_and_data(config, prepared, name)
                trained = train_model(fold_config, prepared, progress=not quiet)
                result = evaluate(trained.predictor, prepared, "test")
                per_fold.append(result.metrics)
                if not quiet:
                    console.print(fold_line(k, folds, split, result.metrics, time.perf_counter() - started))
                mlflow.log_params({"fold": k, "test_start": str(split.test_start)})
                mlflow.log_metrics(
                    {
                        f"{forecaster}_test_{metric}" if forecaster != "model" else f"test_{metric}": value
                        for forecaster, values in result.metrics.items()
                        for metric, value in values.items()
                    }
                )
        summary = aggregate(per_fold)
        mlflow.log_metrics(
            {
                f"{forecaster}_{stat}_test_mae": summary[forecaster][stat]
                for forecaster in summary
                for stat in ("mean", "std")
            }
        )
    rows = [[f"fold {k}", *(m[f]["mae"] for f in per_fold[0])] for k, m in enumerate(per_fold, start=1)]
    rows += [[stat, *(summary[f][stat] for f in per_fold[0])] for stat in ("mean", "std")]
    skills = [1 - m["model"]["mae"] / m["naive"]["mae"] for m in per_fold]
    table(f"{run_name}: test MAE per fold (original units)", ["fold", *per_fold[0]], rows)
    console.print(
        f"skill vs naive per fold: {', '.join(f'{s:+.3f}' for s in skills)} "
        "(near 0: the model is no better than repeating the last value)"
    )
    return {"run_id": parent.info.run_id, "folds": per_fold, "summary": summary, "skill_vs_naive": skills}


def aggregate(per_fold: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    summary = {}
    for forecaster in per_fold[0]:
        values = np.array([fold[forecaster]["mae"] for fold in per_fold])
        summary[forecaster] = {"mean": float(values.mean()), "std": float(values.std(ddof=0))}
    return summary
