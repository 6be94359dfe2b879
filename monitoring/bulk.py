"""Many rows at once, straight to the driver. SQLAlchemy's per-row parameter processing cost more
than the rest of the log's work put together, so rows go as plain tuples: one executemany on
SQLite, binary COPY through psycopg 3 on PostgreSQL (into the table, or into a temporary table
first when existing rows are to be updated)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    SmallInteger,
    String,
    Table,
    Text,
)

POSTGRES_TYPES = {
    String: "text",
    Text: "text",
    DateTime: "timestamp",
    SmallInteger: "int2",
    BigInteger: "int8",
    Integer: "int4",
    Float: "float8",
    LargeBinary: "bytea",
}


def postgres_types(table: Table, columns: tuple[str, ...]) -> tuple[str, ...]:
    """The columns' PostgreSQL types, for binary COPY: psycopg then dumps each value with the
    column's own C dumper instead of looking one up per value."""
    return tuple(POSTGRES_TYPES[type(table.c[name].type)] for name in columns)


def supported(connection: Connection) -> str:
    dialect = connection.dialect
    if dialect.name not in ("sqlite", "postgresql"):
        raise RuntimeError(f"the forecast log supports SQLite and PostgreSQL, not {dialect.name}")
    return dialect.name


def uses_copy(connection: Connection) -> bool:
    return connection.dialect.name == "postgresql" and connection.dialect.driver == "psycopg"


def insert_many(connection: Connection, table: Table, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Insert ``rows`` (tuples in ``columns`` order)."""
    if not rows:
        return
    supported(connection)
    if uses_copy(connection):
        copy_rows(connection, table.name, columns, postgres_types(table, columns), rows)
        return
    connection.exec_driver_sql(insert_statement(connection, table.name, columns), rows)


def upsert_many(
    connection: Connection,
    table: Table,
    columns: tuple[str, ...],
    rows: list[tuple],
    key: tuple[str, ...],
    update: tuple[str, ...],
) -> None:
    """Insert ``rows``; a row whose ``key`` exists already updates the ``update`` columns instead."""
    if not rows:
        return
    supported(connection)
    conflict = f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET " + ", ".join(
        f"{name} = excluded.{name}" for name in update
    )
    if not uses_copy(connection):
        connection.exec_driver_sql(insert_statement(connection, table.name, columns) + conflict, rows)
        return
    staging = f"incoming_{table.name}"
    # a temporary table per connection, emptied at commit: COPY cannot resolve conflicts itself
    connection.exec_driver_sql(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {staging} (LIKE {table.name} INCLUDING DEFAULTS) "
        "ON COMMIT DELETE ROWS"
    )
    copy_rows(connection, staging, columns, postgres_types(table, columns), rows)
    names = ", ".join(columns)
    connection.exec_driver_sql(f"INSERT INTO {table.name} ({names}) SELECT {names} FROM {staging}" + conflict)
    connection.exec_driver_sql(f"TRUNCATE {staging}")  # the same transaction may stage again


def insert_statement(connection: Connection, table: str, columns: tuple[str, ...]) -> str:
    marker = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([marker] * len(columns))})"


def copy_rows(
    connection: Connection, table: str, columns: tuple[str, ...], types: tuple[str, ...], rows: list[tuple]
) -> None:
    """Binary COPY through psycopg 3's own connection, the columns' types declared."""
    driver: Any = connection.connection.driver_connection
    statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)"
    with driver.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)
