"""POST /v1/actuals' body: the observed values, checked as strictly as /v1/predict's windows.
pydantic checks the types and numbers (timestamps as ISO text only); here: one timestamp per
value, no (series, timestamp) twice, zones converted to the model's training clock as predict
does (forecaster.data.clock: so they meet the forecast steps' timestamps), within the range
timestamps can take.

The whole check runs in the body parser's helper process for a large body (``parse_in_worker``):
a batch of 100,000 values is seconds of Python, which on the event loop would hold every other
request back."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from pydantic import ValidationError

from forecaster.data.clock import LEGACY, stamp_on_clock
from monitoring.actuals import ActualValues
from service.parsing import ProblemItem, RequestProblems, problems_from
from service.request_times import EARLIEST, LATEST, out_of_range, shape_problem
from service.schemas import ActualsRequest

NO_CLOCK_YET = (
    "no model is loaded yet, so a zone-aware timestamp cannot be put on its training clock: send "
    "it again once GET /readyz answers 200, or send naive wall times"
)


@dataclass
class Places:
    """Where a request gave its values, to name one the log refuses: each series' first index in
    ``series``, and where each series' values start among all of them (ActualValues' order)."""

    series: dict[str, int] = field(default_factory=dict)
    starts: list[int] = field(default_factory=list)

    def of(self, position: int) -> list[str | int]:
        """The field of the value at ``position`` in ActualValues: series[i].timestamps[k]."""
        i = int(np.searchsorted(self.starts, position, side="right")) - 1
        return ["series", i, "timestamps", position - self.starts[i]]


def parse_actuals(body: bytes, clock: str | None = LEGACY) -> tuple[ActualValues, Places]:
    """The values of a body, and where each was given (``Places``), or RequestProblems naming
    every bad field. ``clock``: the serving model's training clock; None
    before a model is loaded (zone-aware timestamps are then refused: there is no clock yet)."""
    try:
        request = ActualsRequest.model_validate_json(body)
    except ValidationError as error:
        raise RequestProblems(problems_from(error)) from None
    return actual_values(request, clock)


def parse_in_worker(
    body: bytes, clock: str | None = LEGACY
) -> tuple[ActualValues, Places] | list[ProblemItem]:
    """parse_actuals for the helper process: problems come back as a value, not an exception."""
    try:
        return parse_actuals(body, clock)
    except RequestProblems as problems:
        return problems.problems


def actual_values(request: ActualsRequest, clock: str | None = LEGACY) -> tuple[ActualValues, Places]:
    problems: list[ProblemItem] = []
    series_ids: list[str] = []
    times: list[datetime] = []
    values: list[float] = []
    places = Places()
    seen: dict[tuple[str, datetime], str] = {}  # (series, time) -> where it was first given
    for i, series in enumerate(request.series):
        where: list[str | int] = ["series", i, "timestamps"]
        places.series.setdefault(series.series_id, i)
        places.starts.append(len(times))
        problem = shape_problem(series.timestamps, len(series.values), where)
        if problem is not None:
            problems.append(problem)
            continue
        if series.timestamps and series.timestamps[0].tzinfo is not None and clock is None:
            problems.append(ProblemItem([*where, 0], NO_CLOCK_YET, "no_model"))
            continue
        for k, (stamp, value) in enumerate(zip(series.timestamps, series.values, strict=True)):
            wall = stamp_on_clock(stamp, clock)
            if wall is None or not EARLIEST <= wall <= LATEST:
                problems.append(out_of_range(stamp, [*where, k]))
                break
            key = (series.series_id, wall)
            if key in seen:
                message = f"the same series and time as {seen[key]}: send each value once per request"
                problems.append(ProblemItem([*where, k], message, "duplicate"))
                break
            seen[key] = f"series[{i}].timestamps[{k}]"
            series_ids.append(series.series_id)
            times.append(wall)
            values.append(value)
    if problems:
        raise RequestProblems(problems)
    given = ActualValues(
        series_ids, np.array(times, dtype="datetime64[us]"), np.array(values, dtype=np.float64)
    )
    return given, places
