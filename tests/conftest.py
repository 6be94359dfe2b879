"""Shared fixtures: a throwaway MLflow store per test, and the tiny settings tests train with."""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)  # never write to a developer's real store
# What every process a test starts inherits (servers, CLIs, DDP ranks):
# - one OpenMP thread: the tests' networks are tiny, and the suite runs two workers on two cores
#   beside the servers it starts; two spinning OpenMP threads per process then made a tiny seq2seq
#   training about three times slower (measured: 22.6 s with two threads, 7.9 s with one)
# - no MLflow usage telemetry (no network here; a failed send once failed a run's search) and no
#   job-execution runner in the `mlflow server`s tests start (7 huey consumers per server, polling)
for name, value in {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
}.items():
    os.environ.setdefault(name, value)

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "pipelines" / "configs"

# A model this tiny forecasts worse than naive (selection MAE 2.83 vs 2.70), and the promotion gate
# gives such a model no alias: tests that are not about that bar waive it (tests/pipelines/
# test_naive_gate.py drops this line to check the bar itself).
NAIVE_GATE_OFF = "tracking.allow_worse_than_naive=true"

# Tiny but real: a couple of epochs on Melbourne temperatures, seconds per model.
TINY = [
    "data.dataset=melbourne-temp",
    "window.lookback=14",
    "window.horizon=4",
    "model.hidden_size=8",
    "model.layers=1",
    "train.epochs=2",
    "train.batch_size=128",
    "train.limit_train_batches=4",
    "train.progress_bar=false",
    NAIVE_GATE_OFF,
    # neither is what these runs check: the tests about the export and the plots turn them back on
    # (ONNX_AND_PLOTS); the service's shared models keep the export, which is what serves on a CPU
    "tracking.onnx_export=false",
    "tracking.plots=false",
]
ONNX_AND_PLOTS = ["tracking.onnx_export=true", "tracking.plots=true"]


# Every model family, as --set overrides on top of TINY.
FAMILIES = {
    "rnn": ["model.cell=rnn"],
    "lstm": ["model.cell=lstm"],
    "gru": ["model.cell=gru"],
    "bi-gru": ["model.cell=gru", "model.bidirectional=true"],
    "bi-lstm": ["model.cell=lstm", "model.bidirectional=true"],
    "seq2seq": ["model.architecture=seq2seq", "model.attention=none"],
    "seq2seq-attention": ["model.architecture=seq2seq", "model.attention=bahdanau"],
}


@pytest.fixture(autouse=True)
def no_tracking_uri_left_behind() -> Iterator[None]:
    """``mlflow.set_tracking_uri`` also sets MLFLOW_TRACKING_URI in os.environ, which every later
    process a test starts inherits: a test that talked to a server (stopped since) would send the
    next test's `forecast` subprocess to it. Each test starts without one."""
    yield
    os.environ.pop("MLFLOW_TRACKING_URI", None)


_EMPTY_STORE: Path | None = None


def empty_tracking_store(path: Path) -> str:
    """The tracking URI of a new, empty MLflow SQLite store at ``path``: a copy of one this process
    created (and MLflow migrated) once. A store MLflow creates itself runs its ~60 schema migrations
    first, 2 s of CPU each time; tests that are about a store MLflow creates on first use (the
    quiet output on a fresh store) name a path that does not exist yet instead."""
    global _EMPTY_STORE
    if _EMPTY_STORE is None or not _EMPTY_STORE.exists():
        import tempfile

        import mlflow

        template = Path(tempfile.mkdtemp(prefix="empty-mlflow-store-")) / "mlflow.db"
        mlflow.MlflowClient(f"sqlite:///{template}").search_experiments()  # creates and migrates
        # without its Default experiment, whose artifact location is absolute (this process's
        # working directory): the store's first user creates it where a fresh store would
        with closing(sqlite3.connect(template)) as database, database:
            database.execute("DELETE FROM experiments WHERE experiment_id = 0")
        _EMPTY_STORE = template
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_EMPTY_STORE, path)
    return f"sqlite:///{path}"


@pytest.fixture
def tracking_uri(tmp_path, monkeypatch) -> str:
    """An empty SQLite store in a temporary working directory (artifacts land in its
    mlartifacts/)."""
    monkeypatch.chdir(tmp_path)
    return empty_tracking_store(tmp_path / "mlflow.db")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def venv_bin() -> Path:
    import sys

    return Path(sys.executable).parent


_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str | None]:
    """One PostgreSQL server for the session (None when its binaries are missing)."""
    from tests.postgres import postgres_server, why_unavailable  # it imports this module

    if why_unavailable() is not None:
        yield None
        return
    with postgres_server("postgres_tests") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request, tmp_path, postgres_url) -> str:
    """A URL where no log exists yet (the forecast log's tests): an SQLite file, or a new database
    of the session's PostgreSQL server."""
    import psycopg
    from sqlalchemy import make_url

    from tests.postgres import why_unavailable  # it imports this module: not at the top

    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'forecasts.db'}"
    if postgres_url is None:
        pytest.skip(f"PostgreSQL unavailable: {why_unavailable()}")
    name = f"log_{next(_databases)}"
    server = make_url(postgres_url)
    with psycopg.connect(host=server.host, port=server.port, user=server.username, dbname=server.database,
                         autocommit=True) as connection:  # fmt: skip
        connection.execute(f"CREATE DATABASE {name}")
    return str(server.set(database=name))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with end-to-end tests (marked integration), then those with slow ones, then the
    rest, each module's tests kept together and in order (its module fixtures set up once): with
    two xdist workers, a long test handed out last leaves the other worker idle until it ends, so
    the long ones go first and the many short ones fill the gaps at the end."""

    def rank(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("integration") else 1 if item.get_closest_marker("slow") else 2

    modules: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        modules[module] = min(modules.get(module, 2), rank(item))
    order = {module: position for position, module in enumerate(modules)}
    items.sort(key=lambda item: (modules[m := item.nodeid.split("::", 1)[0]], order[m]))


# The suite's time budget (issue 40): CI (.ci/run) sets FORECAST_TEST_BUDGET_S, and a whole run
# that takes longer fails, naming its slowest tests, so the suite cannot quietly grow back. Off
# unless set (a developer's loaded machine is not CI's), and only the controller judges: with
# pytest-xdist each worker also runs these hooks.
BUDGET_VARIABLE = "FORECAST_TEST_BUDGET_S"
_durations: dict[str, float] = {}
_started = pytest.StashKey[float]()


def budget_seconds() -> float | None:
    value = os.environ.get(BUDGET_VARIABLE, "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise pytest.UsageError(f"{BUDGET_VARIABLE}={value!r}: give a number of seconds, e.g. 900") from None


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_started] = time.monotonic()
    budget_seconds()  # a malformed value stops the run before any test


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    budget = budget_seconds()
    if budget is None or hasattr(session.config, "workerinput"):
        return
    took = time.monotonic() - session.config.stash[_started]
    if took <= budget:
        return
    slowest = sorted(_durations.items(), key=lambda item: -item[1])[:10]
    lines = [f"the suite took {took:.0f} s, over its budget of {budget:.0f} s ({BUDGET_VARIABLE}):"]
    lines += [f"  {seconds:6.1f} s  {nodeid}" for nodeid, seconds in slowest]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("\n".join(lines), red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
