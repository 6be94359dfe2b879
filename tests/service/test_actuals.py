"""POST /v1/actuals' body parsing on the served model's clock (forecaster.data.clock): actuals
meet the forecast steps only if both were read on the same wall clock."""

from __future__ import annotations

import json

import numpy as np
import pytest

from forecaster.data.clock import LOCAL, UTC_CLOCK
from service.actuals import parse_actuals
from service.parsing import RequestProblems


def body(*stamps: str) -> bytes:
    series = {"series_id": "s", "timestamps": list(stamps), "values": [1.0] * len(stamps)}
    return json.dumps({"series": [series]}).encode()


@pytest.mark.parametrize(
    ("clock", "expected"),
    [
        (UTC_CLOCK, "2021-05-01T08:00"),
        ("Europe/Berlin", "2021-05-01T10:00"),
        ("America/New_York", "2021-05-01T04:00"),
        (LOCAL, "2021-05-01T10:00"),  # no zone to convert to: the wall time as written
    ],
)
def test_zone_aware_actuals_are_put_on_the_models_clock(clock, expected):
    given, _ = parse_actuals(body("2021-05-01T10:00:00+02:00"), clock)
    assert given.time[0] == np.datetime64(expected)


def test_naive_actuals_are_read_as_written_on_any_clock():
    for clock in (UTC_CLOCK, "Europe/Berlin", LOCAL, None):
        given, _ = parse_actuals(body("2021-05-01T10:00:00"), clock)
        assert given.time[0] == np.datetime64("2021-05-01T10:00")


def test_zone_aware_actuals_before_a_model_is_loaded_are_refused_naming_the_field():
    """No model, no clock: converting to a guessed one could resolve the wrong forecast steps."""
    with pytest.raises(RequestProblems) as refused:
        parse_actuals(body("2021-05-01T10:00:00Z"), None)
    problem = refused.value.problems[0]
    assert problem.loc == ["series", 0, "timestamps", 0] and problem.type == "no_model"
    assert "GET /readyz" in problem.msg


def test_now_on_a_models_clock_is_its_wall_time_and_on_the_local_clock_the_latest_anywhere():
    """Actuals later than now plus a step are refused as in the future: on a zone's clock now is
    its wall time; on the local clock (no zone known) the latest wall time on Earth, so a value
    already observed somewhere is never taken for the future."""
    from datetime import UTC, datetime, timedelta

    from forecaster.data.clock import now_on_clock

    utc = datetime.now(UTC).replace(tzinfo=None)
    # the UTC clock is also a model saved before clocks were kept, whose naive stamps may be local
    assert abs(now_on_clock("UTC") - utc - timedelta(hours=14)) < timedelta(minutes=1)
    assert abs(now_on_clock("Asia/Kolkata") - utc - timedelta(hours=5, minutes=30)) < timedelta(minutes=1)
    assert abs(now_on_clock("local") - utc - timedelta(hours=14)) < timedelta(minutes=1)
