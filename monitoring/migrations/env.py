"""Alembic's entry point for the forecast log. Migrations run only through
``monitoring.database.upgrade``, which hands over a connection already inside the transaction
that holds the database (SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory lock), so two processes
starting at once cannot both migrate."""

from alembic import context

from monitoring.database import VERSION_TABLE

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table=VERSION_TABLE, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
