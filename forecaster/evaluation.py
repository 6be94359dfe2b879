"""Score a predictor against the baselines on the same windows, in original units; a panel per
series and pooled (MASE, scale-free, averaged over series: its mean and median)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forecaster.alignment import AlignmentMetrics, alignment_metrics, mean_weight_by_lag
from forecaster.baselines import baseline_forecasts
from forecaster.conformal import coverage, interval_quantiles
from forecaster.data.datamodule import Prepared, PreparedPanel, PreparedSeries
from forecaster.data.frequency import seasonal_period
from forecaster.data.windows import SeriesWindows
from forecaster.metrics import all_metrics, per_step_mae, seasonal_naive_scale
from forecaster.models.step_attention import nothing_retrieved
from forecaster.predictor import Predictor
from forecaster.runtime import TorchNetwork

MODEL = "model"
ATTENTION_EXAMPLES = 3  # windows whose attention weights an evaluation keeps (the heat map's)
# evenly spaced windows the alignment metrics are measured on (forecaster/alignment.py): 64 x H x L
# weights, 62 MB at H=720, L=336, made and dropped at once
ALIGNMENT_SAMPLE = 64


def example_windows(windows: int, count: int) -> np.ndarray:
    """Indices of ``count`` evenly spaced windows out of ``windows``: plots then show the whole
    period, not its first day."""
    return np.linspace(0, windows - 1, num=min(count, windows)).astype(int)


@dataclass(frozen=True)
class RetrievalEffect:
    """What a residual attention's retrieved term (``Predictor.attention_is_residual``) does to its
    own forecast on a split's windows: the MSE of its forecasts, and of the same network's with
    nothing retrieved (``nothing_retrieved``). A heat map shows where each forecast step reads; this
    says whether what it reads lowers the error. On ETTh1 the two can part (benchmarks/README.md,
    issue 41's twelfth pass)."""

    mse: float
    mse_without: float
    windows: int

    @property
    def ratio(self) -> float:
        """MSE with / without what the attention retrieves: below 1 where it lowers the error."""
        return self.mse / self.mse_without

    @classmethod
    def of(cls, actual: np.ndarray, mean: np.ndarray, without: np.ndarray) -> RetrievalEffect:
        """From the actuals (N, H) and both forecasts of the same windows."""
        return cls(
            mse=float(np.mean((actual - mean) ** 2)),
            mse_without=float(np.mean((actual - without) ** 2)),
            windows=len(actual),
        )

    @classmethod
    def pooled(cls, parts: list[RetrievalEffect | None]) -> RetrievalEffect | None:
        """The effect over all the parts' windows together (a panel's series), as its pooled
        metrics are; a part without windows has none; None where no part has one."""
        parts = [part for part in parts if part is not None]
        windows = sum(part.windows for part in parts)
        if windows == 0:
            return None
        return cls(
            mse=sum(part.mse * part.windows for part in parts) / windows,
            mse_without=sum(part.mse_without * part.windows for part in parts) / windows,
            windows=windows,
        )


@dataclass
class Evaluation:
    split: str
    windows: int
    metrics: dict[str, dict[str, float]]  # forecaster name -> metric -> value
    per_step_mae: dict[str, np.ndarray]  # forecaster name -> (H,)
    forecasts: dict[str, np.ndarray]  # forecaster name -> (N, H)
    actual: np.ndarray  # (N, H)
    past_target: np.ndarray  # (N, L)
    future_times: np.ndarray  # (N, H)
    # attention models: the weights (k, H, L) of the k evenly spaced windows ``attention_windows``
    # (indices into the N windows); all N would be N x H x L numbers (2 GB at H=720, L=336 on
    # ETTh1's test split, for a heat map that shows three)
    attention: np.ndarray | None
    attention_windows: np.ndarray | None = None
    # attention models: how the weights align, measured on ALIGNMENT_SAMPLE evenly spaced windows,
    # and their mean weight by lag (lag 1 first; forecaster/alignment.py)
    alignment: AlignmentMetrics | None = None
    attention_by_lag: np.ndarray | None = None
    # residual attention models, where asked (``evaluate(retrieval=True)``): the retrieved term's
    # effect on every window of the split, a panel's members pooled (``RetrievalEffect``)
    retrieval: RetrievalEffect | None = None
    intervals: dict[float, dict[str, Any]] = field(default_factory=dict)  # level -> coverage
    quantiles: dict[float, np.ndarray] = field(default_factory=dict)  # level -> (N, H)
    per_series: dict[str, Evaluation] = field(default_factory=dict)  # a panel's, by series id
    folds: list[Evaluation] = field(default_factory=list)  # a k-fold selection score's, latest first

    def skill(self, metric: str = "mae", baseline: str = "naive") -> float:
        """1 - model/baseline: > 0 means the model beats the baseline."""
        return 1.0 - self.metrics[MODEL][metric] / self.metrics[baseline][metric]


def evaluate(
    predictor: Predictor, prepared: Prepared, split: str = "test", retrieval: bool = False
) -> Evaluation:
    """One series' evaluation, or a panel's: each series scored alone (``per_series``), and the
    windows of all pooled, MASE being the mean over series (``mase_median`` beside it).
    ``retrieval``: a residual attention model's ``RetrievalEffect`` too, which costs one more pass
    over the windows: asked for only where it is reported (a run's test and selection scores)."""
    if isinstance(prepared, PreparedPanel):
        return evaluate_panel(predictor, prepared, split, retrieval=retrieval)
    return evaluate_series(predictor, prepared, split, retrieval)


@dataclass
class SplitWindows:
    """One series' windows of a split, in raw units, as the predictor takes them."""

    part: PreparedSeries
    windows: SeriesWindows
    past: np.ndarray  # (N, L, F)
    times: np.ndarray | None  # (N, L) for calendar models
    future: np.ndarray | None  # (N, H, Kf)
    ids: list[str | None] | None

    @classmethod
    def of(cls, predictor: Predictor, part: PreparedSeries, split: str) -> SplitWindows:
        windows = part.windows(split)  # raw units, every window (stride 1)
        past = windows.past()
        ids = None if part.series.series_id is None else [part.series.series_id] * len(past)
        times = windows.past_times() if predictor.uses_calendar else None
        return cls(part, windows, past, times, windows.future_covariates(), ids)


def evaluate_series(
    predictor: Predictor, prepared: PreparedSeries, split: str = "test", retrieval: bool = False
) -> Evaluation:
    given = SplitWindows.of(predictor, prepared, split)
    prediction = predictor.predict(given.past, given.times, future=given.future, series_ids=given.ids)
    without = None
    if retrieval:
        without = forecasts_without_retrieval(predictor, given.past, given.times, given.future, given.ids)
    return score(predictor, given, split, prediction.mean, prediction.quantiles, True, without)


def evaluate_panel(
    predictor: Predictor,
    prepared: PreparedPanel,
    split: str,
    windows_per_call: int = 8192,
    retrieval: bool = False,
) -> Evaluation:
    """Every member's windows, forecast ``windows_per_call`` at a time across members (one call
    per member cost thousands of calls on a large panel), each member scored on its slice."""
    per_series: dict[str, Evaluation] = {}
    pending: list[tuple[str, SplitWindows]] = []

    def flush() -> None:
        if not pending:
            return
        parts = [given for _, given in pending]
        past = np.concatenate([g.past for g in parts])
        times = None if parts[0].times is None else np.concatenate([g.times for g in parts])
        future = None if parts[0].future is None else np.concatenate([g.future for g in parts])
        ids = [i for g in parts for i in g.ids or []] or None
        prediction = predictor.predict(past, times, future=future, series_ids=ids)
        without = forecasts_without_retrieval(predictor, past, times, future, ids) if retrieval else None
        at = 0
        for key, given in pending:
            rows = slice(at, at + len(given.past))
            at = rows.stop
            quantiles = {q: bound[rows] for q, bound in prediction.quantiles.items()}
            # the pooled attention examples are the first series' (pool keeps its order)
            per_series[key] = score(
                predictor,
                given,
                split,
                prediction.mean[rows],
                quantiles,
                not per_series,
                without=None if without is None else without[rows],
            )
        pending.clear()

    waiting = 0
    for key, part in prepared.members.items():
        pending.append((key, SplitWindows.of(predictor, part, split)))
        waiting += len(pending[-1][1].past)
        if waiting >= windows_per_call:
            flush()
            waiting = 0
    flush()
    return pool(per_series)


def score(
    predictor: Predictor,
    given: SplitWindows,
    split: str,
    mean: np.ndarray,
    quantiles: dict[float, np.ndarray],
    examples: bool,
    without: np.ndarray | None = None,
) -> Evaluation:
    """One series' forecasts against its actuals and the baselines of the same windows; ``without``
    (N, H): the same network's forecasts with nothing retrieved, for its ``RetrievalEffect``."""
    prepared, windows, past = given.part, given.windows, given.past
    actual = windows.target()  # (N, H)
    period = seasonal_period(prepared.series.frequency)
    observed = Observed()
    if examples and predictor.has_attention and len(past):
        observed = observe_attention(predictor, given, period)
    past_target = past[:, :, 0]  # (N, L)
    forecasts = {MODEL: mean, **baseline_forecasts(past_target, windows.horizon, period)}
    scale = training_mase_scale(prepared)
    last = past_target[:, -1]
    intervals = {}
    for level in predictor.interval_levels:
        lower, upper = interval_quantiles(level)
        intervals[level] = coverage(actual, quantiles[lower], quantiles[upper])
    return Evaluation(
        split=split,
        windows=len(windows),
        metrics={name: all_metrics(actual, f, last, scale) for name, f in forecasts.items()},
        per_step_mae={name: per_step_mae(actual, f) for name, f in forecasts.items()},
        forecasts=forecasts,
        actual=actual,
        past_target=past_target,
        future_times=windows.future_times(),
        attention=observed.attention,
        attention_windows=observed.windows,
        alignment=observed.alignment,
        attention_by_lag=observed.by_lag,
        retrieval=None if without is None or not len(actual) else RetrievalEffect.of(actual, mean, without),
        intervals=intervals,
        quantiles=quantiles,
    )


@dataclass
class Observed:
    """What an evaluation keeps of an attention model's weights."""

    attention: np.ndarray | None = None  # (k, H, L) of the heat map's windows
    windows: np.ndarray | None = None  # (k,) their indices
    alignment: AlignmentMetrics | None = None
    by_lag: np.ndarray | None = None  # (H + L - 1,)


def observe_attention(predictor: Predictor, given: SplitWindows, period: int) -> Observed:
    """The weights of ALIGNMENT_SAMPLE evenly spaced windows: their alignment metrics and mean
    weight by lag, and the maps of ATTENTION_EXAMPLES of them for the heat map."""
    sample = example_windows(len(given.past), ALIGNMENT_SAMPLE)
    weights = predictor.predict(
        given.past[sample],
        None if given.times is None else given.times[sample],
        return_attention=True,
        future=None if given.future is None else given.future[sample],
        series_ids=None if given.ids is None else [given.ids[i] for i in sample],
    ).attention  # (k, H, L)
    shown = example_windows(len(sample), ATTENTION_EXAMPLES)
    return Observed(
        attention=weights[shown],
        windows=sample[shown],
        alignment=alignment_metrics(weights, period),
        by_lag=mean_weight_by_lag(weights),
    )


def forecasts_without_retrieval(
    predictor: Predictor,
    past: np.ndarray,
    times: np.ndarray | None,
    future: np.ndarray | None,
    ids: list[str | None] | None,
) -> np.ndarray | None:
    """(N, H): a residual attention model's forecasts of these windows (``Predictor.predict``'s
    arguments) with nothing retrieved (``nothing_retrieved``), or None for any other model. Run by
    torch whatever runs the model (an ONNX graph has no switch; its export was verified against
    torch when it was made)."""
    if not predictor.attention_is_residual:
        return None
    runtime = predictor.runtime
    predictor.runtime = TorchNetwork(predictor.network)
    try:
        with nothing_retrieved(predictor.network):
            return predictor.predict(past, times, future=future, series_ids=ids).mean
    finally:
        predictor.runtime = runtime


def training_mase_scale(prepared: PreparedSeries) -> float:
    """MASE's scale for one series: the in-sample seasonal-naive MAE of its training rows. Stored
    with the model too (``Predictor.mase_scales``), so the service's live MASE uses the same."""
    train_target = prepared.series.frame.iloc[: prepared.borders.train_end, 0].to_numpy()
    return seasonal_naive_scale(train_target, seasonal_period(prepared.series.frequency))


def pool(per_series: dict[str, Evaluation]) -> Evaluation:
    """All series' windows together; MASE (each series' own scale) averaged over series, so a
    series priced in hundreds does not outweigh one priced in ones."""
    parts = list(per_series.values())
    first = parts[0]

    def stacked(get) -> np.ndarray:
        return np.concatenate([get(part) for part in parts])

    actual = stacked(lambda e: e.actual)
    past_target = stacked(lambda e: e.past_target)
    forecasts = {name: stacked(lambda e, n=name: e.forecasts[n]) for name in first.forecasts}
    metrics = {}
    for name, forecast in forecasts.items():
        mase_values = np.array([part.metrics[name]["mase"] for part in parts])
        metrics[name] = {
            **all_metrics(actual, forecast, past_target[:, -1], 1.0),
            "mase": float(np.mean(mase_values)),
            "mase_median": float(np.median(mase_values)),
        }
    quantiles = {level: stacked(lambda e, q=level: e.quantiles[q]) for level in first.quantiles}
    intervals = {}
    for level in first.intervals:
        lower, upper = interval_quantiles(level)
        intervals[level] = coverage(actual, quantiles[lower], quantiles[upper])
    return Evaluation(
        split=first.split,
        windows=len(actual),
        metrics=metrics,
        per_step_mae={name: per_step_mae(actual, f) for name, f in forecasts.items()},
        forecasts=forecasts,
        actual=actual,
        past_target=past_target,
        future_times=stacked(lambda e: e.future_times),
        # the first series' examples: its windows come first in the pooled order, so their
        # indices stay right
        attention=first.attention,
        attention_windows=first.attention_windows,
        alignment=first.alignment,
        attention_by_lag=first.attention_by_lag,
        retrieval=RetrievalEffect.pooled([part.retrieval for part in parts]),
        intervals=intervals,
        quantiles=quantiles,
        per_series=per_series,
    )
