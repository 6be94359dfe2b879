"""Strict loading: every defect gets its own message naming file, column and row/timestamp."""

from pathlib import Path

import pandas as pd
import pytest

from forecaster.config import DataConfig
from forecaster.data.datasets import DATASETS, get_dataset
from forecaster.data.loading import load_series
from forecaster.data.source import load_from_config
from forecaster.errors import DataError


def write(tmp_path: Path, text: str, name: str = "series.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


GOOD = (
    "t,y,x\n2024-01-01 00:00,1.0,5\n2024-01-01 01:00,2.0,6\n2024-01-01 02:00,3.0,7\n2024-01-01 03:00,4.0,8\n"
)


def test_clean_file_loads_with_inferred_frequency(tmp_path):
    series = load_series(write(tmp_path, GOOD), "t", "y", ["x"])
    assert series.frequency == "h"
    assert series.columns == ["y", "x"]
    assert series.frame["y"].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert len(series.sha256) == 64


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("2024-01-01 02:00", "not-a-date"), ["column 't'", "row 3", "not-a-date"]),
        (GOOD.replace("3.0", "abc"), ["column 'y'", "row 3", "'abc' is not a number"]),
        (GOOD.replace("02:00", "01:00"), ["duplicate timestamp 2024-01-01 01:00:00", "row 2"]),
        (
            "t,y\n2024-01-01 00:00,1\n2024-01-01 02:00,2\n2024-01-01 01:00,3\n2024-01-01 03:00,4\n",
            ["row 3", "comes before", "sort"],
        ),
        (GOOD.replace("3.0", ""), ["column 'y'", "NaN", "2024-01-01 02:00:00"]),
        (
            "t,y\n2024-01-01 00:00,1\n2024-01-01 01:00,2\n2024-01-01 02:00,2\n"
            "2024-01-01 05:00,3\n2024-01-01 06:00,3\n",
            ["2 missing 'h' step(s)", "2024-01-01 03:00:00", "fill policy"],
        ),
    ],
    ids=["timestamp", "non-numeric", "duplicate", "unsorted", "nan", "gap"],
)
def test_each_defect_is_named(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(DataError) as error:
        load_series(path, "t", "y")
    message = str(error.value)
    assert str(path) in message
    for fragment in expected:
        assert fragment in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("3.0", "inf"), ["column 'y'", "row 3", "'inf' is not a finite number"]),
        (GOOD.replace("3.0", "-Infinity"), ["column 'y'", "row 3", "'-Infinity' is not a finite number"]),
        (GOOD.replace(",7", ",1e39"), ["column 'x'", "row 3", "float32's range"]),
        (GOOD.replace("2.0", "inf").replace("4.0", "inf"), ["row 2", "2 such value(s)"]),
    ],
    ids=["inf", "minus-infinity", "beyond-float32", "counted"],
)
def test_a_number_no_network_can_take_is_named(tmp_path, text, expected):
    """A value that parses but is infinite, or that float32 (what the networks compute in) turns
    into infinity, would train a model whose every figure is NaN: refused, like a non-number."""
    path = write(tmp_path, text)
    with pytest.raises(DataError) as error:
        load_series(path, "t", "y", ["x"])
    message = str(error.value)
    assert str(path) in message
    for fragment in expected:
        assert fragment in message


def test_missing_file_and_missing_column(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_series(tmp_path / "nope.csv", "t", "y")
    with pytest.raises(DataError, match=r"\['z'\] not found; available columns: t, y, x"):
        load_series(write(tmp_path, GOOD), "t", "y", ["z"])


def test_policies_repair_and_report(tmp_path):
    text = (
        "t,y\n2024-01-01 00:00,1\n2024-01-01 01:00,3\n2024-01-01 01:00,5\n"
        "2024-01-01 03:00,8\n2024-01-01 04:00,\n2024-01-01 05:00,9\n"
    )
    series = load_series(write(tmp_path, text), "t", "y", fill="interpolate", duplicates="mean")
    assert series.frame["y"].tolist() == [1.0, 4.0, 6.0, 8.0, 8.5, 9.0]
    assert any("duplicated" in r for r in series.repairs)
    assert any("missing step" in r for r in series.repairs)
    first = load_series(write(tmp_path, text), "t", "y", fill="ffill", duplicates="first")
    assert first.frame["y"].tolist() == [1.0, 3.0, 3.0, 8.0, 8.0, 9.0]


def test_parquet_is_read(tmp_path):
    frame = pd.DataFrame({"t": pd.date_range("2024-01-01", periods=5, freq="D"), "y": [1.0, 2, 3, 4, 5]})
    path = tmp_path / "s.parquet"
    frame.to_parquet(path)
    assert load_series(path, "t", "y").frequency == "D"


def test_sea_temp_strict_load_names_its_real_defects():
    spec = get_dataset("sea-temp")
    with pytest.raises(DataError, match="duplicate timestamp 2017-03-21 16:30:00"):
        load_series(spec.path, spec.time_column, spec.target)
    with pytest.raises(DataError, match="24 missing '30min' step.*2016-06-14 13:30:00"):
        load_series(spec.path, spec.time_column, spec.target, duplicates="mean")


def test_trading_days_with_holidays_are_not_gaps():
    spec = get_dataset("ibm")
    series = load_series(spec.path, spec.time_column, spec.target, spec.covariates)
    assert series.frequency == "B"
    assert len(series.frame) == 3270
    assert series.columns == ["Close", "Open", "High", "Low", "Volume"]


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_bundled_dataset_loads_with_its_policies(name):
    spec = DATASETS[name]
    if spec.id_column is not None:  # long format: several series
        config = DataConfig(dataset=name, covariates=list(spec.covariates), id_column=spec.id_column)
        members = list(load_from_config(config).members.values())
    else:
        members = [
            load_series(
                spec.path,
                spec.time_column,
                spec.target,
                spec.covariates,
                spec.frequency,
                spec.fill,
                spec.duplicates,
            )
        ]
    for series in members:
        assert not series.frame.isna().any().any()
        assert series.frame.index.is_monotonic_increasing and series.frame.index.is_unique


def test_unknown_dataset_lists_known_ones():
    with pytest.raises(DataError, match="unknown dataset 'nope'.*etth1"):
        get_dataset("nope")


@pytest.mark.parametrize("rows", [0, 1, 2])
def test_a_file_too_short_to_give_its_time_step_is_named(tmp_path, rows):
    lines = ["t,y", *(f"2024-01-0{day + 1},{day}.0" for day in range(rows))]
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(DataError, match=rf"{rows} row\(s\) of data; at least 3 timestamps"):
        load_series(path, "t", "y")
    if rows:  # a given step needs no inference
        assert len(load_series(path, "t", "y", frequency="D").frame) == rows


def test_data_for_a_model_at_another_frequency_names_the_file_column_and_both(tmp_path):
    """Hourly readings given to a daily model would be read, and forecast, as days."""
    with pytest.raises(DataError) as refused:
        load_series(write(tmp_path, GOOD), "t", "y", ["x"], model_frequency="D")
    assert str(refused.value) == (
        f"{tmp_path / 'series.csv'}: column 't': the data is hourly (h), but this model's data is "
        "daily (D); give data at the model's frequency, or train a model on this data"
    )


def test_data_for_a_model_is_read_at_its_frequency_with_its_fill_policy(tmp_path):
    path = write(tmp_path, "t,y\n2024-01-01,1\n2024-01-02,2\n2024-01-04,4\n2024-01-05,5\n")
    series = load_series(path, "t", "y", fill="interpolate", model_frequency="D")
    assert series.frequency == "D" and series.frame["y"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(DataError, match=r"1 missing 'D' step\(s\), first at 2024-01-03.*without a fill"):
        load_series(path, "t", "y", model_frequency="D")  # a model trained without one: not 'choose'


def test_weekdays_for_a_model_whose_config_set_daily_are_read_as_in_training(tmp_path):
    """A model trained with data.frequency=D on weekdays only read its file upsampled to days by
    its fill policy: the same file, given again, is read so; a model that inferred daily refuses
    it (the file is business days), and hourly stamps stay off a daily grid either way."""
    times = pd.bdate_range("2024-01-01", periods=12)  # Mon 1st to Tue 16th: two weekends
    path = write(tmp_path, "t,y\n" + "".join(f"{t:%Y-%m-%d},{k}\n" for k, t in enumerate(times)))
    series = load_series(
        path, "t", "y", frequency="D", fill="interpolate", model_frequency="D", model_frequency_given=True
    )
    assert series.frequency == "D" and len(series.frame) == 16
    assert series.frame.loc["2024-01-06", "y"] == pytest.approx(4 + 1 / 3)  # Fri 4, Mon 5
    with pytest.raises(DataError, match=r"the data is business days \(B\), but this model's data is daily"):
        load_series(path, "t", "y", fill="interpolate", model_frequency="D")
    hourly = write(tmp_path, GOOD, "hourly.csv")
    with pytest.raises(
        DataError, match=r"hourly \(h\), but .* daily \(D\) \(2024-01-01 01:00:00 is off its grid\)"
    ):
        load_series(hourly, "t", "y", fill="interpolate", model_frequency="D", model_frequency_given=True)
