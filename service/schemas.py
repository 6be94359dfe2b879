"""The HTTP contract. Request values are checked here for what needs no model (numbers, NaN,
ragged rows); what needs the model (length, feature count) is checked in the route."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} is {value!r}, not a number")
    if not math.isfinite(value):
        raise ValueError(f"{where} is {value}, only finite numbers are accepted")
    return float(value)


class SeriesIn(Strict):
    values: list[Any] = Field(
        ...,
        min_length=1,
        description="one window, oldest first: L numbers (univariate) or L rows of F numbers",
    )
    timestamps: list[datetime] | None = Field(
        None, description="one per value; needed by calendar models, and gives future timestamps back"
    )

    @field_validator("values")
    @classmethod
    def _numbers(cls, values: list[Any]) -> list[Any]:
        if all(not isinstance(v, list) for v in values):
            return [_number(v, f"values[{i}]") for i, v in enumerate(values)]
        if not all(isinstance(v, list) for v in values):
            raise ValueError("mix of numbers and rows: give L numbers or L rows of F numbers")
        width = len(values[0])
        rows = []
        for i, row in enumerate(values):
            if len(row) != width:
                raise ValueError(f"ragged rows: values[{i}] has {len(row)} numbers, values[0] has {width}")
            rows.append([_number(v, f"values[{i}][{j}]") for j, v in enumerate(row)])
        return rows


class PredictRequest(Strict):
    series: list[SeriesIn] = Field(..., min_length=1, description="windows to forecast from")
    return_attention: bool = Field(False, description="attention weights (seq2seq with attention)")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "series": [
                        {
                            "values": [
                                10.2,
                                11.0,
                                9.8,
                                10.5,
                                12.1,
                                11.7,
                                10.9,
                                9.5,
                                10.0,
                                11.3,
                                12.4,
                                11.9,
                                10.8,
                                10.1,
                                9.9,
                                11.2,
                                12.0,
                                12.6,
                                11.4,
                                10.7,
                                10.3,
                                9.6,
                                10.4,
                                11.8,
                                12.2,
                                11.5,
                                10.6,
                                10.0,
                            ]
                        }
                    ],
                    "return_attention": False,
                }
            ]
        },
    )


class ModelInfo(BaseModel):
    name: str | None
    version: str | None
    uri: str
    run_id: str | None


class ForecastOut(BaseModel):
    values: list[float]
    timestamps: list[datetime] | None = None
    attention: list[list[float]] | None = Field(None, description="H rows of L weights, each summing to 1")
    quantiles: dict[str, list[float]] | None = Field(
        None, description='prediction-interval bounds by quantile level, e.g. {"0.1": [...], "0.9": [...]}'
    )


class PredictResponse(BaseModel):
    model: ModelInfo
    horizon: int
    forecasts: list[ForecastOut]

    model_config = ConfigDict(protected_namespaces=())


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
    calendar_features: list[str]
    frequency: str
    training_metrics: dict[str, float]
    interval_levels: list[float]
    device: str
    dtype: str
    last_reload_error: str | None = None
