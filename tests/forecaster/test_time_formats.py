"""One format for a whole time column: a value's own guess never reads one row month first and
the next day first, and a column that reads both ways is refused until data.time_format says."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from forecaster.config import DataConfig
from forecaster.data.loading import load_series
from forecaster.data.source import load_from_config
from forecaster.errors import DataError


def write(tmp_path: Path, stamps: list[str]) -> Path:
    path = tmp_path / "series.csv"
    path.write_text("t,y\n" + "".join(f"{stamp},{i}.0\n" for i, stamp in enumerate(stamps)))
    return path


def days(start: str, count: int, fmt: str) -> list[str]:
    return [d.strftime(fmt) for d in pd.date_range(start, periods=count, freq="D")]


def test_a_day_first_column_is_read_day_first_throughout(tmp_path):
    """The first values read both ways (01/02 ... 12/02); the 13th only day first: the whole column
    is read day first, not its first 12 rows month first."""
    path = write(tmp_path, days("2012-02-01", 20, "%d/%m/%Y"))
    series = load_series(path, "t", "y")
    assert series.frequency == "D"
    assert series.frame.index[0] == pd.Timestamp("2012-02-01")
    assert series.frame.index[-1] == pd.Timestamp("2012-02-20")


def test_a_month_first_column_is_read_month_first_throughout(tmp_path):
    path = write(tmp_path, days("2012-01-02", 20, "%m/%d/%Y"))
    series = load_series(path, "t", "y")
    assert series.frame.index[0] == pd.Timestamp("2012-01-02") and series.frequency == "D"


def test_a_column_that_reads_both_ways_is_refused_until_the_format_is_given(tmp_path):
    """Monthly, day first: every value reads month first too (as days of January), which
    ``format="mixed"`` took, and a fill policy then filled thousands of invented days."""
    stamps = [d.strftime("%d/%m/%Y") for d in pd.date_range("2000-01-01", periods=12, freq="MS")]
    path = write(tmp_path, stamps)
    with pytest.raises(DataError) as error:
        load_series(path, "t", "y", fill="interpolate")
    message = str(error.value)
    for fragment in (str(path), "column 't'", "'01/02/2000'", "%m/%d/%Y", "%d/%m/%Y", "data.time_format"):
        assert fragment in message
    config = DataConfig(path=str(path), time_column="t", target="y", time_format="%d/%m/%Y")
    series = load_from_config(config)
    assert series.frequency == "MS" and series.frame.index[1] == pd.Timestamp("2000-02-01")


def test_iso_dates_are_never_read_day_first(tmp_path):
    path = write(tmp_path, days("2024-01-02", 5, "%Y-%m-%d"))
    assert load_series(path, "t", "y").frame.index[0] == pd.Timestamp("2024-01-02")


def test_a_value_in_another_format_is_named_not_guessed(tmp_path):
    stamps = days("2024-01-01", 6, "%Y-%m-%d")
    stamps[4] = "01/05/2024"
    with pytest.raises(DataError, match=r"column 't', row 5: cannot parse timestamp '01/05/2024'"):
        load_series(write(tmp_path, stamps), "t", "y")


def test_a_given_format_that_does_not_fit_names_the_row_and_the_setting(tmp_path):
    path = write(tmp_path, days("2024-01-01", 6, "%d.%m.%Y"))
    with pytest.raises(DataError, match=r"row 1: cannot parse timestamp '01.01.2024' with data.time_format"):
        load_series(path, "t", "y", time_format="%d/%m/%Y")


def test_a_year_first_file_is_read_as_such_by_a_model_keeping_a_day_month_order(tmp_path):
    """The order a model keeps is about day and month; a file that starts with a year has none."""
    path = write(tmp_path, days("2024-01-01", 6, "%Y-%m-%d"))
    assert load_series(path, "t", "y", time_format="%d/%m/%Y").frame.index[1] == pd.Timestamp("2024-01-02")


@pytest.mark.parametrize(
    "stamps",
    [
        ["2024-01-01 00:00:00 UTC", "2024-01-01 01:00:00 UTC", "2024-01-01 02:00:00 UTC"],  # BigQuery
        ["2024/01/02", "2024/01/03", "2024/01/04"],
        ["2024.01.02", "2024.01.03", "2024.01.04"],
    ],
    ids=["utc-suffix", "slashes", "dots"],
)
def test_a_year_first_column_is_never_read_day_first_nor_refused(tmp_path, stamps):
    times = load_series(write(tmp_path, stamps), "t", "y").frame.index
    assert times[0].month == 1 and times[1] - times[0] in (pd.Timedelta(hours=1), pd.Timedelta(days=1))


def test_a_row_a_spreadsheet_shortened_is_read_in_the_columns_order(tmp_path):
    """Excel drops "00:00": the midnight row is read with the date part of the column's format."""
    stamps = ["13/02/2024 22:00", "13/02/2024 23:00", "14/02/2024", "14/02/2024 01:00"]
    times = load_series(write(tmp_path, stamps), "t", "y").frame.index
    assert list(times) == list(pd.date_range("2024-02-13 22:00", periods=4, freq="h"))


def test_an_unreadable_row_elsewhere_does_not_let_an_ambiguous_column_through(tmp_path):
    """Both orders miss the same row ('oops'): the rows both read still differ, so it is refused,
    not read month first (a panel skipping bad series would have loaded the rest as months)."""
    stamps = [f"{day:02d}/01/2024" for day in range(1, 11)] + ["oops"]
    with pytest.raises(DataError, match="read both month first"):
        load_series(write(tmp_path, stamps), "t", "y")


def test_a_model_keeps_the_day_month_order_its_training_file_was_read_in(tmp_path):
    """A later file of ten early-January days reads both ways: the order kept with the model (the
    training file had a 13th) reads it, where detection alone would refuse it."""
    from forecaster.config import ForecastConfig
    from forecaster.training import with_time_format_read

    trained_on = load_series(write(tmp_path, days("2012-02-01", 20, "%d/%m/%Y")), "t", "y")
    assert trained_on.time_format == "%d/%m/%Y"
    config = ForecastConfig.model_validate({"data": {"path": "x.csv", "time_column": "t", "target": "y"}})
    kept = with_time_format_read(config, trained_on.time_format).data.time_format
    later = tmp_path / "later"
    later.mkdir()
    path = write(later, days("2024-01-01", 10, "%d/%m/%Y"))
    with pytest.raises(DataError, match="read both"):
        load_series(path, "t", "y")
    assert load_series(path, "t", "y", time_format=kept).frame.index[1] == pd.Timestamp("2024-01-02")


def test_a_format_pandas_cannot_read_is_a_config_error_naming_it():
    from forecaster.config import DataConfig

    with pytest.raises(ValueError, match="'%Q' is not a date format"):
        DataConfig(path="x.csv", time_column="t", target="y", time_format="%Q")


def test_two_digit_years_are_read_in_one_order(tmp_path):
    """pandas' guess has no two-digit years, so a per-value parser read '01/01/24' ... '10/01/24'
    month first (ten months of 2025, as it happened) without a word."""
    stamps = days("2024-01-01", 10, "%d/%m/%y") + ["13/01/24"]
    series = load_series(write(tmp_path, stamps), "t", "y", frequency="D", fill="interpolate")
    assert series.frame.index[1] == pd.Timestamp("2024-01-02") and series.time_format == "%d/%m/%y"


def test_a_first_row_at_midnight_without_its_time_takes_the_others_times(tmp_path):
    stamps = ["13/01/2024", *(f"13/01/2024 {hour:02d}:00" for hour in range(1, 24)), "14/01/2024"]
    times = load_series(write(tmp_path, stamps), "t", "y").frame.index
    assert list(times) == list(pd.date_range("2024-01-13", periods=25, freq="h"))


def test_twelve_hour_times_in_lower_case_are_read_as_such(tmp_path):
    stamps = [f"13/01/2024 {h % 12 or 12:02d}:00 {'am' if h < 12 else 'pm'}" for h in range(24)]
    times = load_series(write(tmp_path, stamps), "t", "y").frame.index
    assert list(times) == list(pd.date_range("2024-01-13", periods=24, freq="h"))


def test_a_typo_in_a_column_that_reads_both_ways_is_named_not_obeyed(tmp_path):
    """Month first, monthly: one cell typed '13/01/2020' parses only day first; read day first the
    file would be out of time order, so the column stays month first and the typo is named."""
    stamps = [f"{month:02d}/01/2020" for month in range(1, 13)]
    stamps[5] = "13/01/2020"
    with pytest.raises(DataError, match=r"row 6: cannot parse timestamp '13/01/2020'"):
        load_series(write(tmp_path, stamps), "t", "y")


def test_daily_stamps_with_a_zone_off_the_utc_grid_point_to_data_timezone():
    """Local midnights across a DST change are an hour apart in UTC (the clock zone-aware stamps
    are read on): the error says so and names the setting that reads them as local dates."""
    frame = pd.DataFrame(
        {"t": pd.date_range("2023-03-01", periods=30, freq="D", tz="America/New_York"), "y": range(30)}
    )
    with pytest.raises(DataError, match="off the 'D' grid.*read in UTC.*data.timezone"):
        load_series("frame", "t", "y", table=frame)
    series = load_series("frame", "t", "y", table=frame, timezone="America/New_York")
    assert series.frequency == "D" and series.frame.index[-1] == pd.Timestamp("2023-03-30")


def test_a_cell_shown_in_an_error_is_written_as_the_frame_has_it():
    """Unix seconds are not timestamps here: named as the number they are, not numpy's repr."""
    frame = pd.DataFrame({"t": [1700000000, 1700003600, 1700007200], "y": [1.0, 2.0, 3.0]})
    with pytest.raises(DataError) as error:
        load_series("frame", "t", "y", table=frame)
    assert "row 1: cannot parse timestamp 1700000000 " in str(error.value)


def test_a_t_separated_format_with_a_blank_row_names_the_row(tmp_path):
    """The variants of a "T" format split its date at the T: no format pandas cannot compile."""
    stamps = [f"13-02-2024T{hour:02d}:00" for hour in range(3)] + [""]
    with pytest.raises(DataError, match=r"row 4: cannot parse timestamp ''"):
        load_series(write(tmp_path, stamps), "t", "y")


def test_twelve_hour_rows_shortened_by_a_spreadsheet_are_read_in_the_columns_order(tmp_path):
    stamps = ["13/02/24", "13/02/24 1:00 AM", "13/02/24 2:00:00 AM", "13/02/24 3:00 AM"]
    times = load_series(write(tmp_path, stamps), "t", "y").frame.index
    assert list(times) == list(pd.date_range("2024-02-13", periods=4, freq="h"))


def test_a_panels_dates_are_in_order_within_each_series_not_down_the_file(tmp_path):
    """Long format: each series starts its dates again. Read month first, both series are in order
    too, so the file reads both ways and is refused, not read month first."""
    from forecaster.data.panel import load_panel

    path = tmp_path / "long.csv"
    rows = [("a", "01/02/2024"), ("a", "02/02/2024"), ("a", "03/02/2024")]
    rows += [("b", "04/01/2024"), ("b", "05/01/2024"), ("b", "06/01/2024")]
    path.write_text("id,t,y\n" + "".join(f"{key},{stamp},1.0\n" for key, stamp in rows))
    with pytest.raises(DataError, match="read both month first"):
        load_panel(path, "id", "t", "y", frequency="D")
    panel = load_panel(path, "id", "t", "y", frequency="D", time_format="%d/%m/%Y")
    assert panel.members["b"].frame.index[0] == pd.Timestamp("2024-01-04")
