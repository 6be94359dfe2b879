"""Many series in one model: long-format loading (errors name the series and the file's row),
one set of cut-off dates for all, per-series scaling, windows across all series, and forecasts
that depend on each window alone (a series never seen in training included)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.config import ForecastConfig
from forecaster.data.datamodule import prepare
from forecaster.data.panel import load_panel
from forecaster.data.source import load_from_config
from forecaster.errors import ConfigError, DataError
from forecaster.evaluation import evaluate
from forecaster.predictor import Predictor
from forecaster.training import train_model

LONG = (
    "id,t,y\n"
    "a,2024-01-01,1\na,2024-01-02,2\na,2024-01-03,3\na,2024-01-04,4\n"
    "b,2024-01-02,10\nb,2024-01-03,20\nb,2024-01-04,x\nb,2024-01-05,40\n"
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "long.csv"
    path.write_text(text)
    return path


def long_frame(lengths: dict[str, tuple[str, int]], seed: int = 0) -> pd.DataFrame:
    """Sine waves of different levels and scales, one per id, from its own start date."""
    rng = np.random.default_rng(seed)
    frames = []
    for k, (key, (start, length)) in enumerate(lengths.items()):
        steps = np.arange(length)
        level, scale = 10.0 ** (k + 1), 2.0 ** (k + 1)
        y = level + scale * np.sin(2 * np.pi * steps / 12) + rng.normal(0, 0.05 * scale, length)
        frames.append(pd.DataFrame({"id": key, "t": pd.date_range(start, periods=length, freq="D"), "y": y}))
    return pd.concat(frames)


def config(path: Path, **data) -> ForecastConfig:
    return ForecastConfig.model_validate(
        {
            "data": {"path": str(path), "time_column": "t", "target": "y", "id_column": "id", **data},
            "window": {"lookback": 24, "horizon": 6},
            "model": {
                "cell": "gru",
                "hidden_size": 16,
                "layers": 1,
                "dropout": 0.0,
                "level_norm": "standard",
            },
            "train": {"epochs": 2, "progress_bar": False, "batch_size": 64},
        }
    )


def test_a_bad_value_names_the_series_and_the_file_row(tmp_path):
    with pytest.raises(DataError, match=r"long.csv \(series 'b'\): column 'y', row 7: 'x' is not a number"):
        load_panel(write(tmp_path, LONG), "id", "t", "y", frequency="D")


def test_a_duplicate_within_one_series_names_it_but_ids_may_share_dates(tmp_path):
    text = LONG.replace("b,2024-01-04,x", "b,2024-01-04,30") + "a,2024-01-04,5\n"
    with pytest.raises(
        DataError, match=r"\(series 'a'\): column 't': duplicate timestamp 2024-01-04.*row 4, row 9"
    ):
        load_panel(write(tmp_path, text), "id", "t", "y", frequency="D")
    panel = load_panel(write(tmp_path, text.rsplit("a,2024-01-04,5", 1)[0]), "id", "t", "y")
    assert list(panel.members) == ["a", "b"] and panel.frequency == "D"
    assert panel.members["b"].frame.index[0] == pd.Timestamp("2024-01-02")  # its own start


def test_series_at_another_frequency_than_the_models_are_left_out_and_named(tmp_path):
    """A business-day model: the series on business days is read (its holiday no gap); one every
    fifth business day, one hourly and one weekly are named, not forecast on business days."""
    frames = {
        "bdays": pd.bdate_range("2024-01-01", periods=40).delete(10),
        "fifth": pd.bdate_range("2024-01-01", periods=200)[::5],
        "hourly": pd.date_range("2024-01-01", periods=100, freq="h"),
        "weekly": pd.date_range("2024-01-01", periods=40, freq="W-MON"),
    }
    rows = [f"{key},{t},{k}" for key, times in frames.items() for k, t in enumerate(times)]
    path = write(tmp_path, "id,t,y\n" + "\n".join(rows) + "\n")
    panel = load_panel(path, "id", "t", "y", skip_bad_series=True, model_frequency="B")
    assert list(panel.members) == ["bdays"] and panel.frequency == "B"
    assert panel.skipped == {
        key: f"{path} (series {key!r}): column 't': the data is {data}, but this model's data is "
        "business days (B); give data at the model's frequency, or train a model on this data"
        for key, data in {"fifth": "weekly (7D)", "hourly": "hourly (h)", "weekly": "weekly (7D)"}.items()
    }


def test_an_empty_id_and_a_missing_id_column_are_named(tmp_path):
    with pytest.raises(DataError, match=r"column 'id', row 2: the series id is empty"):
        load_panel(write(tmp_path, LONG.replace("a,2024-01-02", ",2024-01-02")), "id", "t", "y")
    with pytest.raises(DataError, match=r"column\(s\) \['ticker'\] not found"):
        load_panel(write(tmp_path, LONG), "ticker", "t", "y")


def test_the_bundled_panel_needs_its_id_column():
    base = {"data": {"dataset": "stocks"}}
    with pytest.raises(DataError, match="set data.id_column: Ticker"):
        load_from_config(ForecastConfig.model_validate(base).data)
    # a panel's default level_norm is the one it needs (the config's, issue 42); another is refused
    default = ForecastConfig.model_validate({"data": {"dataset": "stocks", "id_column": "Ticker"}})
    assert default.model.level_norm == "standard"
    with pytest.raises(ValueError, match="level_norm: a panel .* needs `standard`"):
        ForecastConfig.model_validate(
            {"data": {"dataset": "stocks", "id_column": "Ticker"}, "model": {"level_norm": "last"}}
        )
    panel = load_from_config(
        ForecastConfig.model_validate(
            {"data": {"dataset": "stocks", "id_column": "Ticker"}, "model": {"level_norm": "standard"}}
        ).data
    )
    assert {key: len(m.frame) for key, m in panel.members.items()} == {
        "AAPL": 3270,
        "GOOG": 2148,
        "IBM": 3270,
    }


def test_every_series_is_split_at_the_same_dates_and_scaled_on_its_own_training_rows(tmp_path):
    frame = long_frame({"a": ("2020-01-01", 400), "b": ("2020-03-01", 300), "c": ("2020-02-01", 350)})
    path = tmp_path / "long.csv"
    frame.to_csv(path, index=False)
    cfg = config(path)
    prepared = prepare(load_from_config(cfg.data), cfg)
    cut = prepared.cut_offs
    for key, part in prepared.members.items():
        index = part.series.frame.index
        assert index[part.borders.train_end] == index[index >= cut.val_start][0], key
        assert index[part.borders.val_end] == index[index >= cut.test_start][0], key
        assert index[part.borders.train_end - 1] < cut.val_start <= index[part.borders.train_end]
        train = part.series.frame["y"].to_numpy()[: part.borders.train_end]
        assert part.scaler.mean[0] == pytest.approx(train.mean())
        assert part.scaler.std[0] == pytest.approx(train.std())
    sizes = [len(part.windows("train")) for part in prepared.parts]
    assert len(prepared.dataset("train")) == sum(sizes)  # windows drawn across all series


def test_a_series_without_rows_in_a_split_is_named(tmp_path):
    frame = long_frame({"a": ("2020-01-01", 400), "late": ("2020-12-01", 40)})
    path = tmp_path / "long.csv"
    frame.to_csv(path, index=False)
    cfg = config(path)
    with pytest.raises(ConfigError, match=r"series 'late'.*train rows 0"):
        prepare(load_from_config(cfg.data), cfg)


def test_a_panel_model_forecasts_any_series_from_its_own_window(tmp_path):
    frame = long_frame({"a": ("2020-01-01", 400), "b": ("2020-02-01", 360)})
    path = tmp_path / "long.csv"
    frame.to_csv(path, index=False)
    cfg = config(path)
    prepared = prepare(load_from_config(cfg.data), cfg)
    predictor = train_model(cfg, prepared).predictor
    windows = prepared.members["b"].windows("test")
    past = windows.past()[:, :, 0]  # (N, L)
    own = predictor.predict(past).mean
    stored = predictor.predict(past, series_ids=["b"] * len(past)).mean  # b's training scaler
    np.testing.assert_allclose(own, stored, rtol=1e-4, atol=1e-4 * np.abs(past).max())
    # a series it never saw, at another level and scale: the same forecast, in its own units
    unseen = predictor.predict(1000.0 * past - 7.0).mean
    np.testing.assert_allclose(unseen, 1000.0 * own - 7.0, rtol=1e-4, atol=1e-3 * np.abs(1000 * past).max())
    # a stuck sensor: a window flat over its last season has the calmest calibration window's
    # interval, over b's stored scale for b, over the window's whole look-back volatility for a
    # series it never saw, not a 1e-6 sliver
    flat = 1000.0 * past[:1].copy() - 7.0
    flat[0, -13:] = flat[0, -13]  # the last 12 changes (one season of the daily sine) are 0
    for ids, floor in (
        (["b"], predictor.volatility_floor * predictor.series_scalers["b"].std[0]),
        (None, predictor.unseen_volatility_floor * np.abs(np.diff(flat[0])).mean()),
    ):
        bounds = predictor.predict(flat, series_ids=ids).quantiles
        np.testing.assert_allclose(
            (bounds[0.9] - bounds[0.1])[0] / 2, predictor.conformal[0.8] * floor, rtol=1e-4
        )
        assert floor > 1e-3
    result = evaluate(predictor, prepared, "test")
    assert set(result.per_series) == {"a", "b"}
    assert result.windows == sum(r.windows for r in result.per_series.values())
    mases = [r.metrics["model"]["mase"] for r in result.per_series.values()]
    assert result.metrics["model"]["mase"] == pytest.approx(np.mean(mases))
    assert result.metrics["model"]["mase_median"] == pytest.approx(np.median(mases))
    assert result.metrics["model"]["mase"] < result.metrics["naive"]["mase"]  # a sine is learnable


def test_a_series_embedding_is_learned_for_seen_ids_and_unknown_ones_still_forecast(tmp_path):
    frame = long_frame({"a": ("2020-01-01", 400), "b": ("2020-02-01", 360)})
    path = tmp_path / "long.csv"
    frame.to_csv(path, index=False)
    cfg = config(path)
    cfg.model.series_embedding = 4
    prepared = prepare(load_from_config(cfg.data), cfg)
    assert prepared.dataset("train")[0]["series"] == 0 and prepared.dataset("train")[-1]["series"] == 1
    predictor = train_model(cfg, prepared).predictor
    past = prepared.members["b"].windows("test").past()[:, :, 0]
    as_b = predictor.predict(past, series_ids=["b"] * len(past)).mean
    as_a = predictor.predict(past, series_ids=["a"] * len(past)).mean
    unknown = predictor.predict(past).mean  # no id (as the service sends): the learned "unknown" row
    assert not np.allclose(as_b, as_a) and not np.allclose(as_b, unknown)
    assert np.isfinite(unknown).all()
    np.testing.assert_allclose(predictor.predict(past, series_ids=["zz"] * len(past)).mean, unknown)
    reloaded = Predictor.load(predictor.save(tmp_path / "saved"))
    np.testing.assert_allclose(reloaded.predict(past, series_ids=["b"] * len(past)).mean, as_b, rtol=1e-6)
    result = evaluate(predictor, prepared, "test")  # each member scored as itself
    np.testing.assert_allclose(result.per_series["b"].forecasts["model"], as_b)
    with pytest.raises(ValueError, match="series_embedding: panels only"):
        ForecastConfig.model_validate({"data": {"dataset": "ibm"}, "model": {"series_embedding": 4}})


def test_a_batch_of_windows_is_gathered_as_the_windows_one_at_a_time(tmp_path):
    """Training gathers a batch in one indexing operation across series: it must hold exactly the
    windows (past with its calendar, future, target, series) that indexing them one by one gives."""
    frame = long_frame({"a": ("2020-01-01", 200), "b": ("2020-01-20", 181), "c": ("2020-01-05", 196)})
    path = tmp_path / "long.csv"
    frame.to_csv(path, index=False)
    cfg = ForecastConfig.model_validate({**config(path).model_dump(), "data": {
        **config(path).data.model_dump(), "calendar_features": True}})  # fmt: skip
    prepared = prepare(load_from_config(cfg.data), cfg)
    dataset = prepared.dataset("train")
    picks = [0, len(dataset) - 1, 7, 60, 61, 150]
    batch = dataset.__getitems__(picks)
    for row, i in enumerate(picks):
        one = dataset[i]
        for key, value in one.items():
            np.testing.assert_array_equal(batch[key][row].numpy(), value.numpy(), err_msg=key)
    # and each window is its own series' scaled rows
    part = prepared.parts[1]
    windows = part.windows("train", scaled=True)
    first_of_b = len(prepared.parts[0].windows("train"))
    np.testing.assert_allclose(dataset[first_of_b]["target"].numpy(), windows.target()[0], rtol=1e-6)
    assert int(dataset[first_of_b]["series"]) == 1


def test_a_panel_is_evaluated_the_same_whatever_its_batches(tmp_path):
    frame = long_frame({"a": ("2020-01-01", 200), "b": ("2020-02-01", 160), "c": ("2020-01-10", 190)})
    path = tmp_path / "long.csv"
    frame.to_csv(path, index=False)
    cfg = config(path)
    prepared = prepare(load_from_config(cfg.data), cfg)
    predictor = train_model(cfg, prepared).predictor
    from forecaster.evaluation import evaluate_panel

    one_call = evaluate_panel(predictor, prepared, "test", windows_per_call=10**6)
    small = evaluate_panel(predictor, prepared, "test", windows_per_call=5)
    for key in prepared.members:
        for name, figures in one_call.per_series[key].metrics.items():
            assert small.per_series[key].metrics[name] == pytest.approx(figures, rel=1e-6), (key, name)
    np.testing.assert_allclose(small.forecasts["model"], one_call.forecasts["model"], rtol=1e-6)


def test_loading_may_leave_out_the_series_that_break_a_rule_and_name_them(tmp_path):
    text = LONG + "c,2024-01-01,1\nc,2024-01-03,3\n"  # b: not a number; c: a missing day
    panel = load_panel(write(tmp_path, text), "id", "t", "y", frequency="D", skip_bad_series=True)
    assert list(panel.members) == ["a"]
    assert "column 'y', row 7: 'x' is not a number" in panel.skipped["b"]
    assert "1 missing 'D' step(s)" in panel.skipped["c"]
    with pytest.raises(DataError, match="series 'b'"):
        load_panel(write(tmp_path, text), "id", "t", "y", frequency="D")


def test_a_model_whose_config_set_its_frequency_takes_each_series_on_its_grid(tmp_path):
    """A model trained with data.frequency=h: a 2-hourly series is upsampled by its fill policy,
    as its training data was; a half-hourly one is off the hourly grid, left out and named."""
    frames = {
        "every2h": pd.date_range("2024-01-01", periods=30, freq="2h"),
        "halfhourly": pd.date_range("2024-01-01", periods=30, freq="30min"),
    }
    rows = [f"{key},{t},{k}" for key, times in frames.items() for k, t in enumerate(times)]
    path = write(tmp_path, "id,t,y\n" + "\n".join(rows) + "\n")
    panel = load_panel(
        path, "id", "t", "y", frequency="h", fill="interpolate", skip_bad_series=True, model_frequency="h",
        model_frequency_given=True,
    )  # fmt: skip
    assert list(panel.members) == ["every2h"] and len(panel.members["every2h"].frame) == 59
    assert panel.skipped["halfhourly"].endswith(
        "(2024-01-01 00:30:00 is off its grid); give data at the model's frequency, or train a model on this data"
    )
