"""What a run records in MLflow: config, data provenance, metrics, plots, the pyfunc model."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import mlflow
import numpy as np
import pandas as pd
import torch
import yaml
from mlflow.entities import Metric
from mlflow.models.model import ModelInfo

from forecaster.data.datamodule import Prepared, PreparedPanel
from forecaster.evaluation import MODEL, Evaluation
from forecaster.onnx_export import BATCH_SIZES, ExportReport, export_network, held_out_rows
from forecaster.predictor import Predictor
from forecaster.pyfunc import (
    ForecastPyfunc,
    code_paths,
    input_example_for,
    pip_requirements,
    save_predictor_dir,
    signature_for,
)
from pipelines import plots
from pipelines.config import RunConfig

MAX_METRICS_PER_BATCH = 1000  # MLflow's limit on the metrics of one log_batch


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, list):
            flat[name] = ",".join(map(str, value))
        else:
            flat[name] = str(value)
    return flat


def log_config_and_data(config: RunConfig, prepared: Prepared, dataset_name: str) -> None:
    resolved = config.model_dump(mode="json")
    unread = {f"model.{name}" for name in config.model.inapplicable_fields()}  # what its network has
    params = {key: value for key, value in flatten(resolved).items() if key not in unread}
    # k as used (compare's column), also when the config leaves it to the default
    mlflow.log_params({**params, "split.selection_folds": str(config.split.folds)})
    mlflow.log_text(yaml.safe_dump(resolved, sort_keys=False), "config.yaml")
    series = prepared.series
    splits = prepared.split_summary()
    mlflow.log_params(
        {
            "dataset.name": dataset_name,
            "dataset.file": Path(series.source).name,
            "dataset.sha256": series.sha256,
            "dataset.frequency": series.frequency,
            "dataset.features": ",".join(series.columns),
            "dataset.future_covariates": ",".join(series.future_covariates),
            **{f"split.{s}.{k}": v for s, info in splits.items() for k, v in info.items()},
        }
    )
    if isinstance(prepared, PreparedPanel):
        mlflow.log_params({"dataset.series": len(prepared.members), "dataset.id_column": prepared.id_column})
    provenance = {
        "dataset": dataset_name,
        "source": series.source,
        "sha256": series.sha256,
        "frequency": series.frequency,
        "columns": series.columns,
        "future_covariates": series.future_covariates,
        "repairs": [repair for part in prepared.parts for repair in labelled_repairs(part.series)],
        "splits": splits,
    }
    if isinstance(prepared, PreparedPanel):
        provenance["series"] = {
            key: {"rows": len(part.series.frame), "splits": part_summary(part)}
            for key, part in prepared.members.items()
        }
    mlflow.log_dict(provenance, "dataset.json")
    frame = pd.concat(
        [part.series.frame.reset_index().assign(**id_column_of(prepared, part)) for part in prepared.parts]
    )
    dataset = mlflow.data.from_pandas(  # type: ignore[attr-defined]  # mlflow.data's lazy export
        frame, source=series.source, name=dataset_name, targets=series.target
    )
    mlflow.log_input(dataset, context="training")


def labelled_repairs(series) -> list[str]:
    return [
        repair if series.series_id is None else f"series {series.series_id}: {repair}"
        for repair in series.repairs
    ]


def part_summary(part) -> dict[str, object]:
    return {split: info["rows"] for split, info in part.split_summary().items()}


def id_column_of(prepared: Prepared, part) -> dict[str, str]:
    """The id column to put back beside a panel member's rows (none for a single series)."""
    if not isinstance(prepared, PreparedPanel):
        return {}
    return {prepared.id_column: part.series.series_id}


def metric_dict(evaluation: Evaluation, name: str, prefix: str) -> dict[str, float]:
    return {f"{prefix}_{metric}": value for metric, value in evaluation.metrics[name].items()}


def headline_metrics(test: Evaluation, selection: Evaluation) -> dict[str, float]:
    """What a run is compared on: MAE on selection (what models are chosen by: with
    split.selection_folds > 1 the mean over its folds, forecaster/selection.py) and on test (only
    reported), for the model and each baseline on the very same windows, plus test skill."""
    metrics = {"selection_mae": selection.metrics[MODEL]["mae"], "test_mae": test.metrics[MODEL]["mae"]}
    for baseline in test.metrics:
        if baseline != MODEL:
            metrics[f"{baseline}_selection_mae"] = selection.metrics[baseline]["mae"]
            metrics[f"{baseline}_test_mae"] = test.metrics[baseline]["mae"]
            metrics[f"test_skill_vs_{baseline}"] = test.skill("mae", baseline)
    return metrics


def log_evaluation(
    test: Evaluation,
    val: Evaluation,
    selection: Evaluation,
    title: str,
    model_id: str | None = None,
    plots: bool = True,
) -> None:
    """Model metrics as ``test_mae``, ``selection_mae`` (what models are chosen by) etc.; each
    baseline as ``naive_test_mae`` here and, in a nested run of its own, under the very same names
    as the model so they line up in the UI. The headline figures are linked to the logged model
    ``model_id`` (the experiment's Models tab tabulates them), the comparison goes to the run's
    description and to ``comparison.csv``. Selection is scored by MAE only (what decides)."""
    headline = headline_metrics(test, selection)
    metrics = {
        **metric_dict(test, MODEL, "test"),
        **metric_dict(val, MODEL, "best_val"),
    }
    for baseline in test.metrics:
        if baseline != MODEL:
            metrics.update(metric_dict(test, baseline, f"{baseline}_test"))
            metrics[f"selection_skill_vs_{baseline}"] = selection.skill("mae", baseline)
    metrics["test_windows"] = test.windows
    metrics.update(alignment_metrics(test))
    metrics.update(retrieval_metrics(test, selection))
    for level, result in test.intervals.items():
        percent = round(100 * level)
        metrics[f"test_coverage_{percent}"] = result["coverage"]
        metrics[f"test_interval_width_{percent}"] = result["width"]
        log_by_step(f"test_coverage_{percent}_by_step", result["coverage_by_step"])
    mlflow.log_metrics({k: v for k, v in metrics.items() if k not in headline})
    # k > 1: step 1 is the selection period
    log_by_step("selection_mae_by_fold", [scored.metrics[MODEL]["mae"] for scored in selection.folds])
    log_by_step("naive_selection_mae_by_fold", [scored.metrics["naive"]["mae"] for scored in selection.folds])
    mlflow.log_metrics(headline, model_id=model_id)
    log_by_step("test_mae_by_step", test.per_step_mae[MODEL])
    mlflow.log_dict(
        {
            name: {"metrics": m, "mae_by_step": test.per_step_mae[name].tolist()}
            for name, m in test.metrics.items()
        },
        "evaluation/test_metrics.json",
    )
    mlflow.log_text(comparison_csv(test, selection), "comparison.csv")
    if test.per_series:
        mlflow.log_text(per_series_csv(test, selection), "per_series.csv")
    mlflow.set_tag("mlflow.note.content", run_description(title, test, selection))
    if plots:
        log_plots(test, title)


def log_plots(test: Evaluation, title: str) -> None:
    """plots/*.png of the test split: forecasts against actuals, MAE by step, attention."""
    log_figure(plots.forecast_vs_actual(test, f"{title}: test forecasts"), "plots/forecast_vs_actual.png")
    log_figure(plots.error_by_step(test, f"{title}: test MAE by horizon step"), "plots/error_by_step.png")
    heatmap = plots.attention_heatmaps(test, f"{title}: attention weights on test windows")
    if heatmap is not None:
        log_figure(heatmap, "plots/attention.png")


def alignment_metrics(test: Evaluation) -> dict[str, float]:
    """An attention model's alignment on test windows (forecaster/alignment.py), reported only:
    ``test_attention_entropy``, ``test_attention_row_distance``, ``test_attention_seasonal_share``
    and its value for uniform rows; a measure without a value (one forecast step) is left out."""
    if test.alignment is None:
        return {}
    measured = test.alignment.as_dict()
    names = ("entropy", "row_distance", "seasonal_share", "seasonal_share_uniform")
    return {f"test_attention_{n}": measured[n] for n in names if np.isfinite(measured[n])}


def retrieval_ratios(test: Evaluation, selection: Evaluation) -> dict[str, float]:
    """An attention model's MSE with / without what its attention retrieves (forecaster/evaluation.py,
    ``RetrievalEffect``), by split: "selection", which a choice may read, and "test", reported
    only; below 1 where what the attention retrieves lowers the error. Empty for other models."""
    return {
        split: evaluation.retrieval.ratio
        for split, evaluation in (("selection", selection), ("test", test))
        if evaluation.retrieval is not None
    }


def retrieval_metrics(test: Evaluation, selection: Evaluation) -> dict[str, float]:
    """``retrieval_ratios`` as run metrics: ``selection_attention_retrieved_mse_ratio`` and
    ``test_attention_retrieved_mse_ratio``."""
    ratios = retrieval_ratios(test, selection)
    return {f"{split}_attention_retrieved_mse_ratio": ratio for split, ratio in ratios.items()}


def comparison_csv(test: Evaluation, selection: Evaluation) -> str:
    """One row per forecaster (the model first, then the baselines on the same windows)."""
    names = sorted(test.metrics[MODEL])
    lines = [",".join(["forecaster", "selection_mae", *(f"test_{m}" for m in names)])]
    for forecaster, values in test.metrics.items():
        row = [forecaster, f"{selection.metrics[forecaster]['mae']:.4f}"]
        lines.append(",".join(row + [f"{values[m]:.4f}" for m in names]))
    return "\n".join(lines) + "\n"


def per_series_csv(test: Evaluation, selection: Evaluation) -> str:
    """A panel's table: one row per series, the model's and each baseline's MASE (scale-free) and
    MAE (the series' own units) on test, the model's selection MAE and its test windows."""
    names = list(test.metrics)
    header = ["series", "test_windows", "selection_mae"]
    header += [f"{n}_test_mase" for n in names] + [f"{n}_test_mae" for n in names]
    lines = [",".join(header)]
    for key, result in test.per_series.items():
        row = [key, str(result.windows), f"{selection.per_series[key].metrics[MODEL]['mae']:.4f}"]
        row += [f"{result.metrics[n]['mase']:.4f}" for n in names]
        row += [f"{result.metrics[n]['mae']:.4f}" for n in names]
        lines.append(",".join(row))
    return "\n".join(lines) + "\n"


def per_series_json(evaluation: Evaluation) -> dict[str, dict[str, dict[str, float]]]:
    """Series id -> forecaster -> metric (what `train --json` carries for a panel)."""
    return {key: result.metrics for key, result in evaluation.per_series.items()}


def run_description(title: str, test: Evaluation, selection: Evaluation) -> str:
    """The run's description (Markdown, shown on its Overview tab): the headline figures."""

    def versus(evaluation: Evaluation) -> str:
        model = evaluation.metrics[MODEL]["mae"]
        named = ((n.replace("_", " "), m["mae"]) for n, m in evaluation.metrics.items() if n != MODEL)
        others = ", ".join(f"{name} {mae:.4f}" for name, mae in named)
        return f"**{model:.4f}** vs {others}"

    return (
        f"{title}: selection MAE {versus(selection)} (models are chosen on selection); "
        f"test MAE {versus(test)}, skill vs naive {test.skill('mae', 'naive'):.1%} "
        f"over {test.windows} test windows. Baselines: the nested runs and comparison.csv."
    )


def log_baseline_runs(
    test: Evaluation, val: Evaluation, selection: Evaluation, parent_tags: dict[str, str]
) -> None:
    for baseline in test.metrics:
        if baseline == MODEL:
            continue
        with mlflow.start_run(run_name=baseline, nested=True, experiment_id=experiment_of_active_run()):
            mlflow.set_tags({**parent_tags, "role": "baseline", "model.family": baseline})
            mlflow.log_metrics(
                {
                    **metric_dict(test, baseline, "test"),
                    **metric_dict(val, baseline, "best_val"),
                    "selection_mae": selection.metrics[baseline]["mae"],
                }
            )
            log_by_step("test_mae_by_step", test.per_step_mae[baseline])


def log_by_step(name: str, values) -> None:
    """One metric's history, steps 1, 2, ... in one request (a store round trip per value made
    logging a model at H=720 write thousands of transactions)."""
    run_id = mlflow.active_run().info.run_id
    now = int(time.time() * 1000)
    history = [Metric(name, float(v), now, step) for step, v in enumerate(values, start=1)]
    for first in range(0, len(history), MAX_METRICS_PER_BATCH):
        mlflow.MlflowClient().log_batch(run_id, metrics=history[first : first + MAX_METRICS_PER_BATCH])


def log_figure(figure: plt.Figure, path: str) -> None:
    mlflow.log_figure(figure, path)
    plt.close(figure)


def held_out_inputs(prepared: Prepared) -> dict[str, torch.Tensor]:
    """Up to 64 selection windows as the network takes them (model_inputs' batch): what the ONNX
    export is checked on. Windows no fit or early stopping saw, and not test's: whether the graph
    is kept decides what serves, and no decision reads the test split."""
    dataset: Any = prepared.dataset("selection")  # a WindowDataset: sized, batch-indexable
    rows = held_out_rows(len(dataset), min(len(dataset), max(BATCH_SIZES)))
    return dataset.__getitems__(rows.tolist())


def log_pyfunc_model(predictor: Predictor, prepared: Prepared, onnx_export: bool = True) -> ModelInfo:
    """The pyfunc model, with the network's ONNX export beside its weights when ONNX Runtime
    reproduces it on held-out windows (unless ``onnx_export`` is off: tracking.onnx_export); the
    run is tagged with the runtimes the model carries (``runtimes``, ``onnx_export``), which the
    model's metadata repeats for the registered version."""
    windows = prepared.parts[0].windows("test")
    ahead = windows.future_covariates()
    example = input_example_for(
        predictor, windows.past()[:1], windows.past_times()[:1], None if ahead is None else ahead[:1]
    )
    with tempfile.TemporaryDirectory(prefix="forecaster-model-") as tmp:
        directory = save_predictor_dir(predictor, tmp)
        if onnx_export:
            export = export_network(predictor.network, held_out_inputs(prepared), Path(directory))
        else:
            export = ExportReport(verified=False, reason="skipped: tracking.onnx_export is false")
            export.save(Path(directory))
        mlflow.set_tags(export.tags())
        return mlflow.pyfunc.log_model(
            name="model",
            python_model=ForecastPyfunc(),
            artifacts={"predictor": directory},
            signature=signature_for(predictor),
            input_example=example,
            pip_requirements=pip_requirements(),
            code_paths=code_paths(),  # self-contained: loads without this project installed
            metadata={
                "lookback": predictor.lookback,
                "horizon": predictor.horizon,
                "features": json.dumps(predictor.features),
                "future_covariates": json.dumps(predictor.future_covariates),
                "panel": predictor.is_panel,
                "frequency": predictor.frequency,
                "family": predictor.config.model.family,
                **export.tags(),
            },
        )


def experiment_of_active_run() -> str:
    """Nested runs must name the parent's experiment, or MLflow files them under Default."""
    return mlflow.active_run().info.experiment_id
