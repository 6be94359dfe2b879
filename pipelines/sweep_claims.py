"""Who re-trains a shared study's best: the first worker to insert the study's claim, in the
study's own database (the Optuna storage every worker already reaches). The insert is atomic on
SQLite and PostgreSQL alike (a primary key), so exactly one worker wins, whatever the timing;
no wall clock, lease or sleep decides. A claim names the study and its best trial: a worker that
ends later without a better trial finds it taken; one whose trial beat it claims the new best.

Left alone: a worker that dies while re-training leaves its claim, and that best unregistered
(its run shows FAILED in MLflow; `forecast register --run-id` registers it by hand)."""

from __future__ import annotations

import contextlib
import os
import socket

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert
from sqlalchemy.exc import DBAPIError, IntegrityError

from infra.database_urls import sqlalchemy_url

metadata = MetaData()
claims = Table(
    "forecast_sweep_claims",
    metadata,
    Column("study", String(512), primary_key=True),
    Column("best_trial", Integer, primary_key=True),
    Column("worker", String(256), nullable=False),
)


def claim_best(storage: str, study: str, best_trial: int) -> bool:
    """True for the one worker that re-trains and registers trial ``best_trial``, ``study``'s best."""
    engine = create_engine(sqlalchemy_url(storage))
    try:
        with contextlib.suppress(DBAPIError):  # another worker created it at the same moment
            metadata.create_all(engine, checkfirst=True)
        with engine.begin() as connection:
            worker = f"{socket.gethostname()}:{os.getpid()}"
            connection.execute(insert(claims).values(study=study, best_trial=best_trial, worker=worker))
        return True
    except IntegrityError:
        return False
    finally:
        engine.dispose()
