"""The first layout: one row per forecast step, and the actuals.

Revision ID: 0001
Revises:
Create Date: 2026-10-20
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "forecast_steps",
        sa.Column("id", ID, primary_key=True, autoincrement=True),
        sa.Column("request_id", sa.String(32), nullable=False),
        sa.Column("series_id", sa.String(200), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("model_name", sa.String(200), nullable=False),
        sa.Column("model_version", sa.String(50), nullable=False),
        sa.Column("model_alias", sa.String(100), nullable=False),
        sa.Column("origin", sa.DateTime, nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("target_time", sa.DateTime, nullable=False),
        sa.Column("forecast", sa.Float, nullable=False),
        sa.Column("lower", sa.Float),
        sa.Column("upper", sa.Float),
        sa.Column("level", sa.Float),
        sa.Column("naive", sa.Float, nullable=False),
        sa.Column("seasonal_naive", sa.Float),
        sa.Column("scale", sa.Float, nullable=False),
        sa.Column("logged_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_forecast_steps_series_time", "forecast_steps", ["series_id", "target_time"])
    op.create_table(
        "actuals",
        sa.Column("series_id", sa.String(200), primary_key=True),
        sa.Column("time", sa.DateTime, primary_key=True),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("received_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("actuals")
    op.drop_table("forecast_steps")
