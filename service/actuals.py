"""POST /v1/actuals: the observed values, checked as strictly as /v1/predict's windows and
stored all or nothing. pydantic checked the types and numbers; here: one timestamp per value,
no timestamp twice in a series, zones converted to UTC as predict does (so they meet the
forecast steps' timestamps), within the range timestamps can take."""

from __future__ import annotations

from datetime import datetime

from service.forecast_log import utc_now
from service.parsing import ProblemItem, RequestProblems
from service.schemas import ActualsRequest
from service.validation import EARLIEST, LATEST, PANDAS_RANGE, _naive_utc


def actual_rows(request: ActualsRequest) -> list[dict]:
    """One row per (series, timestamp), or RequestProblems naming every bad field."""
    problems: list[ProblemItem] = []
    rows: list[dict] = []
    received = utc_now()
    seen: dict[tuple[str, datetime], str] = {}  # (series, time) -> where it was first given
    for i, series in enumerate(request.series):
        where: list[str | int] = ["series", i, "timestamps"]
        if len(series.timestamps) != len(series.values):
            message = f"{len(series.timestamps)} timestamps for {len(series.values)} values"
            problems.append(ProblemItem(where, message, "length_mismatch"))
            continue
        zoned = [stamp.tzinfo is not None for stamp in series.timestamps]
        if any(zoned) and not all(zoned):
            k = zoned.index(not zoned[0])
            message = "a mix of zone-aware and naive timestamps: give all with a zone (or offset) or none"
            problems.append(ProblemItem([*where, k], message, "mixed_zones"))
            continue
        for k, (stamp, value) in enumerate(zip(series.timestamps, series.values, strict=True)):
            utc = _naive_utc(stamp)
            if utc is None or not EARLIEST <= utc <= LATEST:
                message = f"{stamp.isoformat()} is outside the range timestamps can take ({PANDAS_RANGE})"
                problems.append(ProblemItem([*where, k], message, "out_of_range"))
                break
            key = (series.series_id, utc)
            if key in seen:
                message = f"the same series and time as {seen[key]}: send each value once per request"
                problems.append(ProblemItem([*where, k], message, "duplicate"))
                break
            seen[key] = f"series[{i}].timestamps[{k}]"
            rows.append({"series_id": series.series_id, "time": utc, "value": value, "received_at": received})
    if problems:
        raise RequestProblems(problems)
    return rows
