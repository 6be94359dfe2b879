"""Figures logged with every evaluation: forecasts vs actual, error by horizon step, attention."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from forecaster.conformal import interval_quantiles  # noqa: E402
from forecaster.evaluation import MODEL, Evaluation, example_windows  # noqa: E402


def series_picks(evaluation: Evaluation) -> list[tuple[str, Evaluation]]:
    """A panel's best, median and worst series by the model's MASE (scale-free), labelled."""
    ranked = sorted(evaluation.per_series.items(), key=lambda item: item[1].metrics[MODEL]["mase"])
    positions = {"best": 0, "median": (len(ranked) - 1) // 2, "worst": len(ranked) - 1}
    picks, seen = [], set()
    for role, k in positions.items():
        if k in seen:
            continue
        seen.add(k)
        key, result = ranked[k]
        picks.append((f"{role} series {key} (MASE {result.metrics[MODEL]['mase']:.3f})", result))
    return picks


def forecast_vs_actual(evaluation: Evaluation, title: str) -> Figure:
    """Evenly spaced test windows; for a panel, the middle test window of its best, median and
    worst series."""
    if evaluation.per_series:
        shown = [(result, result.windows // 2, label) for label, result in series_picks(evaluation)]
    else:
        shown = [(evaluation, int(i), "") for i in example_windows(evaluation.windows, 4)]
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 2.6 * len(shown)), squeeze=False)
    lookback = evaluation.past_target.shape[1]
    horizon = evaluation.actual.shape[1]
    past_x, future_x = np.arange(-lookback, 0), np.arange(horizon)
    for ax, (result, i, label) in zip(axes[:, 0], shown, strict=True):
        ax.plot(past_x, result.past_target[i], color="0.5", label="input")
        ax.plot(future_x, result.actual[i], color="black", label="actual")
        for level in result.intervals:
            lower, upper = interval_quantiles(level)
            ax.fill_between(
                future_x,
                result.quantiles[lower][i],
                result.quantiles[upper][i],
                alpha=0.2,
                color="tab:blue",
                label=f"{round(100 * level)}% interval",
            )
        for name, forecast in result.forecasts.items():
            style = "-" if name == MODEL else ":"
            ax.plot(future_x, forecast[i], style, label=name)
        ax.set_title(
            f"{label + ': ' if label else ''}window {i} "
            f"(first forecast step {np.datetime_as_string(result.future_times[i, 0], 'm')})",
            fontsize=9,
        )
        ax.axvline(-0.5, color="0.8")
    axes[-1, 0].set_xlabel("steps relative to the first forecast step")
    axes[0, 0].legend(loc="upper left", fontsize=8, ncol=5)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def error_by_step(evaluation: Evaluation, title: str) -> Figure:
    fig, ax = plt.subplots(figsize=(8, 4))
    steps = np.arange(1, evaluation.actual.shape[1] + 1)
    for name, errors in evaluation.per_step_mae.items():
        ax.plot(steps, errors, marker="o", markersize=3, label=name)
    ax.set_xlabel("horizon step")
    ax.set_ylabel("MAE (original units)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def attention_heatmaps(evaluation: Evaluation, title: str) -> Figure | None:
    """Forecast step (rows) x look-back step (columns) for the test windows the evaluation kept the
    weights of, and beside them the mean weight by lag over the evaluation's sample of windows
    (uniform rows give 1/L at every lag: peaks at 24, 48 ... on hourly data are the same hour on
    earlier days); the alignment metrics in the title."""
    if evaluation.attention is None:
        return None
    picks = evaluation.attention_windows
    panels = len(picks) + (evaluation.attention_by_lag is not None)
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4.2), squeeze=False)
    horizon, lookback = evaluation.attention.shape[1:]
    for ax, i, weights in zip(axes[0], picks, evaluation.attention, strict=False):
        image = ax.imshow(
            weights,
            aspect="auto",
            cmap="viridis",
            extent=(-lookback - 0.5, -0.5, horizon + 0.5, 0.5),
        )
        ax.set_xlabel("look-back step (steps before the forecast)")
        ax.set_ylabel("forecast step")
        ax.set_title(f"window {i}", fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046)
    if evaluation.attention_by_lag is not None:
        lag_profile(axes[0, -1], evaluation, lookback)
    lines = [title]
    if evaluation.alignment is not None:
        lines.append(evaluation.alignment.title())
    if evaluation.retrieval is not None:
        lines.append(
            f"MSE with / without what the attention retrieves: {evaluation.retrieval.ratio:.3f} "
            f"(below 1: it lowers the error), {evaluation.retrieval.windows} windows"
        )
    fig.suptitle("\n".join(lines), fontsize=10)
    fig.tight_layout()
    return fig


def lag_profile(ax, evaluation: Evaluation, lookback: int) -> None:
    """The mean weight at each lag (forecast step's time minus look-back step's), uniform beside it,
    and dotted lines at the multiples of the seasonal period."""
    by_lag = evaluation.attention_by_lag
    ax.plot(np.arange(1, len(by_lag) + 1), by_lag, color="tab:blue", linewidth=1)
    ax.axhline(1 / lookback, color="0.5", linestyle="--", linewidth=1, label="uniform (1/L)")
    if evaluation.alignment is not None:
        period = evaluation.alignment.period
        for lag in range(period, len(by_lag) + 1, period):
            ax.axvline(lag, color="tab:orange", linestyle=":", linewidth=0.8)
    ax.set_xlabel("lag (steps between forecast step and look-back step)")
    ax.set_ylabel("mean weight")
    windows = "" if evaluation.alignment is None else f" over {evaluation.alignment.windows} windows"
    ax.set_title(f"mean weight by lag{windows}", fontsize=9)
    ax.legend(fontsize=8)
