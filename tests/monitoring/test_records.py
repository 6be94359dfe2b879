"""A forecast's storage format: one row per series, its steps as binary arrays, read back exactly."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, inspect, select

from monitoring.bulk import insert_many
from monitoring.records import FORECAST_COLUMNS, ForecastRecord, batch_rows, expand_steps, utc_now
from monitoring.schema import forecasts
from tests.monitoring.conftest import record


def write(database, records: list[ForecastRecord], logged_at: datetime | None = None) -> None:
    with database.begin() as connection:
        rows = batch_rows(records, logged_at or utc_now(), database.dialect)
        insert_many(connection, forecasts, FORECAST_COLUMNS, rows)


def test_a_batch_of_mixed_shapes_reads_back_exactly_as_it_was_forecast(database):
    """The writer's two paths (SQLite's executemany, PostgreSQL's binary COPY built by numpy) on
    one batch of two shapes: an hourly two-series request with a 90% interval, then a daily one
    without interval or whole season. Every value, time and NULL comes back where it belongs."""
    hours = np.datetime64("2024-03-01T05:00", "us") + np.arange(3) * np.timedelta64(1, "h")
    days = np.datetime64("1999-12-30T00:00", "us") + np.arange(2) * np.timedelta64(1, "D")
    hourly = ForecastRecord(
        "a" * 32, "champion", "m", "7", "champion", "h", ["north", "south"],
        np.array([np.arange(30.0), np.arange(30.0) * 2]), [hours, hours + np.timedelta64(1, "h")],
        np.array([[1.5, 2.5, 3.5], [-1.0, 0.0, 1e-300]]),
        {0.05: np.full((2, 3), -9.0), 0.95: np.full((2, 3), 9.0)}, [0.9],
    )  # fmt: skip
    daily = ForecastRecord(
        "b" * 32, "challenger", "m", "8", "", "D", ["west"], np.array([[4.0, 6.0, 5.0]]), [days],
        np.array([[7.25, 8.125]]), {}, [],
    )  # fmt: skip
    write(database, [hourly, daily])
    f = forecasts
    with database.connect() as connection:
        heads = connection.execute(
            select(f.c.series_id, f.c.role, f.c.model_version, f.c.origin, f.c.horizon, f.c.level).order_by(
                f.c.id
            )
        ).all()
        logged = connection.execute(select(f).order_by(f.c.id))
        frame = pd.DataFrame(logged.all(), columns=list(logged.keys()))
    columns = ["series_id", "step", "target_time", "forecast", "lower", "upper", "naive", "seasonal_naive"]
    steps = [
        tuple(None if isinstance(v, float) and np.isnan(v) else v for v in row)
        for row in expand_steps(frame)[columns].astype(object).itertuples(index=False)
    ]
    at = datetime.fromisoformat
    assert [tuple(row) for row in heads] == [
        ("north", "champion", "7", at("2024-03-01 04:00"), 3, 0.9),
        ("south", "champion", "7", at("2024-03-01 05:00"), 3, 0.9),
        ("west", "challenger", "8", at("1999-12-29 00:00"), 2, None),
    ]
    assert [tuple(row) for row in steps] == [
        ("north", 1, at("2024-03-01 05:00"), 1.5, -9.0, 9.0, 29.0, 6.0),
        ("north", 2, at("2024-03-01 06:00"), 2.5, -9.0, 9.0, 29.0, 7.0),
        ("north", 3, at("2024-03-01 07:00"), 3.5, -9.0, 9.0, 29.0, 8.0),
        ("south", 1, at("2024-03-01 06:00"), -1.0, -9.0, 9.0, 58.0, 12.0),
        ("south", 2, at("2024-03-01 07:00"), 0.0, -9.0, 9.0, 58.0, 14.0),
        ("south", 3, at("2024-03-01 08:00"), 1e-300, -9.0, 9.0, 58.0, 16.0),
        ("west", 1, at("1999-12-30 00:00"), 7.25, None, None, 5.0, None),
        ("west", 2, at("1999-12-31 00:00"), 8.125, None, None, 5.0, None),
    ]


def test_a_step_array_of_the_wrong_length_is_refused_naming_its_forecast(database):
    """A row edited by hand or cut short must not shift its steps onto the next forecast."""
    write(database, [record(horizon=3), record(horizon=3)])
    with database.begin() as connection:
        connection.execute(
            forecasts.update()
            .where(forecasts.c.id == 1)
            .values(forecast=np.arange(2.0).astype("<f8").tobytes())
        )
        logged = connection.execute(select(forecasts).order_by(forecasts.c.id))
        frame = pd.DataFrame(logged.all(), columns=list(logged.keys()))
    with pytest.raises(ValueError, match="forecast id 1 has a step array of 16 bytes, not 3 values"):
        expand_steps(frame)


def test_a_forecast_is_one_row_with_its_steps_as_arrays(database):
    """Each row costs every insert, so a forecast is one row whatever its horizon, its steps
    binary arrays in it. Actuals find their forecasts through one index entry per forecast;
    PostgreSQL gets a BRIN index for retention, and nothing else is indexed."""
    inspector = inspect(database.engine)
    indexes = {index["name"] for index in inspector.get_indexes("forecasts")}
    expected = {"ix_forecasts_series_last_target"}
    if database.dialect == "postgresql":
        expected.add("ix_forecasts_logged_brin")
    assert indexes == expected
    arrays = {c["name"]: c["type"].python_type for c in inspector.get_columns("forecasts")}
    for name in ("target_times", "forecast", "lower", "upper", "naive", "seasonal_naive"):
        assert arrays[name] is bytes, name
    write(database, [record(horizon=720), record(horizon=720)])
    with database.connect() as connection:
        assert connection.execute(select(func.count()).select_from(forecasts)).scalar_one() == 2
