"""The clock timestamps are read on (forecaster/data/clock.py) travels with the model, and every
later timestamp, a file's, a request's or the pyfunc's, is read on it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from forecaster.config import ForecastConfig
from forecaster.data.clock import LOCAL, UTC_CLOCK, instants_on_clock, parse_on_clock, stamp_on_clock
from forecaster.data.datamodule import prepare
from forecaster.data.source import load_from_config
from forecaster.errors import DataError
from forecaster.predictor import Predictor
from pipelines.evaluate import data_config_for
from tests.forecaster.test_model_inputs import config_for, hourly_file, untrained_predictor


def test_the_training_clock_is_stored_with_the_model(tmp_path):
    naive = config_for(hourly_file(tmp_path), {"cell": "gru"})
    zoned_file = hourly_file(tmp_path, zone="Europe/Berlin")
    as_utc = config_for(zoned_file, {"cell": "gru"})
    berlin = config_for(zoned_file, {"cell": "gru"}, timezone="Europe/Berlin")
    clocks = {}
    for label, config in {"naive": naive, "utc": as_utc, "berlin": berlin}.items():
        prepared = prepare(load_from_config(config.data), config)
        saved = untrained_predictor(config, prepared).save(tmp_path / label)
        clocks[label] = (Predictor.load(saved).clock, prepared.series.frame.index[0])
    assert clocks["naive"] == (LOCAL, pd.Timestamp("2021-05-01 00:00"))
    assert clocks["utc"] == (UTC_CLOCK, pd.Timestamp("2021-04-30 22:00"))  # Berlin is UTC+2 in May
    assert clocks["berlin"] == ("Europe/Berlin", pd.Timestamp("2021-05-01 00:00"))


def test_files_given_to_a_model_are_read_on_its_clock(tmp_path):
    """`forecast predict`, `evaluate` and `retrain` read through data_config_for: a zoned file for
    a local model gives its wall times as written, for a Berlin model Berlin's wall times."""
    zoned = hourly_file(tmp_path, zone="Europe/Berlin")
    local_config = config_for(hourly_file(tmp_path), {"cell": "gru"})
    local = untrained_predictor(local_config, prepare(load_from_config(local_config.data), local_config))
    berlin_config = config_for(zoned, {"cell": "gru"}, timezone="Europe/Berlin")
    berlin = untrained_predictor(berlin_config, prepare(load_from_config(berlin_config.data), berlin_config))
    for predictor in (local, berlin):
        loaded = load_from_config(data_config_for(predictor, {"path": str(zoned)}))
        assert loaded.clock == predictor.clock and str(loaded.frame.index[0]) == "2021-05-01 00:00:00"


def test_a_zone_clock_stops_at_the_hour_the_clocks_go_back_naming_it(tmp_path):
    """Wall times repeat 02:00 on 31 October 2021 in Berlin: the load says so instead of merging
    two real hours (README and data.timezone's description say to leave the zone out then)."""
    hours = pd.date_range("2021-10-20", periods=24 * 20, freq="h", tz="UTC").tz_convert("Europe/Berlin")
    path = tmp_path / "autumn.csv"
    pd.DataFrame({"t": hours, "load": np.arange(len(hours), dtype=float)}).to_csv(path, index=False)
    config = ForecastConfig.model_validate(
        {"data": {"path": str(path), "time_column": "t", "target": "load", "timezone": "Europe/Berlin"}}
    )
    with pytest.raises(DataError, match="autumn.csv.*2021-10-31 02:00"):
        load_from_config(config.data)


def test_a_local_clock_keeps_each_stamps_wall_time_as_written():
    text = pd.Series(["2021-05-01T10:00:00+02:00", "2021-05-01T11:00:00Z", "2021-05-01 12:00:00-0500"])
    times, clock, _ = parse_on_clock(text, LOCAL)
    assert clock == LOCAL and [str(t) for t in times] == [f"2021-05-01 {h}:00:00" for h in (10, 11, 12)]
    stamp = datetime(2021, 5, 1, 10, tzinfo=timezone(timedelta(hours=2)))
    assert stamp_on_clock(stamp, LOCAL) == datetime(2021, 5, 1, 10)
    assert stamp_on_clock(stamp, UTC_CLOCK) == datetime(2021, 5, 1, 8)
    assert stamp_on_clock(stamp, "America/New_York") == datetime(2021, 5, 1, 4)


def test_the_pyfuncs_unix_seconds_are_instants_put_on_a_zones_clock():
    instants = np.array([["2021-05-01T08:00"]], dtype="datetime64[ns]")
    assert instants_on_clock(instants, "Europe/Berlin")[0, 0] == np.datetime64("2021-05-01T10:00")
    assert instants_on_clock(instants, UTC_CLOCK)[0, 0] == np.datetime64("2021-05-01T08:00")


def test_an_unknown_zone_is_refused_by_name():
    with pytest.raises(ValueError, match="'Mars/Olympus' is not a time zone"):
        ForecastConfig.model_validate({"data": {"dataset": "melbourne-temp", "timezone": "Mars/Olympus"}})
