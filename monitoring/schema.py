"""The forecast log's tables, as the code reads and writes them. Alembic's migrations
(monitoring/migrations/versions) create and change them; tests/monitoring/test_migrations.py holds
the two together (a database migrated to head has exactly these tables, columns and indexes).

- ``forecasts``: one row per answered forecast of one series, its H steps as binary arrays (the
  writer's hot path: a row is what an insert costs).
- ``actuals``: the observed values, one per (series, time); a correction replaces the value.
- ``resolved_steps``: every logged forecast step whose actual is known, with the actual beside
  the forecast, the baselines and the interval: the join of the two tables above, made once when
  the second of the two arrives, so the monitor reads its window instead of rescanning the log.
- ``monitored_versions``: the (role, model, version) the resolved steps belong to.
- ``idempotency_keys``: requests logged under an ``Idempotency-Key``, so a retry is logged once.
- ``monitor_snapshots``: the last computed monitor document per served model, shared by every
  worker and replica writing the log (computed by one of them per refresh period)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

# SQLite's autoincrement needs INTEGER PRIMARY KEY; PostgreSQL gets 64 bits
ID = BigInteger().with_variant(Integer, "sqlite")

# One row per answered forecast of one series: which model made it, from the window ending at
# ``origin``, with that window's MASE scale, and its H horizon steps as arrays (``STEP_ARRAYS``:
# little-endian binary, H values each; records.expand_steps reads them back). One row, not H: with
# a row per step (24 per forecast) the writer thread took 132 us of CPU per forecast on SQLite and
# 52 us on PostgreSQL, with one row 50 and 45 us (benchmarks/serve_bench.py --forecast-log). The
# index on (series_id, last_target) finds the forecasts an actual can resolve: those of its series
# not over before it.
forecasts = Table(
    "forecasts",
    metadata,
    Column("id", ID, primary_key=True, autoincrement=True),
    Column("request_id", String(32), nullable=False),
    Column("series_id", String(200), nullable=False),
    Column("role", String(16), nullable=False),  # champion (answered) or challenger (shadow)
    Column("model_name", String(200), nullable=False),
    Column("model_version", String(50), nullable=False),
    Column("model_alias", String(100), nullable=False),
    Column("origin", DateTime, nullable=False),  # the window's last timestamp
    Column("last_target", DateTime, nullable=False),  # its last step's timestamp
    Column("horizon", Integer, nullable=False),  # H: how many values each step array holds
    Column("level", Float),  # the nominal level of its interval bounds, when it has them
    Column("scale", Float, nullable=False),  # MASE's: its series' training-rows seasonal-naive MAE
    Column("logged_at", DateTime, nullable=False),  # wall clock (UTC): retention goes by this
    # the steps: what was forecast for each target time, beside the naive and seasonal-naive
    # forecasts of the same window
    Column("target_times", LargeBinary, nullable=False),  # int64 microseconds since 1970-01-01 UTC
    Column("forecast", LargeBinary, nullable=False),  # float64, as are the four below
    Column("lower", LargeBinary),  # the model's first interval level, when it has one
    Column("upper", LargeBinary),
    Column("naive", LargeBinary, nullable=False),
    Column("seasonal_naive", LargeBinary),  # when the look-back holds a whole season
    Index("ix_forecasts_series_last_target", "series_id", "last_target"),
)
STEP_ARRAYS = {"target_times": "<i8", "forecast": "<f8", "lower": "<f8", "upper": "<f8", "naive": "<f8",
               "seasonal_naive": "<f8"}  # fmt: skip
# Retention deletes forecasts by logged_at: PostgreSQL gets a BRIN index for it (rows arrive in
# that order, so block range summaries find them at next to no cost per insert). SQLite gets none
# (a B-tree index cost every insert a fifth more CPU): retention bounds its deletes by id there.
Index("ix_forecasts_logged_brin", forecasts.c.logged_at, postgresql_using="brin").ddl_if(dialect="postgresql")

actuals = Table(
    "actuals",
    metadata,
    Column("series_id", String(200), primary_key=True),
    Column("time", DateTime, primary_key=True),
    Column("value", Float, nullable=False),
    Column("received_at", DateTime, nullable=False),
)

monitored_versions = Table(
    "monitored_versions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("role", String(16), nullable=False),
    Column("model_name", String(200), nullable=False),
    Column("model_version", String(50), nullable=False),
    Column("model_alias", String(100), nullable=False),  # as its latest resolved forecast was served
    UniqueConstraint("role", "model_name", "model_version", name="uq_monitored_versions_model"),
)

# One row per resolved step. The monitor's window is an index range: the newest N rows of a
# version by (target_time, forecast_id), of one series when asked. Floats are nullable: SQLite
# stores NaN as NULL, and a challenger's non-finite forecast must still be counted (as degraded).
resolved_steps = Table(
    "resolved_steps",
    metadata,
    Column("forecast_id", ID, primary_key=True, autoincrement=False),
    Column("step", SmallInteger, primary_key=True, autoincrement=False),  # 1..H
    Column("version_id", Integer, nullable=False),
    Column("series_id", String(200), nullable=False),
    Column("origin", DateTime, nullable=False),
    Column("target_time", DateTime, nullable=False),
    Column("actual", Float),
    Column("forecast", Float),
    Column("lower", Float),
    Column("upper", Float),
    Column("level", Float),
    Column("naive", Float),
    Column("seasonal_naive", Float),
    Column("scale", Float),
    Column("resolved_at", DateTime, nullable=False),  # when the second of forecast and actual arrived
    Index("ix_resolved_version_recent", "version_id", "target_time", "forecast_id"),
    Index("ix_resolved_series_recent", "series_id", "version_id", "target_time", "forecast_id"),
)
RESOLVED_VALUES = ("actual", "forecast", "lower", "upper", "level", "naive", "seasonal_naive", "scale")

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("role", String(16), primary_key=True),  # the champion's and the challenger's records of a request
    Column("fingerprint", String(64)),  # of the request's body: a key reused for another request is named
    Column("logged_at", DateTime, nullable=False),
)

monitor_snapshots = Table(
    "monitor_snapshots",
    metadata,
    Column("key", String(400), primary_key=True),  # the served model and the thresholds
    Column("document", Text),  # JSON, as GET /v1/monitor answers
    Column("computed_at", DateTime),
    Column("claimed_until", DateTime),  # a worker computing it holds the claim until then
    Column("claimed_by", String(200)),
    Column("error", Text),  # the last refresh's error (redacted), None after a success
    Column("error_at", DateTime),
)
