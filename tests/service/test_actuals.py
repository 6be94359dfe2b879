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
    return json.dumps(
        {"series": [{"series_id": "s", "timestamps": list(stamps), "values": [1.0] * len(stamps)}]}
    ).encode()


@pytest.mark.parametrize(
    ("clock", "expected"),
    [
        (UTC_CLOCK, "2021-05-01T08:00"),
        ("Europe/Berlin", "2021-05-01T10:00"),
        ("America/New_York", "2021-05-01T04:00"),
    ],
)
def test_zone_aware_actuals_are_put_on_the_models_clock(clock, expected):
    given, _ = parse_actuals(body("2021-05-01T10:00:00+02:00"), clock)
    assert given.time[0] == np.datetime64(expected)


def test_naive_actuals_are_read_as_written_on_any_clock():
    for clock in (UTC_CLOCK, "Europe/Berlin", LOCAL):
        given, _ = parse_actuals(body("2021-05-01T10:00:00"), clock)
        assert given.time[0] == np.datetime64("2021-05-01T10:00")


def test_a_local_clock_refuses_zone_aware_actuals_naming_the_field():
    with pytest.raises(RequestProblems) as refused:
        parse_actuals(body("2021-05-01T10:00:00", "2021-05-01T11:00:00Z"), LOCAL)
    assert [p.loc for p in refused.value.problems] == [["series", 0, "timestamps", 1]]  # mixed zones first
    with pytest.raises(RequestProblems) as refused:
        parse_actuals(body("2021-05-01T10:00:00Z"), LOCAL)
    problem = refused.value.problems[0]
    assert problem.loc == ["series", 0, "timestamps", 0] and problem.type == "zone_unknown"
    assert "without an offset" in problem.msg
