"""Request bodies to arrays, fast and off the event loop when large.

Parsing is pydantic's compiled JSON validator straight from bytes (no ``json.loads`` and no Python
per number). A body over ``parse_offload_bytes`` is parsed in a helper process, so one client
posting megabytes cannot stall everyone else's requests on the event loop; what comes back is
numpy arrays, which cross the process boundary as a copy of their bytes. Both bodies the service
reads itself go this way: /v1/predict's windows and /v1/actuals' values (service/actuals.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from pydantic import ValidationError

from infra.helper_process import HelperProcess
from service.schemas import PredictRequest

HELPER_START_S = 120.0  # how long the parsing helper may take to start before it counts as hung


@dataclass
class ParsedSeries:
    values: np.ndarray  # (T, F) float64, as given
    timestamps: list[datetime] | None
    future: dict[str, np.ndarray] | None = None  # future covariate name -> values, as given
    series_id: str | None = None


@dataclass
class ParsedRequest:
    series: list[ParsedSeries]
    return_attention: bool


@dataclass
class ProblemItem:
    loc: list[str | int]  # without "body": ["series", 0, "values", 13]
    msg: str
    type: str


class RequestProblems(Exception):
    """Everything wrong with a request; answered as 422 naming each field."""

    def __init__(self, problems: list[ProblemItem], total: int | None = None) -> None:
        super().__init__(f"{len(problems) if total is None else total} problem(s)")
        self.problems = capped(problems, total)


class ParserBusyError(Exception):
    """Too many large bodies are waiting to be parsed (503 + Retry-After)."""


class ParseTimeoutError(Exception):
    """A body took longer than its deadline to parse (413): its helper process was replaced."""


def declares_json(content_type: str) -> bool:
    """The media type (case-insensitive, parameters aside) is application/json or a +json one. A
    substring test took `text/plain;x=json`, which a browser may send cross-origin without asking,
    and refused `Application/JSON`."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


UNION_TAGS = {"numbers", "rows"}  # the discriminator's branch names pydantic puts in error locations
MAX_PROBLEMS = 20  # a 422 names at most this many fields, then says how many more there were


def capped(problems: list[ProblemItem], total: int | None = None) -> list[ProblemItem]:
    """At most MAX_PROBLEMS, the last one saying how many were left out. ``total``: how many
    there were, where only the first few were put in words (the forecast log's refusals)."""
    total = len(problems) if total is None else total
    if total <= MAX_PROBLEMS:
        return problems
    more = total - MAX_PROBLEMS + 1
    return [
        *problems[: MAX_PROBLEMS - 1],
        ProblemItem([], f"... and {more} more problems", "too_many_problems"),
    ]


def problems_from(error: ValidationError) -> list[ProblemItem]:
    """pydantic's errors as short, field-naming problems; one per location."""
    problems, seen = [], set()
    for item in error.errors(include_url=False):
        loc = [part for part in item["loc"] if part not in UNION_TAGS]
        key = tuple(loc)
        if key in seen:
            continue
        seen.add(key)
        problems.append(ProblemItem(loc, _message(item), item["type"]))
    return problems  # capped by RequestProblems


def as_json(value: Any) -> str:
    """A request's value as its sender wrote it (true, null, "x", {"a": null}), not as Python
    spells it."""
    return json.dumps(value, default=repr)


def _message(item: Any) -> str:
    kind, given = item["type"], item.get("input")
    if kind in ("float_type", "float_parsing"):
        if isinstance(given, list):
            return "a row among numbers (mix of numbers and rows): give L numbers or L rows of F numbers"
        return f"{as_json(given)} is not a number"
    if kind == "finite_number":
        return "only finite numbers are accepted (no NaN, Infinity, or numbers beyond float range)"
    if kind in ("less_than_equal", "greater_than_equal"):
        return f"{given:g} is beyond +-3.4e38, the float32 range models compute in"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "bool_type":
        return f"{as_json(given)} is not true or false"
    if kind == "json_invalid":
        return f"the body is not valid JSON: {item['ctx']['error']}"
    return item["msg"].removeprefix("Value error, ")


def parse_predict(body: bytes) -> ParsedRequest:
    """Validate a /v1/predict body; raises RequestProblems naming every bad field."""
    try:
        request = PredictRequest.model_validate_json(body)
    except ValidationError as error:
        raise RequestProblems(problems_from(error)) from None
    series = []
    for item in request.series:
        values = np.asarray(item.values, dtype=np.float64)
        values = values[:, None] if values.ndim == 1 else values
        future = None
        if item.future is not None:
            future = {name: np.asarray(v, dtype=np.float64) for name, v in item.future.items()}
        series.append(ParsedSeries(values, item.timestamps, future, item.series_id))
    return ParsedRequest(series, request.return_attention)


def warm_up() -> None:
    """The helper's first task: import both parsers (/v1/actuals' lives in service/actuals.py) and
    parse a tiny body, so the first large body pays no import."""
    import service.actuals  # noqa: F401

    parse_in_worker(b'{"series": [{"values": [0]}]}')


def parse_in_worker(body: bytes) -> ParsedRequest | list[ProblemItem]:
    """parse_predict for the helper process: problems come back as a value, not an exception."""
    try:
        return parse_predict(body)
    except RequestProblems as problems:
        return problems.problems


class BodyParser:
    """Parses small bodies inline and large ones in one helper process (infra/helper_process.py),
    at most ``max_waiting`` large ones at a time (beyond that: busy)."""

    def __init__(self, offload_bytes: int, timeout: float = 10.0, max_waiting: int = 4) -> None:
        self.offload_bytes = offload_bytes
        self.timeout = timeout
        self.max_waiting = max_waiting
        self.waiting = 0
        self.helper = HelperProcess(warm_up)

    def start(self) -> None:
        if self.offload_bytes > 0:
            self.helper.start()

    async def _helper_started(self, pool: ProcessPoolExecutor) -> None:
        """Wait for the helper's start (a Python process importing the parsers: seconds on a busy
        machine) outside the body's deadline, which is for the parsing: a body that arrives while
        the helper starts is not refused for it. A start that never ends is treated as a hang."""
        warmed = self.helper.warmed
        if warmed is None or warmed.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(warmed)), HELPER_START_S)
        except TimeoutError:
            self.helper.replace(pool)
            raise ParseTimeoutError(f"the parsing helper did not start within {HELPER_START_S:g} s") from None

    async def stop(self) -> None:
        await self.helper.stop()

    async def parse(self, body: bytes, parse_with: Callable[[bytes], Any] = parse_in_worker) -> Any:
        """``parse_with(body)``: inline for a small body, in the helper for a large one. It returns
        its problems as a list (raised here as RequestProblems): exceptions do not cross processes
        cheaply. /v1/predict's is the default; /v1/actuals passes its own."""
        if self.helper.pool is None or len(body) <= self.offload_bytes:
            result = parse_with(body)
        else:
            result = await self._offload(body, parse_with)
        if isinstance(result, list):
            raise RequestProblems(result)
        return result

    async def _offload(self, body: bytes, parse_with: Callable[[bytes], Any]) -> Any:
        if self.waiting >= self.max_waiting:
            raise ParserBusyError(f"{self.waiting} large bodies are already being parsed")
        self.waiting += 1
        pool = self.helper.pool
        assert pool is not None
        try:
            await self._helper_started(pool)
            work = asyncio.get_running_loop().run_in_executor(pool, parse_with, body)
            return await asyncio.wait_for(work, self.timeout)
        except TimeoutError:  # a body built to be slow: end the helper, start a fresh one
            self.helper.replace(pool)
            raise ParseTimeoutError(f"the body took longer than {self.timeout:g} s to parse") from None
        except BrokenProcessPool:  # the helper died (killed, out of memory): a new one, and inline now
            self.helper.replace(pool)
            return parse_with(body)
        finally:
            self.waiting -= 1
