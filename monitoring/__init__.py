"""Live monitoring: the forecast log and the monitor, apart from the web service and the CLI.

The service writes it (monitoring.writer, monitoring.actuals) and answers GET /v1/monitor from
it; the CLI reads it (`forecast monitor`, `forecast retrain`). Neither imports the other: both
import this package, which imports neither.

- schema, migrations/: the tables, and Alembic's migrations from every earlier layout
- database: opening the log as its owner (migrated, its SQLite file watched) or as a reader
- records: a request's forecasts to rows of ``forecasts`` and back
- writer: the queue and the thread that write them; retention: what is deleted when
- actuals, resolution, versions: actuals stored and joined to the forecast steps they resolve
- grid: where an actual of a series may fall (the served frequency's grid, a horizon ahead)
- scoring, monitor: the figures and the status over the rolling window
- snapshot, collector, metrics: the gauges, computed once per refresh for every process
- settings: FORECAST_LOG_*, MONITOR_* and who may use the monitoring routes"""
