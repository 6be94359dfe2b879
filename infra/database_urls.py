"""Database URLs as this project opens them, written once for the forecast log (monitoring/),
the promotion and run locks (pipelines/locks.py) and the sweep's claims (pipelines/sweep_claims.py).

Why the driver rewrite: SQLAlchemy reads ``postgresql://`` as psycopg2, which is not installed;
the project ships psycopg 3 (``postgresql+psycopg``). A URL naming a driver keeps it."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import URL, make_url
from sqlalchemy.exc import ArgumentError

PSYCOPG = "postgresql+psycopg"


def sqlalchemy_url(url: str | URL) -> URL:
    """``url`` parsed, ``postgresql://`` read as psycopg 3 (the driver this project ships)."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername=PSYCOPG)
    return parsed


def is_postgresql(url: str) -> bool:
    return url.lower().startswith("postgresql")


def sqlite_file(url: str) -> Path | None:
    """The absolute path of an SQLite URL's file; None for another database or SQLite in memory."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).absolute()


def missing_sqlite_store(url: str) -> Path | None:
    """The file an SQLite URL names when it does not exist (None for another store, SQLite in
    memory, an existing file, or a URL SQLAlchemy cannot read, which the caller's library names
    itself). MLflow creates the store it is pointed at: a reader (the service, `forecast
    compare`) checks first, so a mistyped path is named instead of left behind as an empty store."""
    if not url.lower().startswith("sqlite:"):
        return None
    try:
        path = sqlite_file(url)
    except ArgumentError:
        return None
    return path if path is not None and not path.exists() else None
