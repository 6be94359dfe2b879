"""Resolved steps kept as actuals arrive (the monitor reads its window instead of rescanning the
log), the versions they belong to, Idempotency-Keys and the shared monitor snapshot. The steps
the log's actuals resolve already are resolved here, a series at a time.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from monitoring.records import utc_now
from monitoring.resolution import backfill
from monitoring.retention import refresh_statistics

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "monitored_versions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("model_name", sa.String(200), nullable=False),
        sa.Column("model_version", sa.String(50), nullable=False),
        sa.Column("model_alias", sa.String(100), nullable=False),
        sa.UniqueConstraint("role", "model_name", "model_version", name="uq_monitored_versions_model"),
    )
    op.create_table(
        "resolved_steps",
        sa.Column("forecast_id", ID, primary_key=True, autoincrement=False),
        sa.Column("step", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("version_id", sa.Integer, nullable=False),
        sa.Column("series_id", sa.String(200), nullable=False),
        sa.Column("origin", sa.DateTime, nullable=False),
        sa.Column("target_time", sa.DateTime, nullable=False),
        *(sa.Column(name, sa.Float) for name in
          ("actual", "forecast", "lower", "upper", "level", "naive", "seasonal_naive", "scale")),
        sa.Column("resolved_at", sa.DateTime, nullable=False),
    )  # fmt: skip
    op.create_index(
        "ix_resolved_version_recent", "resolved_steps", ["version_id", "target_time", "forecast_id"]
    )
    op.create_index(
        "ix_resolved_series_recent",
        "resolved_steps",
        ["series_id", "version_id", "target_time", "forecast_id"],
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("role", sa.String(16), primary_key=True),
        sa.Column("fingerprint", sa.String(64)),
        sa.Column("logged_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "monitor_snapshots",
        sa.Column("key", sa.String(400), primary_key=True),
        sa.Column("document", sa.Text),
        sa.Column("computed_at", sa.DateTime),
        sa.Column("claimed_until", sa.DateTime),
        sa.Column("claimed_by", sa.String(200)),
        sa.Column("error", sa.Text),
        sa.Column("error_at", sa.DateTime),
    )
    backfill(op.get_bind(), utc_now())
    refresh_statistics(op.get_bind())


def downgrade() -> None:
    for table in ("monitor_snapshots", "idempotency_keys", "resolved_steps", "monitored_versions"):
        op.drop_table(table)
