"""The HTTP contract. What needs no model (numbers, types, shapes of rows) is checked here by
pydantic, in compiled code; what needs the model (length, feature count, timestamps against its
frequency) is checked in service/validation.py. ``model_schema`` makes the published request
schema as precise as the loaded model allows, so clients and fuzzers generate valid windows."""

from __future__ import annotations

import copy
import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    field_validator,
)

FLOAT32_MAX = 3.4028234663852886e38

# A number the network can take: finite, within float32 (the dtype models run in); no bools.
Number = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-FLOAT32_MAX, le=FLOAT32_MAX)]


def _layout(values: Any) -> str:
    """Which form ``values`` has, decided on its first item: L numbers, or L rows of F numbers."""
    return "rows" if isinstance(values, list) and values and isinstance(values[0], list) else "numbers"


# fail_fast: the first bad number of a window is reported, not each of a million bad ones (the
# error list is built in Python and would block the event loop, and the answer would be huge)
Row = Annotated[list[Number], Field(fail_fast=True)]
Values = Annotated[
    Annotated[list[Number], Field(min_length=1, fail_fast=True), Tag("numbers")]
    | Annotated[list[Row], Field(min_length=1, fail_fast=True), Tag("rows")],
    Discriminator(_layout),
]

EXAMPLE_WINDOW = [10.2, 11.0, 9.8, 10.5, 12.1, 11.7, 10.9, 9.5, 10.0, 11.3, 12.4, 11.9, 10.8, 10.1]
EXAMPLE_WINDOW += [9.9, 11.2, 12.0, 12.6, 11.4, 10.7, 10.3, 9.6, 10.4, 11.8, 12.2, 11.5, 10.6, 10.0]


ISO_TEXT = re.compile(r"^\d{4}-\d{2}-\d{2}")


def iso_text(value: Any) -> Any:
    """Timestamps are ISO 8601 text ("2024-01-31", "2024-01-31T12:00:00Z"). A number would be read
    as seconds since 1970 by pydantic: 1990 (a year?) as 1970-01-01T00:33:10, silently."""
    if not isinstance(value, str) or not ISO_TEXT.match(value):
        raise ValueError(
            f"{value!r} is not an ISO 8601 timestamp text such as 2024-01-31 or 2024-01-31T12:00:00Z"
        )
    return value


Timestamp = Annotated[datetime, BeforeValidator(iso_text)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# printable: no surrounding blanks, no control characters (a NUL would fail the log's whole batch
# on PostgreSQL, other clients' forecasts with it)
SeriesId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        # control characters spelled as ranges (C0, DEL, C1), not \p{Cc}: the published OpenAPI
        # pattern must read the same in every client's regex dialect (ECMA, Python's re, Rust)
        pattern=r"^[^\s\x00-\x1f\x7f-\x9f]([^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f])?$",
    ),
]


class SeriesIn(Strict):
    series_id: SeriesId | None = Field(
        None,
        description="names the series, so a forecast log can join the actuals posted later to "
        "/v1/actuals (logged only with timestamps)",
    )
    values: Values = Field(
        ...,
        description="one window, oldest first: L numbers (univariate) or L rows of F numbers",
    )
    timestamps: list[Timestamp] | None = Field(
        None,
        description="one per value, evenly spaced at the model's frequency; needed by calendar models, "
        "and gives future timestamps back. Zone-aware stamps are converted to the model's training clock "
        "(GET /v1/model: clock); on the 'local' clock their wall time is taken as written.",
    )
    future: dict[str, Annotated[list[Number], Field(fail_fast=True)]] | None = Field(
        None,
        description="the model's future covariates (GET /v1/model lists them): each name with one "
        'value per forecast step, H in all, e.g. {"holiday": [0, 0, 1, 0, 0, 0, 0]}',
    )

    @field_validator("values")
    @classmethod
    def _rows_are_even(cls, values: list) -> list:
        if isinstance(values[0], list):
            width = len(values[0])
            for i, row in enumerate(values):
                if len(row) != width:
                    raise ValueError(
                        f"ragged rows: values[{i}] has {len(row)} numbers, values[0] has {width}"
                    )
        return values


WINDOW_JSON: list[Any] = list(EXAMPLE_WINDOW)  # (JSON values, as pydantic's schema extra types them)


class PredictRequest(Strict):
    series: list[SeriesIn] = Field(
        ...,
        min_length=1,
        fail_fast=True,  # the first malformed series is reported; model checks then report all
        description="windows to forecast from",
    )
    return_attention: StrictBool = Field(False, description="attention weights (seq2seq with attention)")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"series": [{"values": list[Any](EXAMPLE_WINDOW)}], "return_attention": False}]
        },
    )


class Problem(BaseModel):
    """One thing wrong with a request, naming the field: ``series[2].values[7]``."""

    loc: list[str | int]
    field: str
    msg: str
    type: str


class ValidationProblems(BaseModel):
    detail: list[Problem]


class Message(BaseModel):
    detail: str


class ModelInfo(BaseModel):
    name: str | None
    version: str | None
    uri: str
    run_id: str | None


NaiveTimestamp = Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")]


class ForecastOut(BaseModel):
    values: list[float]
    timestamps: list[NaiveTimestamp] | None = Field(
        None,
        description="one per forecast step, ISO 8601 without a zone: wall times on the model's "
        "training clock (GET /v1/model: clock)",
    )
    attention: list[list[float]] | None = Field(None, description="H rows of L weights, each summing to 1")
    quantiles: dict[str, list[float]] | None = Field(
        None, description='prediction-interval bounds by quantile level, e.g. {"0.1": [...], "0.9": [...]}'
    )


class PredictResponse(BaseModel):
    model: ModelInfo
    horizon: int
    forecasts: list[ForecastOut]

    model_config = ConfigDict(protected_namespaces=())


class CovariateSpec(BaseModel):
    name: str
    values: int = Field(description="how many values a request gives for it, per series")


class ModelDescription(BaseModel):
    model_config = ConfigDict(protected_namespaces=())

    name: str | None
    version: str | None
    uri: str
    loaded_uri: str
    run_id: str | None
    family: str
    architecture: str
    cell: str
    bidirectional: bool
    attention: str | None
    lookback: int
    horizon: int
    features: list[str]
    past_covariates: list[CovariateSpec] = Field(
        description="read from the window's rows (after the target): L values each"
    )
    future_covariates: list[CovariateSpec] = Field(
        description="sent in series[i].future by name: H values each, one per forecast step"
    )
    panel: bool = Field(
        description="trained across many series: each window is scaled by its own mean and spread"
    )
    calendar_features: list[str]
    frequency: str
    clock: str = Field(
        description="the wall clock of the training timestamps: 'UTC', an IANA zone, or 'local' (naive, "
        "zone not named: a zone-aware timestamp's wall time is taken as written); zone-aware timestamps "
        "are converted to it"
    )
    training_metrics: dict[str, float]
    interval_levels: list[float]
    device: str
    dtype: str
    runtime: Literal["torch", "onnx"] = Field(
        description="what runs the network: torch, or ONNX Runtime on the export verified at registration"
    )
    runtime_note: str | None = Field(
        None, description="why it is torch where INFERENCE_RUNTIME asked for ONNX (or auto would have)"
    )


class ForecastLogHealth(BaseModel):
    status: Literal["ok", "failing"]
    error: str | None = Field(None, description="the last write error, credentials redacted")
    queued: int = Field(description="requests' forecasts waiting to be written")
    written: int
    dropped: int = Field(description="forecasts dropped because the queue was full")
    failed: int = Field(description="forecasts whose write failed")
    duplicates: int = Field(description="forecasts of retried requests (an Idempotency-Key logged before)")
    abandoned: int = Field(description="forecasts still queued when a shutdown's drain budget ran out")


class MonitorHealth(BaseModel):
    status: Literal["pending", "fresh", "stale", "failing"] = Field(
        description="the monitor's gauges: not computed yet, current, not refreshed for 2.5 periods, "
        "or the last refresh failed"
    )
    computed_at: str | None = Field(None, description="when they were computed (UTC)")
    age_s: float | None = None
    error: str | None = Field(None, description="the last refresh's error, credentials redacted")


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    reason: str | None = Field(None, description="in words, when not ready or serving a stale model")
    version: str | None = None
    stale: bool = Field(False, description="serving, but the registry could not be asked lately")
    forecast_log: ForecastLogHealth | None = Field(
        None, description="when a forecast log is configured; a failing log never stops predictions"
    )
    monitor: MonitorHealth | None = Field(None, description="when a forecast log is configured")


class ActualSeries(Strict):
    series_id: SeriesId
    timestamps: list[Timestamp] = Field(
        ..., min_length=1, description="ISO 8601 text, one per value; zone-aware ones on the model's clock"
    )
    values: list[Number] = Field(..., min_length=1, description="the observed target")


class ActualsRequest(Strict):
    series: list[ActualSeries] = Field(..., min_length=1)

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "series": [
                        {"series_id": "store-1", "timestamps": ["2024-01-29T00:00:00"], "values": [11.2]}
                    ]
                }
            ]
        },
    )


class ActualsStored(BaseModel):
    stored: int = Field(description="values stored (new or corrected)")
    resolved_steps: int = Field(
        description="logged forecast steps these values resolve, counting the forecasts answered before "
        "this request (waited for up to 2 s while the writer gathers its batch; any still queued after "
        "that are joined all the same when the monitor reads)"
    )


def request_schemas(ref_template: str = "#/components/schemas/{model}") -> dict[str, dict]:
    """PredictRequest, ActualsRequest and the models they refer to, as OpenAPI components (both
    bodies are parsed by the service itself, not by FastAPI)."""
    components: dict[str, dict] = {}
    for model in (PredictRequest, ActualsRequest):
        schema = model.model_json_schema(ref_template=ref_template)
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
    return components


def model_schema(
    components: dict[str, dict],
    lookback: int,
    features: int,
    max_series: int,
    calendar: bool = False,
    future: list[str] | tuple[str, ...] = (),
    horizon: int = 1,
    attention: bool = True,
) -> dict[str, dict]:
    """The request components narrowed to one model: at least ``lookback`` steps, rows of exactly
    ``features`` numbers (a univariate model also takes plain numbers), at most ``max_series``,
    timestamps required when the model uses calendar features, each ``future`` covariate
    required with ``horizon`` values, and ``return_attention`` false only for a model without
    attention (true is answered 422)."""
    narrowed = copy.deepcopy(components)
    if not attention:
        flag = narrowed["PredictRequest"]["properties"]["return_attention"]
        flag["enum"] = [False]
        flag["description"] = "false: this model has no attention"
    series = narrowed["SeriesIn"]
    if calendar:
        series["required"] = [*series.get("required", ["values"]), "timestamps"]
        series["properties"]["timestamps"] = series["properties"]["timestamps"]["anyOf"][0]
    if future:
        given = series["properties"]["future"]
        mapping = given["anyOf"][0]
        numbers = {**mapping["additionalProperties"], "minItems": horizon, "maxItems": horizon}
        series["properties"]["future"] = {
            "type": "object",
            "description": given.get("description", ""),
            "properties": {name: copy.deepcopy(numbers) for name in future},
            "required": list(future),
            "additionalProperties": False,
        }
        series["required"] = [*series.get("required", ["values"]), "future"]
    else:  # nothing, or nothing in it
        given = series["properties"]["future"]
        given["anyOf"] = [{"type": "object", "maxProperties": 0}, {"type": "null"}]
    narrowed["PredictRequest"]["properties"]["series"]["maxItems"] = max_series
    values = narrowed["SeriesIn"]["properties"]["values"]
    forms = values.pop("oneOf", None) or values.pop("anyOf")
    numbers, rows = sorted(forms, key=lambda form: form["items"].get("type") == "array")
    numbers["minItems"] = rows["minItems"] = lookback
    rows["items"]["minItems"] = rows["items"]["maxItems"] = features
    values.pop("discriminator", None)
    values["oneOf"] = [numbers, rows] if features == 1 else [rows]
    return narrowed
