"""The low-level pieces every package may use, and which use none of them: forecaster/, monitoring/,
service/ and pipelines/ all import from here; this package imports none of the four.

- database_urls: a SQLAlchemy URL as this project opens it (psycopg 3 for PostgreSQL) and the
  file behind an SQLite URL
- redaction: credentials taken out of every URI or error text before it is logged or returned
- helper_process: one spawned helper process that can be replaced when it hangs or dies

Each rule lived in two or three packages before (issue 42); here it is written once."""
