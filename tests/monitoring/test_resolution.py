"""Resolution: each logged forecast step meets its actual once, whichever arrives first, and the
monitor's window read from the resolved steps gives exactly the figures a full scan of the log
gives (the way the monitor used to compute them)."""

from __future__ import annotations

import contextlib
import random
import threading
from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, select

import monitoring.resolution as resolution
from monitoring.actuals import ActualValues, StrayActuals, UnknownSeries, store_actuals
from monitoring.monitor import COLUMNS, finite, monitor, summarise, window_steps
from monitoring.records import ForecastRecord, expand_steps, records_frame
from monitoring.schema import actuals, forecasts, resolved_steps
from monitoring.scoring import Thresholds
from monitoring.writer import ForecastLog
from tests.monitoring.conftest import HOUR, START, assert_same_document, metrics, record


def writer(database) -> ForecastLog:
    return ForecastLog(database, metrics(), wait_s=0.0)


def post(database, series_id: str, hours, values=None, accept_unknown: bool = True) -> int:
    times = START + np.asarray(list(hours), dtype=np.int64) * HOUR
    values = np.arange(len(times), dtype=float) if values is None else np.asarray(values, dtype=float)
    given = ActualValues([series_id] * len(times), times, values)
    return store_actuals(database, given, accept_unknown, frequency="h").resolved_steps


def full_scan(database, window: int) -> pd.DataFrame:
    """The monitor's input computed the old way: every logged forecast expanded to its steps,
    joined to every actual, the newest ``window`` of each version kept."""
    with database.connect() as connection:
        logged = connection.execute(select(forecasts))
        frame = records_frame(logged.all(), list(logged.keys()))
        values = records_frame(
            connection.execute(select(actuals.c.series_id, actuals.c.time, actuals.c.value)).all(),
            ["series_id", "target_time", "actual"],
        )
    values["target_time"] = values["target_time"].to_numpy(dtype="datetime64[us]")
    steps = expand_steps(frame).merge(values, on=["series_id", "target_time"])
    steps = steps.sort_values(["target_time", "id"], ascending=False, ignore_index=True)
    recency = steps.groupby(["role", "model_name", "model_version"], sort=False).cumcount()
    return steps[recency < window].reset_index(drop=True)


def test_actuals_resolve_exactly_the_steps_forecast_for_their_series_and_times(database):
    """Whatever the actuals' span, the count is a plain count over every logged step."""
    log = writer(database)
    logged: list[tuple[str, int]] = []  # (series, target hour) of every step
    for series_id in ("a", "b"):
        for origin in range(10):  # hourly forecasts of 4 steps, overlapping
            log.write_batch([record(series_id, first_target=origin + 1)])
            logged += [(series_id, origin + 1 + k) for k in range(4)]
    for series_id, hours in [
        ("a", [1]),
        ("a", [3, 4, 5]),
        ("b", [0, 7, 13]),
        ("a", [14, 17]),  # hour 17: a horizon past the latest step, the furthest taken
        ("b", range(15)),
    ]:
        expected = sum(1 for s, h in logged if s == series_id and h in hours)
        assert post(database, series_id, hours) == expected, (series_id, hours)


def test_forecasts_written_after_their_actuals_are_resolved_by_the_writer(database):
    post(database, "late", range(0, 6))
    writer(database).write_batch([record("late", first_target=3), record("late", first_target=5)])
    with database.connect() as connection:
        steps = connection.execute(select(resolved_steps.c.step, resolved_steps.c.actual)).all()
    assert sorted(steps) == [(1, 3.0), (1, 5.0), (2, 4.0), (3, 5.0)]  # hours 3-5, and 5


def test_a_correction_replaces_the_actual_of_every_step_it_resolved(database):
    writer(database).write_batch([record("s", first_target=1), record("s", first_target=2)])
    assert post(database, "s", [2], [10.0]) == 2
    assert post(database, "s", [2], [20.0]) == 2  # the same two steps, now with the new value
    with database.connect() as connection:
        found = connection.execute(select(resolved_steps.c.actual)).scalars().all()
    assert found == [20.0, 20.0]


def test_actuals_of_a_series_never_forecast_are_refused_and_nothing_is_stored(database):
    writer(database).write_batch([record("known")])
    times = START + np.arange(1, 3) * HOUR
    given = ActualValues(["known", "known", "typo"], np.r_[times, times[:1]], np.ones(3))
    with pytest.raises(UnknownSeries) as refused:
        store_actuals(database, given, frequency="h")
    assert refused.value.series_ids == ["typo"]
    with database.connect() as connection:
        assert connection.execute(select(func.count()).select_from(actuals)).scalar_one() == 0
    assert store_actuals(database, given, accept_unknown=True, frequency="h").stored == 3


def minutes(*hours: float) -> np.ndarray:
    """Times ``hours`` after START (fractions to the minute)."""
    return START + (np.asarray(hours) * 60).astype(np.int64) * np.timedelta64(1, "m")


def stored_count(database) -> int:
    with database.connect() as connection:
        return connection.execute(select(func.count()).select_from(actuals)).scalar_one()


def test_an_actual_off_the_series_grid_is_refused_wherever_it_falls_and_nothing_is_stored(database):
    """Off the hourly grid inside a forecast's span (06:30), and far outside any span (hour 30:30,
    a day after the forecast's last step): stored, either stopped `forecast retrain` for good.
    Refused by position, naming the nearest steps either side, unknown series accepted or not;
    the value on the grid beside them is not stored either."""
    writer(database).write_batch([record("s", first_target=5)])  # origin hour 4, steps at hours 5-8
    given = ActualValues(["s"] * 3, minutes(6, 6.5, 30.5), np.ones(3))
    for accept_unknown in (False, True):
        with pytest.raises(StrayActuals) as refused:
            store_actuals(database, given, accept_unknown, frequency="h")
        strays = refused.value.strays
        assert [(stray.position, stray.kind) for stray in strays] == [(1, "off_grid"), (2, "off_grid")]
        assert refused.value.total == 2
    assert "2024-01-01T06:30:00 is off the grid of series 's' (hourly (h)" in strays[0].why
    assert "its nearest steps are 2024-01-01T06:00:00 and 2024-01-01T07:00:00" in strays[0].why
    assert "nearest steps are 2024-01-02T06:00:00 and 2024-01-02T07:00:00" in strays[1].why
    assert stored_count(database) == 0


def test_on_the_grid_an_actual_is_taken_whether_or_not_a_forecast_reaches_it(database):
    """Between two forecasts that do not meet (a series forecast less often than every H steps),
    before the first forecast (the model's data may end before it), and up to one horizon past
    the latest forecast: values of the series `forecast retrain` needs whole. None was taken
    before (no logged step at their time)."""
    log = writer(database)
    log.write_batch([record("s", first_target=5), record("s", first_target=20)])  # hours 5-8, 20-23
    hours = [1, 12, 14, 23 + 4]  # before, between (twice), a horizon past the latest step
    assert post(database, "s", hours, accept_unknown=False) == 0
    assert stored_count(database) == 4


def test_an_actual_more_than_a_horizon_past_the_latest_forecast_is_refused(database):
    """1996 after forecasts of 1991 opened a gap of years in `forecast retrain`'s data. Refused
    however unknown series are taken; a day within a horizon of the latest step is fine."""
    writer(database).write_batch([record("s", first_target=5)])  # steps at hours 5-8, H=4
    years = 24.0 * 365 * 5
    given = ActualValues(["s"] * 2, minutes(12, years), np.ones(2))  # hour 12: 8 + 4, the limit
    with pytest.raises(StrayActuals) as refused:
        store_actuals(database, given, accept_unknown=True, frequency="h")
    (stray,) = refused.value.strays
    assert (stray.position, stray.kind) == (1, "beyond_forecasts")
    assert "latest logged forecast step is 2024-01-01T08:00:00" in stray.why
    assert "after 2024-01-01T12:00:00" in stray.why
    assert stored_count(database) == 0


def test_a_series_never_forecast_is_anchored_on_its_first_value_then_on_its_stored_actuals(database):
    """Accepted unknown series (a backfill posted before its forecasts) have no logged step to
    anchor the grid: an hourly series' phase went unchecked and 02:30 was stored beside 01:00,
    stopping `forecast retrain` for good. Anchored on the first value sent, then on the latest
    stored actual, every value of the series shares one phase; a business-day series' weekend is
    refused as before."""
    hourly = ActualValues(["new"] * 2, minutes(1, 2.5), np.ones(2))
    with pytest.raises(StrayActuals) as refused:
        store_actuals(database, hourly, accept_unknown=True, frequency="h")
    (stray,) = refused.value.strays
    assert (stray.position, stray.kind) == (1, "off_grid")
    assert "through its first value sent 2024-01-01T01:00:00" in stray.why
    first = ActualValues(["new"], hourly.time[:1], np.ones(1))
    assert store_actuals(database, first, accept_unknown=True, frequency="h").stored == 1
    later = ActualValues(["new"] * 2, minutes(5, 3.5), np.ones(2))  # 05:00 first: the stored 01:00 anchors
    with pytest.raises(StrayActuals) as refused:
        store_actuals(database, later, accept_unknown=True, frequency="h")
    (stray,) = refused.value.strays
    assert stray.position == 1 and "through its stored actual 2024-01-01T01:00:00" in stray.why
    saturday = np.datetime64("2024-01-06T00:00", "us")
    days = ActualValues(["other"] * 2, np.array([saturday - 24 * HOUR, saturday]), np.ones(2))
    with pytest.raises(StrayActuals) as refused:
        store_actuals(database, days, accept_unknown=True, frequency="B")
    (stray,) = refused.value.strays
    assert stray.position == 1
    assert "nearest steps are 2024-01-05T00:00:00 and 2024-01-08T00:00:00" in stray.why
    assert stored_count(database) == 1


def test_a_value_later_than_now_plus_a_step_is_refused_as_in_the_future(database):
    """A series never forecast had no limit at all (no forecast to be a horizon past): 2030 was
    stored in 2024. Now on the model's clock plus one step is the latest taken, forecast or not."""
    writer(database).write_batch([record("s", first_target=5)])  # steps at hours 5-8: past "now"
    now = START + 6 * HOUR  # hour 6: its forecast reaches hour 12, now + a step is hour 7
    given = ActualValues(["s", "s", "new", "new"], minutes(7, 8, 7, 24 * 365 * 6), np.ones(4))
    with pytest.raises(StrayActuals) as refused:
        store_actuals(database, given, accept_unknown=True, frequency="h", now=now.astype(object))
    assert [(stray.position, stray.kind) for stray in refused.value.strays] == [
        (1, "in_future"),
        (3, "in_future"),
    ]
    assert (
        "is in the future: it is now 2024-01-01T06:00:00 on the model's clock" in refused.value.strays[0].why
    )
    assert stored_count(database) == 0
    kept = ActualValues(["s", "new"], minutes(7, 7), np.ones(2))
    assert (
        store_actuals(database, kept, accept_unknown=True, frequency="h", now=now.astype(object)).stored == 2
    )


def daily_record(first_day: int, horizon: int = 3, version: str = "2") -> ForecastRecord:
    """A daily forecast by ``version`` of series "s", its steps at midnight, the first
    ``first_day`` days after START."""
    days = START + (first_day + np.arange(horizon)) * 24 * HOUR
    return ForecastRecord(
        "daily", "champion", "m", version, "champion", "D", ["s"], np.arange(48.0)[None, :], [days],
        np.arange(float(horizon))[None, :], {}, [],
    )  # fmt: skip


def test_the_grid_is_anchored_on_the_served_model_versions_own_forecasts(database):
    """A daily champion (version 2) logged steps at midnight, and an hourly forecast of version 1
    ended at 23:00, later: the grid was anchored on the latest step of any model, 23:00, so the
    champion's own midnight (one of its logged steps) was refused as off the 'D' grid, and the
    message advised 23:00 stamps. Anchored on version 2's forecasts, midnights are on it; a value
    at a step of version 1's forecast is never refused as off the grid (it scores that forecast);
    13:00 is, with the midnights either side named."""
    log = writer(database)
    log.write_batch([daily_record(first_day=1)])  # midnights of days 1-3
    log.write_batch([record("s", first_target=24 * 3 + 20, version="1")])  # hours 20-23 of day 3
    served = {"frequency": "D", "model": ("m", "2")}
    midnights = ActualValues(["s"] * 3, minutes(24 * 2, 24 * 3, 24 * 3 + 23), np.ones(3))
    assert store_actuals(database, midnights, **served).stored == 3  # 23:00: version 1's step
    afternoon = ActualValues(["s"], minutes(24 * 3 + 13), np.ones(1))
    with pytest.raises(StrayActuals) as refused:
        store_actuals(database, afternoon, **served)
    (stray,) = refused.value.strays
    assert "through its forecast step 2024-01-04T00:00:00" in stray.why
    assert "nearest steps are 2024-01-04T00:00:00 and 2024-01-05T00:00:00" in stray.why
    # a version never forecast (3) is anchored on its name's newest, the hourly forecast: midnight
    # is on the hourly grid too, 13:30 is not
    odd = ActualValues(["s"] * 2, minutes(24 * 4, 24 * 3 + 13.5), np.ones(2))
    with pytest.raises(StrayActuals) as refused:
        store_actuals(database, odd, frequency="h", model=("m", "3"))
    assert [stray.position for stray in refused.value.strays] == [1]
    assert "through its forecast step 2024-01-04T23:00:00" in refused.value.strays[0].why


def test_the_anchor_falls_back_from_the_version_to_its_name_then_to_any_model():
    from monitoring.actuals import pick

    rows = [("m", "1", ("2024-01-03", 4)), ("m", "2", ("2024-01-02", 3)), ("other", "9", ("2024-01-09", 24))]
    assert pick(rows, ("m", "2")) == (("2024-01-02", 3), True)
    assert pick(rows, ("m", "5")) == (("2024-01-03", 4), False)
    assert pick(rows, ("new", "1")) == (("2024-01-09", 24), False)
    assert pick(rows, None) == (("2024-01-09", 24), False)


def test_on_sqlite_the_checks_read_inside_the_write_transaction(database, monkeypatch):
    """pysqlite issues no BEGIN before a SELECT: the reads that judge the values ran outside the
    transaction their upsert then opened, so a forecast committed between the two went unseen."""
    import monitoring.actuals as module

    writer(database).write_batch([record("s", first_target=1)])
    inside: list[bool] = []
    original = module.reach_of

    def watched(connection, *args):
        if connection.dialect.name == "sqlite":
            inside.append(connection.connection.driver_connection.in_transaction)
        else:  # PostgreSQL: a transaction from the first statement on
            inside.append(True)
        return original(connection, *args)

    monkeypatch.setattr(module, "reach_of", watched)
    post(database, "s", [1])
    assert inside == [True]


def test_refusing_the_values_of_many_series_is_one_pass_naming_the_first_few(database, monkeypatch):
    """2,000 series x 40,000 steps took ~10 s inside the write transaction: a mask over every
    step per series, and a message per refused value. The grid is now judged in one vectorised
    pass over the request, before anything is written, and only the first ``named`` refused
    values are put in words (their neighbours looked up); the rest are counted."""
    from monitoring.grid import Grid

    names = [f"s{k}" for k in range(1500)]
    writer(database).write_batch([record(name, first_target=1) for name in names])
    calls = {"off": 0, "neighbours": 0}
    for method in calls:
        original = getattr(Grid, method)

        def counted(self, *args, _original=original, _method=method):
            calls[_method] += 1
            return _original(self, *args)

        monkeypatch.setattr(Grid, method, counted)
    times = np.repeat(minutes(2.5, 3.5), len(names))  # two values a series, both off the grid
    given = ActualValues(names * 2, times, np.ones(len(times)))
    with pytest.raises(StrayActuals) as refused:
        store_actuals(database, given, frequency="h", named=20)
    assert refused.value.total == 3000
    assert [stray.position for stray in refused.value.strays] == list(range(20))
    assert calls == {"off": 1, "neighbours": 20}
    assert stored_count(database) == 0


def test_the_window_is_the_newest_resolved_steps_of_each_version(database):
    """Overlapping 4-step forecasts of two series and two versions, actuals on some hours: the
    window holds, per version, the newest steps by target time (then forecast id)."""
    log = writer(database)
    logged = []  # (forecast id, version, series, step, target hour, forecast)
    for i in range(24):
        series_id, version = "ab"[i % 2], "12"[i // 12]
        log.write_batch([record(series_id, i // 2 + 1, version=version, mean=np.arange(4.0) + 10 * i)])
        logged += [(i + 1, version, series_id, k + 1, i // 2 + 1 + k, 10.0 * i + k) for k in range(4)]
    known = {("a", h): float(h) for h in range(0, 16, 2)} | {("b", h): -float(h) for h in range(5, 12)}
    for series_id in "ab":
        hours = [h for s, h in known if s == series_id]
        post(database, series_id, hours, [known[(series_id, h)] for h in hours])
    window = 5
    resolved = sorted((r for r in logged if (r[2], r[4]) in known), key=lambda r: (r[4], r[0]), reverse=True)
    expected = [r for r in resolved if r[1] == "1"][:window] + [r for r in resolved if r[1] == "2"][:window]
    expected.sort(key=lambda r: (r[4], r[0]), reverse=True)
    with database.connect() as connection:
        frame = window_steps(connection, window)
    got = [
        (row.id, row.model_version, row.series_id, row.step, row.target_time, row.forecast)
        for row in frame.itertuples()
    ]
    assert got == [(i, v, s, k, np.datetime64(START + h * HOUR), f) for i, v, s, k, h, f in expected]
    assert frame["actual"].tolist() == [known[(r[2], r[4])] for r in expected]


@pytest.mark.slow  # a long random log, written and scanned: in make test, not make test-fast
def test_the_monitor_equals_a_full_scan_of_a_log_written_in_any_order(database):
    """Two versions and a challenger, forecasts and actuals interleaved at random (actuals first
    for some, corrections for others): the document read from the resolved steps equals the one
    a full scan of the log gives, to float precision, whatever the window."""
    rng = random.Random(7)
    log = writer(database)
    events = []
    for i in range(60):
        for role in ("champion", "challenger"):
            mean = np.array([rng.gauss(0, 3) for _ in range(4)])
            events.append(("forecast", record(f"s{i % 3}", 1 + i // 3, version=str(1 + i // 30), role=role,
                                              mean=mean, request_id=f"r{i}")))  # fmt: skip
    for hour in range(0, 26):
        for series in range(3):
            events.append(("actual", (f"s{series}", hour, rng.gauss(0, 3))))
    rng.shuffle(events)
    events += [("actual", ("s1", 5, 99.0)), ("actual", ("s2", 9, -4.0))]  # corrections
    reach: dict[str, int] = {}  # each series' latest step + H: the log refuses an actual beyond it
    waiting: list[tuple] = []
    for kind, item in events:
        if kind == "forecast":
            log.write_batch([item])
            series_id = item.series_ids[0]
            last = int((item.future_times[0][-1] - START) // HOUR)
            reach[series_id] = max(reach.get(series_id, 0), last + 4)
        else:
            waiting.append(item)
        for actual in list(waiting):  # in order, each as soon as the log takes it
            if actual[0] not in reach or actual[1] <= reach[actual[0]]:
                waiting.remove(actual)
                post(database, actual[0], [actual[1]], [actual[2]])
    assert not waiting
    for window in (7, 50, 10_000):
        thresholds = Thresholds(window=window, min_steps=10)
        with database.connect() as connection:
            document = monitor(connection, thresholds, ("m", "2"))
        scanned = full_scan(database, window)[list(COLUMNS)]
        expected = finite(summarise(scanned, thresholds, ("m", "2")))
        assert len(document["models"]) == 4  # versions 1 and 2, each champion and challenger
        assert_same_document(document, expected)


def test_an_actual_and_a_forecast_committed_at_once_still_meet(database, monkeypatch):
    """The race resolution must not lose: a writer inserts a forecast while an actual of the same
    series and time is stored. Both transactions are held just before they look for the other's
    row; without the per-series lock (PostgreSQL) or the database's own write lock (SQLite) each
    would miss the other, uncommitted, and the step would never be resolved."""
    barrier = threading.Barrier(2, timeout=2)

    def meeting(function):
        def wrapped(*args, **kwargs):
            if not getattr(local, "met", False):
                local.met = True
                # broken: the other waits on a lock, as it should
                with contextlib.suppress(threading.BrokenBarrierError):
                    barrier.wait()
            return function(*args, **kwargs)

        return wrapped

    local = threading.local()
    monkeypatch.setattr(resolution, "actuals_within", meeting(resolution.actuals_within))
    monkeypatch.setattr(resolution, "forecasts_overlapping", meeting(resolution.forecasts_overlapping))
    errors = []

    def guarded(target):
        def run():
            try:
                target()
            except Exception as exc:  # surfaced below
                errors.append(exc)

        return run

    forecast = threading.Thread(target=guarded(lambda: writer(database).write_batch([record("race")])))
    actual = threading.Thread(target=guarded(lambda: post(database, "race", [1, 2, 3, 4])))
    forecast.start()
    actual.start()
    forecast.join(30)
    actual.join(30)
    assert not errors, errors
    with database.connect() as connection:
        resolved = connection.execute(select(func.count()).select_from(resolved_steps)).scalar_one()
    assert resolved == 4


def test_the_overall_window_takes_the_newest_answered_steps_of_any_version(database):
    log = writer(database)
    log.write_batch([record("s", 1, version="1"), record("s", 3, version="2")])
    post(database, "s", range(1, 7), np.arange(6.0))
    with database.connect() as connection:
        document = monitor(connection, Thresholds(window=3, min_steps=1))
    assert document["overall"]["count"] == 3
    assert {m["version"]: m["count"] for m in document["models"]} == {"1": 3, "2": 3}
    assert isinstance(datetime.fromisoformat(document["models"][0]["last_origin"]), datetime)


def test_actuals_of_many_series_over_different_spans_are_resolved_a_list_of_series_at_a_time(database):
    """A query per series (each its own span) held SQLite's write lock ~9 ms a series: 1,000
    series took 9 s, and the writer's batches waiting on it failed."""
    from sqlalchemy import event

    log = writer(database)
    names = [f"s{k}" for k in range(1200)]
    log.write_batch([record(name, first_target=1 + k % 50) for k, name in enumerate(names)])
    statements = []

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(statement)

    event.listen(database.engine, "before_cursor_execute", seen)
    try:
        hours = np.array([1 + k % 50 + 1 for k in range(1200)])  # each series' second step
        given = ActualValues(names, START + hours * HOUR, np.ones(1200))
        assert store_actuals(database, given, frequency="h").resolved_steps == 1200
    finally:
        event.remove(database.engine, "before_cursor_execute", seen)
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT") and "FROM forecasts" in s]
    assert len(reads) <= 2 * 3  # the unknown-series check and the resolution, 500 series per list


def test_retention_takes_the_steps_an_expired_actual_resolved(database):
    """A replay posts actuals before their forecasts, so they expire first: the steps they
    resolved must go with them, or the monitor shows what the log no longer holds."""
    from datetime import timedelta

    from monitoring.records import utc_now
    from monitoring.retention import prune

    post(database, "s", range(1, 5))
    writer(database).write_batch([record("s")])
    with database.begin() as connection:
        connection.execute(actuals.update().values(received_at=utc_now() - timedelta(days=100)))
        prune(connection, timedelta(days=90), 10**9, timedelta(hours=24))
    with database.connect() as connection:
        assert connection.execute(select(func.count()).select_from(resolved_steps)).scalar_one() == 0
        assert monitor(connection, Thresholds(min_steps=1))["models"] == []


def test_a_logged_step_of_another_model_excuses_the_grid_never_the_future(database):
    """A value at an hourly forecast's step is off the served daily grid but scores that forecast,
    so it is not refused as off the grid; eight days ahead of now it is still in the future."""
    log = writer(database)
    log.write_batch([daily_record(1)])  # the served daily model, midnights of days 1-3
    log.write_batch([record("s", first_target=48, horizon=240, version="1")])  # hourly, days 2-12
    now = (START + 48 * HOUR).astype(object)
    ahead = ActualValues(["s"], np.array([START + (24 * 10 + 13) * HOUR]), np.ones(1))
    with pytest.raises(StrayActuals) as refused:
        store_actuals(database, ahead, frequency="D", model=("m", "2"), now=now)
    assert [stray.kind for stray in refused.value.strays] == ["in_future"]
    past = ActualValues(["s"], np.array([START + 49 * HOUR]), np.ones(1))  # an hourly step, not ahead
    assert store_actuals(database, past, frequency="D", model=("m", "2"), now=now).stored == 1
