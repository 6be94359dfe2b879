"""The selection score: what models are chosen by (promotion gate, `compare`'s order, the sweep,
the demo's pick), never the test split.

With ``split.selection_folds`` k = 1 it is the model's MAE on the selection period, the later part
of validation that no fit saw. With k > 1 it is the mean over k disjoint folds, each as long as the
selection period, laid back from the test split (forecaster/data/splitting.py, ``fold_rows``):
fold 1 is the selection period, folds 2..k the stretches before it, inside validation, never in the
training rows. One selection period is a single stretch of weather, prices or load: on ETTh1 it was
twice as volatile as the test period and did not rank models as test did (issue 34).

Cheap variant: the one fitted model is scored on every fold. Refitting per fold (true
rolling-origin) would cost k trainings for every model compared; this costs k evaluations. The
price: folds 2..k lie in the rows early stopping watched. Early stopping used them only to pick one
epoch (of ``train.epochs``) by their mean loss, fitting no weight, so their error is at most a
little optimistic, and alike for every model trained on the same split; a fold over training rows,
by contrast, would measure in-sample error and favour the models that overfit most, so folds never
reach there. Each fold scores the model and the baselines on the same windows, so the naive
forecast's selection MAE is the mean over exactly the same folds."""

from __future__ import annotations

import numpy as np

from forecaster.data.datamodule import Prepared
from forecaster.data.splitting import selection_splits
from forecaster.evaluation import Evaluation, RetrievalEffect, evaluate
from forecaster.predictor import Predictor


def evaluate_selection(
    predictor: Predictor, prepared: Prepared, folds: int = 1, retrieval: bool = False
) -> Evaluation:
    """``predictor`` and the baselines on ``folds`` selection folds: one fold is exactly the
    selection split's evaluation; more give each metric's mean over folds (``folds`` keeps each).
    ``retrieval``: as ``evaluate``'s."""
    if folds == 1:
        return evaluate(predictor, prepared, "selection", retrieval)
    return fold_mean([evaluate(predictor, prepared, split, retrieval) for split in selection_splits(folds)])


def mean_of(values: list) -> float | np.ndarray:
    """The mean of floats, or the element-wise mean of equal-shaped arrays."""
    mean = np.mean(np.stack([np.asarray(v, dtype=float) for v in values]), axis=0)
    return float(mean) if mean.ndim == 0 else mean


def fold_retrieval(effects: list[RetrievalEffect | None]) -> RetrievalEffect | None:
    """The folds' retrieval effects as one: each MSE the unweighted mean over folds, as every
    metric here is."""
    if any(effect is None for effect in effects):
        return None
    return RetrievalEffect(
        mse=float(np.mean([e.mse for e in effects])),
        mse_without=float(np.mean([e.mse_without for e in effects])),
        windows=sum(e.windows for e in effects),
    )


def fold_mean(folds: list[Evaluation]) -> Evaluation:
    """One evaluation of ``folds`` (latest first): every metric the unweighted mean over folds (each
    stretch of time counts once, however many windows it holds); forecasts and actuals are stacked
    oldest first, in time order."""
    order = folds[::-1]  # oldest first

    def stacked(get) -> np.ndarray:
        return np.concatenate([get(fold) for fold in order])

    latest = folds[0]
    names = latest.metrics
    offset = sum(fold.windows for fold in folds[1:])  # the latest fold's windows come last
    return Evaluation(
        split=latest.split,
        windows=sum(fold.windows for fold in folds),
        metrics={
            name: {metric: float(mean_of([f.metrics[name][metric] for f in folds])) for metric in names[name]}
            for name in names
        },
        per_step_mae={name: np.asarray(mean_of([f.per_step_mae[name] for f in folds])) for name in names},
        forecasts={name: stacked(lambda f, n=name: f.forecasts[n]) for name in latest.forecasts},
        actual=stacked(lambda f: f.actual),
        past_target=stacked(lambda f: f.past_target),
        future_times=stacked(lambda f: f.future_times),
        attention=latest.attention,  # the selection period's examples
        attention_windows=None if latest.attention_windows is None else latest.attention_windows + offset,
        alignment=latest.alignment,  # the selection period's, as its examples
        attention_by_lag=latest.attention_by_lag,
        retrieval=fold_retrieval([fold.retrieval for fold in folds]),
        intervals={
            level: {key: mean_of([f.intervals[level][key] for f in folds]) for key in result}
            for level, result in latest.intervals.items()
        },
        quantiles={level: stacked(lambda f, q=level: f.quantiles[q]) for level in latest.quantiles},
        per_series={key: fold_mean([f.per_series[key] for f in folds]) for key in latest.per_series},
        folds=folds,
    )
