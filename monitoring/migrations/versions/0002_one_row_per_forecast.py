"""One row per forecast, its steps as binary arrays: the step rows of 0001 regrouped.

A forecast of the first layout is its step rows sharing request, series, role, model and origin;
it keeps the id of its first step, so ids still grow with logged_at (SQLite's retention relies
on it). Read a series at a time, so a large log is migrated in bounded memory.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-02
"""

from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from alembic import op

from monitoring.bulk import insert_many
from monitoring.records import FORECAST_COLUMNS, sql_times, step_bytes
from monitoring.schema import STEP_ARRAYS, forecasts

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")
FORECAST_KEY = ["request_id", "series_id", "role", "model_name", "model_version", "model_alias", "origin"]
STEP_COLUMNS: dict[str, Any] = {
    "id": sa.BigInteger(), **{name: sa.String() for name in FORECAST_KEY[:-1]}, "origin": sa.DateTime(),
    "step": sa.Integer(), "target_time": sa.DateTime(), "forecast": sa.Float(), "lower": sa.Float(),
    "upper": sa.Float(), "level": sa.Float(), "naive": sa.Float(), "seasonal_naive": sa.Float(),
    "scale": sa.Float(), "logged_at": sa.DateTime(),
}  # fmt: skip


def upgrade() -> None:
    op.create_table(
        "forecasts",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("request_id", sa.String(32), nullable=False),
        sa.Column("series_id", sa.String(200), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("model_name", sa.String(200), nullable=False),
        sa.Column("model_version", sa.String(50), nullable=False),
        sa.Column("model_alias", sa.String(100), nullable=False),
        sa.Column("origin", sa.DateTime, nullable=False),
        sa.Column("last_target", sa.DateTime, nullable=False),
        sa.Column("horizon", sa.Integer, nullable=False),
        sa.Column("level", sa.Float),
        sa.Column("scale", sa.Float, nullable=False),
        sa.Column("logged_at", sa.DateTime, nullable=False),
        sa.Column("target_times", sa.LargeBinary, nullable=False),
        sa.Column("forecast", sa.LargeBinary, nullable=False),
        sa.Column("lower", sa.LargeBinary),
        sa.Column("upper", sa.LargeBinary),
        sa.Column("naive", sa.LargeBinary, nullable=False),
        sa.Column("seasonal_naive", sa.LargeBinary),
    )
    op.create_index("ix_forecasts_series_last_target", "forecasts", ["series_id", "last_target"])
    if op.get_bind().dialect.name == "postgresql":
        op.create_index("ix_forecasts_logged_brin", "forecasts", ["logged_at"], postgresql_using="brin")
    regroup_steps(op.get_bind())
    op.drop_table("forecast_steps")


def regroup_steps(connection: sa.Connection) -> None:
    columns: list[Any] = [sa.column(name, kind) for name, kind in STEP_COLUMNS.items()]
    steps = sa.table("forecast_steps", *columns)
    names = list(STEP_COLUMNS)
    series_ids = connection.execute(sa.select(steps.c.series_id).distinct()).scalars().all()
    dialect = connection.dialect.name
    for series_id in series_ids:
        rows = connection.execute(
            sa.select(*(steps.c[name] for name in names)).where(steps.c.series_id == series_id)
        ).all()
        frame = pd.DataFrame([tuple(row) for row in rows], columns=names)
        regrouped = [forecast_row(group, dialect) for _, group in frame.groupby(FORECAST_KEY, sort=False)]
        insert_many(connection, forecasts, ("id", *FORECAST_COLUMNS), regrouped)
    if dialect == "postgresql":
        connection.exec_driver_sql(
            "SELECT setval(pg_get_serial_sequence('forecasts', 'id'), coalesce(max(id), 0) + 1, false) "
            "FROM forecasts"
        )


def forecast_row(group: pd.DataFrame, dialect: str) -> tuple:
    """One forecast's step rows -> its row of ``forecasts`` (``id`` first, then FORECAST_COLUMNS)."""
    group = group.sort_values("step")
    first = group.iloc[0]
    times = group["target_time"].to_numpy(dtype="datetime64[us]")
    arrays = {
        "target_times": times.view(np.int64)[None, :],
        **{name: group[name].to_numpy(float)[None, :] for name in STEP_ARRAYS if name != "target_times"},
    }
    blobs = {
        name: step_bytes(None if name in ("lower", "upper", "seasonal_naive") and np.isnan(a).all() else a,
                         STEP_ARRAYS[name], 1)[0]
        for name, a in arrays.items()
    }  # fmt: skip
    level = None if pd.isna(first["level"]) else float(first["level"])
    origin, last, logged = sql_times(
        np.array([first["origin"], times[-1], group["logged_at"].min()], dtype="datetime64[us]"), dialect
    )
    key = tuple(first[name] for name in FORECAST_KEY[:-1])  # request_id .. model_alias
    scale = float(first["scale"])
    return (int(group["id"].min()), *key, origin, last, len(group), level, scale, logged,
            *(blobs[name] for name in STEP_ARRAYS))  # fmt: skip


def downgrade() -> None:
    raise NotImplementedError("the one-row-per-step layout is not written back")
