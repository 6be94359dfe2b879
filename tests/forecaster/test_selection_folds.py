"""Selection folds (split.selection_folds): where they lie, what an impossible count says, and that
the selection score is the mean over them, the baselines' over the very same windows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from pydantic import ValidationError

from forecaster.config import ForecastConfig, SplitConfig
from forecaster.data.datamodule import prepare_series
from forecaster.data.loading import LoadedSeries
from forecaster.data.splitting import SplitBorders, selection_splits, split_borders
from forecaster.errors import ConfigError
from forecaster.evaluation import RetrievalEffect, evaluate
from forecaster.models import build_network
from forecaster.selection import evaluate_selection, fold_retrieval
from forecaster.training import predictor_for

LOOKBACK, HORIZON = 8, 4


def wavy(n: int = 600) -> LoadedSeries:
    index = pd.date_range("2024-01-01", periods=n, freq="h", name="t")
    rng = np.random.default_rng(0)
    y = np.sin(np.arange(n) / 7) * 5 + rng.normal(0, 1, n).cumsum() * 0.3
    return LoadedSeries(pd.DataFrame({"y": y}, index=index), "y", [], "h", "wavy", "0" * 64)


def config(folds: int, selection: float = 0.25) -> ForecastConfig:
    return ForecastConfig.model_validate(
        {
            "data": {"path": "x.csv", "time_column": "t", "target": "y"},
            "window": {"lookback": LOOKBACK, "horizon": HORIZON},
            "split": {
                "train": 0.5,
                "val": 0.3,
                "test": 0.2,
                "selection": selection,
                "selection_folds": folds,
            },
            "model": {"hidden_size": 4, "layers": 1},
        }
    )


def target_rows(prepared, split: str) -> set[int]:
    starts = prepared.windows(split).starts
    return {int(s) + LOOKBACK + h for s in starts for h in range(HORIZON)}


def test_folds_are_disjoint_as_long_as_selection_and_inside_validation():
    series = wavy()
    prepared = prepare_series(series, config(folds=4))
    borders = prepared.borders
    rows = [borders.rows(split) for split in selection_splits(4)]
    assert rows[0] == borders.rows("selection")  # fold 1 is the selection period
    length = borders.val_end - borders.selection_start
    for later, earlier in zip(rows, rows[1:], strict=False):
        assert earlier[1] == later[0]  # back to back, latest first
    for lo, hi in rows:
        assert hi - lo == length
        assert borders.train_end <= lo and hi <= borders.val_end  # never training, never test rows
    targets = [target_rows(prepared, split) for split in selection_splits(4)]
    assert all(targets)
    for i, these in enumerate(targets):
        assert max(these) < borders.val_end
        assert min(these) >= borders.train_end
        for other in targets[i + 1 :]:
            assert not these & other


def test_the_default_is_the_two_halves_of_validation_or_what_fits():
    """Unset, k is 2 (the ETTh1 benchmark's rule) and yields to a selection period too long for
    two folds, also after a saved config's selection is changed; set explicitly, a k that does not
    fit is refused (below)."""
    assert SplitConfig().selection_folds is None and SplitConfig().folds == 2
    assert SplitConfig(selection=0.6).folds == 1
    assert SplitConfig(selection=0.3).folds == 2
    saved = SplitConfig().model_dump()  # as a model's config.yaml keeps it
    assert SplitConfig.model_validate({**saved, "selection": 0.6}).folds == 1
    assert SplitConfig(selection_folds=1).folds == 1


def test_one_fold_is_todays_selection_window():
    assert selection_splits(1) == ("selection",)
    series = wavy()
    one, four = prepare_series(series, config(folds=1)), prepare_series(series, config(folds=4))
    assert one.borders == four.borders  # folds move no border: training and early stopping as before
    lo, hi = one.borders.selection_start, one.borders.val_end
    assert one.borders.rows(selection_splits(1)[0]) == (lo, hi)
    assert target_rows(one, "selection") == set(range(lo, hi))


def test_too_many_folds_for_the_validation_rows_is_one_line_naming_the_field():
    with pytest.raises(ValidationError, match="selection_folds") as raised:
        SplitConfig(selection=0.5, selection_folds=3)
    assert "at most 2" in str(raised.value)
    SplitConfig(selection=0.5, selection_folds=2)  # exactly the whole validation period fits
    # rows that do not divide evenly (a panel member's gaps): the fold that would reach the
    # training rows is refused by name, never laid over them
    borders = SplitBorders(train_end=10, selection_start=20, val_end=30, test_end=40)
    assert borders.rows("selection-2") == (10, 20)
    with pytest.raises(ConfigError, match=r"split\.selection_folds: fold 3 .* inside the training rows"):
        borders.rows("selection-3")


def test_dates_mode_folds_stay_before_the_test_date():
    index = pd.date_range("2024-01-01", periods=600, freq="h")
    split = SplitConfig(val_start="2024-01-13", test_start="2024-01-21", selection=0.25, selection_folds=4)
    borders = split_borders(index, split)
    oldest_lo, _ = borders.rows("selection-4")
    assert oldest_lo >= borders.train_end and borders.rows("selection")[1] == borders.val_end
    assert index[borders.val_end] == pd.Timestamp("2024-01-21")


def test_the_score_is_the_mean_over_folds_for_the_model_and_naive_alike():
    series = wavy()
    cfg = config(folds=3)
    prepared = prepare_series(series, cfg)
    torch.manual_seed(0)
    network = build_network(cfg.model, series_features=1, calendar_features=0, horizon=HORIZON)
    predictor = predictor_for(network, cfg, prepared)  # untrained: any fixed forecaster will do
    scored = evaluate_selection(predictor, prepared, 3)
    folds = [evaluate(predictor, prepared, split) for split in selection_splits(3)]
    for name in ("model", "naive"):
        expected = np.mean([f.metrics[name]["mae"] for f in folds])
        assert scored.metrics[name]["mae"] == pytest.approx(expected)
    assert [f.metrics["model"]["mae"] for f in scored.folds] == [f.metrics["model"]["mae"] for f in folds]
    assert scored.windows == sum(f.windows for f in folds)
    assert len(scored.actual) == scored.windows
    single = evaluate_selection(predictor, prepared, 1)
    assert single.metrics == evaluate(predictor, prepared, "selection").metrics
    assert single.metrics["model"]["mae"] != pytest.approx(scored.metrics["model"]["mae"])


def test_the_folds_retrieval_effect_is_the_mean_of_their_mses_as_every_metric():
    """Each MSE the unweighted mean over folds (a fold of 10 windows counts as one of 30), the
    windows summed; a fold without one makes none."""
    folds = [RetrievalEffect(mse=1.0, mse_without=2.0, windows=10), RetrievalEffect(4.0, 4.0, 30)]
    assert fold_retrieval(folds) == RetrievalEffect(mse=2.5, mse_without=3.0, windows=40)
    assert fold_retrieval([*folds, None]) is None
