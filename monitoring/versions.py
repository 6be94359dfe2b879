"""The model versions the monitor scores: (role, model name, version) -> a small integer id, so
each resolved step carries four bytes instead of three strings, and the monitor lists versions
from a table of a few rows instead of scanning millions."""

from __future__ import annotations

import pandas as pd
from sqlalchemy import Connection, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from monitoring.schema import monitored_versions

KEY = ["role", "model_name", "model_version"]
Version = tuple[str, str, str]


def version_ids(connection: Connection, models: pd.DataFrame) -> dict[Version, int]:
    """The id of every (role, model_name, model_version) in ``models`` (with a model_alias
    column), created when new; a version's alias is updated to the last one given. Rows are
    written only when something changed: on PostgreSQL a write would hold the version's row
    until commit, and every replica resolving forecasts of that version would queue behind it."""
    latest = models.drop_duplicates(subset=KEY, keep="last")
    wanted = {tuple(row[:3]): row[3] for row in latest[[*KEY, "model_alias"]].itertuples(index=False)}
    known = existing(connection, list(wanted))
    missing = [key for key in wanted if key not in known]
    if missing:
        insert = postgres_insert if connection.dialect.name == "postgresql" else sqlite_insert
        rows = [dict(zip([*KEY, "model_alias"], (*key, wanted[key]), strict=True)) for key in missing]
        connection.execute(insert(monitored_versions).on_conflict_do_nothing(index_elements=KEY), rows)
        known |= existing(connection, missing)
    v = monitored_versions
    for key, (id_, alias) in known.items():
        if alias != wanted[key]:
            connection.execute(update(v).where(v.c.id == id_).values(model_alias=wanted[key]))
    return {key: id_ for key, (id_, _) in known.items()}


def existing(connection: Connection, keys: list[Version]) -> dict[Version, tuple[int, str]]:
    v = monitored_versions
    found = connection.execute(
        select(v.c.id, v.c.role, v.c.model_name, v.c.model_version, v.c.model_alias).where(
            tuple_(v.c.role, v.c.model_name, v.c.model_version).in_(keys)
        )
    ).all()
    return {(role, name, version): (id_, alias) for id_, role, name, version, alias in found}
