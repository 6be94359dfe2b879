"""The validated configuration of one forecasting job: data -> split -> windows -> model -> training.

Everything downstream is built from this object; defaults live here and nowhere else.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from forecaster.data.clock import valid_zone
from forecaster.data.time_formats import check_format
from forecaster.errors import ConfigError, did_you_mean


class StrictModel(BaseModel):
    """Unknown keys are errors, so a typo in a YAML file is reported instead of ignored."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class DataConfig(StrictModel):
    dataset: str | None = Field(None, description="bundled dataset name (see `forecast datasets`)")
    path: str | None = Field(None, description="CSV or Parquet file; overrides the dataset's file")
    time_column: str | None = None
    target: str | None = None
    covariates: list[str] = Field(default_factory=list, description="past covariate columns")
    future_covariates: list[str] = Field(
        default_factory=list,
        description="columns known in advance (holidays, a weather forecast): the network gets their "
        "values for the H forecast steps, so a request must send them",
    )
    id_column: str | None = Field(
        None,
        description="long format: the column naming each series; one model is trained across all of "
        "them (a panel), each scaled on its own training rows",
    )
    frequency: str | None = Field(None, description="pandas offset alias; inferred when empty")
    fill: Literal["interpolate", "ffill"] | None = None
    duplicates: Literal["first", "last", "mean"] | None = None
    calendar_features: bool = Field(False, description="sin/cos hour, weekday, day of year")
    timezone: str | None = Field(
        None,
        description="the clock timestamps are read on (forecaster/data/clock.py): an IANA zone (e.g. "
        "Europe/Berlin): zone-aware timestamps, in the file and in requests, are converted to its wall "
        "time, so calendar features are local hours (sub-daily data across a DST change repeats an "
        "hour: leave it unset); 'UTC'; or 'local' (offsets dropped, wall time as written). Unset: a "
        "file with offsets is read as UTC, one without as local. Stored with the model",
    )

    time_format: str | None = Field(
        None,
        description="strftime format of the time column (e.g. '%d/%m/%Y'); unset: ISO 8601 when the "
        "column starts with a year, else the format of its first readable value, one format for "
        "every row (a column that reads both day first and month first is refused until this says "
        "which). Stored with the model",
    )

    @field_validator("time_format")
    @classmethod
    def _readable_format(cls, value: str | None) -> str | None:
        return None if value is None else check_format(value)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        return None if value is None else valid_zone(value)

    @model_validator(mode="after")
    def _needs_a_source(self) -> DataConfig:
        if self.dataset is None and self.path is None:
            raise ValueError("data: give either `dataset` (a bundled name) or `path` (a file)")
        if self.dataset is None and (self.time_column is None or self.target is None):
            raise ValueError("data: a file given by `path` needs `time_column` and `target`")
        return self

    @model_validator(mode="after")
    def _columns_have_one_role(self) -> DataConfig:
        both = sorted(set(self.covariates) & set(self.future_covariates))
        if both:
            raise ValueError(f"data: {both} listed as both past and future covariates; pick one")
        if self.target is not None and self.target in self.future_covariates:
            raise ValueError(f"data: the target {self.target!r} cannot be a future covariate")
        if len(set(self.future_covariates)) != len(self.future_covariates):
            raise ValueError("data.future_covariates: a column is listed twice")
        roles = {self.target, self.time_column, *self.covariates, *self.future_covariates}
        if self.id_column is not None and self.id_column in roles:
            raise ValueError(f"data.id_column {self.id_column!r} is also used as a time, target or covariate")
        return self


DEFAULT_SELECTION_FOLDS = 2  # the ETTh1 benchmark's rule (issue 34, benchmarks/README.md)
LAG_SCORE_SCALE = 100.0  # model.attention_lag_scale's default (forecaster/models/lag_scores.py says why)


class SplitConfig(StrictModel):
    """Chronological split by fractions, or by dates when ``val_start``/``test_start`` are set."""

    train: float = Field(0.7, gt=0, lt=1)
    val: float = Field(0.15, gt=0, lt=1)
    test: float = Field(0.15, gt=0, lt=1)
    val_start: datetime | None = None
    test_start: datetime | None = None
    end: datetime | None = Field(None, description="first timestamp not used (dates mode)")
    selection: float = Field(
        0.5,
        gt=0,
        lt=1,
        description="share of the validation rows, at their end, that early stopping never sees: "
        "conformal calibration and model selection (promotion, compare) use them",
    )
    selection_folds: int | None = Field(
        None,
        ge=1,
        description="k: the selection score (promotion, compare, sweep) is the mean MAE over k "
        "disjoint folds, each as long as the selection period, laid back from the test split: the "
        "selection period, then the end of the early-stopping rows (forecaster/selection.py says "
        "why); 1 = the selection period alone. k folds need k * selection <= 1. Unset: as many as "
        "fit, up to 2 (the two halves of validation at the default selection of 0.5; issue 34, "
        "benchmarks/README.md)",
    )

    @field_validator("selection_folds")
    @classmethod
    def _folds_fit_in_validation(cls, folds: int | None, info: ValidationInfo) -> int | None:
        """Each fold is as long as the selection period and none may reach the training rows."""
        selection = info.data.get("selection")
        if folds is not None and selection is not None and folds * selection > 1 + 1e-9:
            raise ValueError(
                f"{folds} folds as long as the selection period (split.selection {selection} of "
                f"validation) do not fit in validation: at most {int(1 / selection + 1e-9)}, or lower "
                "split.selection"
            )
        return folds

    @model_validator(mode="after")
    def _consistent(self) -> SplitConfig:
        if (self.val_start is None) != (self.test_start is None):
            raise ValueError("split: set both val_start and test_start, or neither")
        if self.val_start is None and abs(self.train + self.val + self.test - 1.0) > 1e-6:
            raise ValueError("split: train + val + test must sum to 1")
        if self.val_start is not None and self.test_start <= self.val_start:
            raise ValueError("split: test_start must come after val_start")
        return self

    @property
    def folds(self) -> int:
        """k as used: ``selection_folds``, or unset, as many as fit up to DEFAULT_SELECTION_FOLDS
        (resolved on each read, so a config saved unset stays unset through any later change of
        ``selection``)."""
        if self.selection_folds is not None:
            return self.selection_folds
        return max(1, min(DEFAULT_SELECTION_FOLDS, int(1 / self.selection + 1e-9)))


class WindowConfig(StrictModel):
    lookback: int = Field(96, ge=1, description="L: past steps the model sees")
    horizon: int = Field(24, ge=1, description="H: future steps it forecasts")
    stride: int = Field(1, ge=1, description="step between training windows")


Cell = Literal["rnn", "lstm", "gru"]
Attention = Literal["none", "bahdanau"]
# what `--model` and ``Forecaster(model=...)`` name: a cell (a many-to-one network of it) or seq2seq
MODEL_CHOICES: tuple[str, ...] = (*get_args(Cell), "seq2seq")


def check_model_choice(model: str | None, given_as: str) -> None:
    """Refuse a ``model`` shorthand that names no model, as the user wrote it (``given_as``:
    ``--model transformer``, ``Forecaster(model='transformer')``): read as a cell, it would be
    refused as ``model.cell``, a field the user never typed."""
    if model is None or model in MODEL_CHOICES:
        return
    *cells, seq2seq = MODEL_CHOICES
    choices = f"{', '.join(cells)} (a many-to-one network of that cell) or {seq2seq}"
    raise ConfigError(f"{given_as}: not a model; choose {choices}{did_you_mean(model, MODEL_CHOICES)}")


class ModelConfig(StrictModel):
    architecture: Literal["many_to_one", "seq2seq"] = "many_to_one"
    cell: Cell = "lstm"
    hidden_size: int = Field(64, ge=1)
    layers: int = Field(2, ge=1)
    dropout: float = Field(0.1, ge=0, lt=1)
    bidirectional: bool = False
    attention: Attention = Field(
        "none",
        description="seq2seq: `bahdanau` (additive: v^T tanh(W q + U k), its default) or `none` (the "
        "decoder sees the encoder's final state alone). Many-to-one networks have none: `none`, "
        "their only value (so a run's logged `model.attention` says what its network has)",
    )
    attention_layout: Literal["lags", "steps", "states"] = Field(
        "lags",
        description="seq2seq attention: `lags`: every forecast step has its own query (the decoder "
        "state, its position and calendar) over a key per look-back step (its encoder state, position "
        "and calendar), plus a learned score per lag between them, and retrieves that step's inputs "
        "(and its state: `attention_values`); the direct decoder adds what is retrieved, starting "
        "from zero, to the output of the same network without attention "
        "(forecaster/models/step_attention.py, lag_scores.py); "
        "`steps`: the same without the lag scores, the direct decoder emitting from its own state "
        "alone (models saved with it keep it); `states`: one query per decoder state over the encoder "
        "states (a segment model's days), which a model saved without this field loads as",
    )
    attention_heads: int = Field(
        1,
        ge=1,
        description="seq2seq attention, `steps` layout: weightings of the look-back whose mean is the "
        "attention (the Temporal Fusion Transformer's interpretable heads: they share the values, so "
        "the mean of their weights is exactly what the model retrieves)",
    )
    attention_values: Literal["inputs", "states_and_inputs"] = Field(
        "inputs",
        description="seq2seq attention, `lags` layout: what a forecast step's weights retrieve (the "
        "direct decoder adds it to its output, the step-by-step decoder's RNN reads it as its "
        "context). `inputs`: the look-back steps' own inputs (the "
        "scaled values; their calendar too with `attention_retrieves_calendar`), projected, so what "
        "the attention adds is a weighted sum of past "
        'observations, and "24 hours back" retrieves the value 24 hours back; `states_and_inputs`: '
        "their encoder states too (models saved before this field keep it, as do step-by-step models "
        "saved before `attention_retrieves_calendar`). The `steps` layout always retrieves both",
    )
    attention_retrieves_calendar: bool = Field(
        False,
        description="seq2seq attention, `lags` and `steps` layouts, with calendar features: whether what "
        "a look-back step retrieves includes its calendar features. Off: its observed values alone "
        "(and its encoder state where `attention_values` or the `steps` layout has it); a weighted "
        "sum of past calendar encodings says nothing about the series, and on ETTh1 retrieving it left "
        "the rows less sharp and the selection MSE higher (benchmarks/README.md, issue 41). Models saved "
        "before this field retrieved it, and keep doing so",
    )
    attention_lag_scale: float = Field(
        LAG_SCORE_SCALE,
        gt=0,
        description="seq2seq attention, `lags` layout: what each learned score per lag is multiplied "
        "by, in effect its learning rate against the rest of the network's (Adam moves a parameter "
        "by about the learning rate per update, whatever its gradient): higher makes the rows peak "
        "sooner on a few lags (forecaster/models/lag_scores.py). Saved with the model, so a model "
        "keeps the scale it was trained with",
    )
    decoder: Literal["autoregressive", "direct"] = Field(
        "autoregressive",
        description="seq2seq: `autoregressive` steps through H feeding back its own prediction "
        "(scheduled teacher forcing); `direct` steps over known-future inputs only (calendar, "
        "horizon position), no feedback, all H steps in one fused recurrent call: faster to train "
        "and serve, no exposure bias, teacher forcing ignored",
    )
    level_norm: Literal["none", "last", "mean", "standard"] = Field(
        "last",
        description="forecast relative to the window's last value or mean (NLinear), or `standard`: "
        "minus the window's mean, divided by its standard deviation (RevIN); panel models need "
        "`standard`, so that any series, seen in training or not, is forecast from its own window",
    )
    teacher_forcing: float = Field(0.5, ge=0, le=1, description="seq2seq: start ratio")
    teacher_forcing_decay: float = Field(0.9, ge=0, le=1, description="multiplied in per epoch")
    segment_length: int = Field(
        0,
        ge=0,
        description="feed the RNN segments of this many steps (SegRNN); 0 = steps. Many-to-one: the "
        "encoder reads L/w segments. Seq2seq (direct decoder): the encoder reads L/w segments and the "
        "decoder emits H/w segments of w steps; its attention still has a row per forecast step over "
        "every look-back step (the `steps` layout; `states`: each segment over the L/w segment states)",
    )
    highway: int = Field(
        0,
        ge=0,
        description="linear autoregressive skip over the last N steps (LSTNet), added to the "
        "network's output: many-to-one networks and the seq2seq direct decoder",
    )
    quantiles: list[float] = Field(
        default_factory=list, description="quantile outputs (with train.loss=quantile); empty = point"
    )
    series_embedding: int = Field(
        0,
        ge=0,
        description="panels: a learned vector of this size per series seen in training, beside its "
        "window (series sent without a known id use a learned 'unknown' one); 0 = none",
    )

    @model_validator(mode="after")
    def _quantiles_sorted(self) -> ModelConfig:
        q = self.quantiles
        if any(not 0 < x < 1 for x in q) or q != sorted(set(q)):
            raise ValueError("model.quantiles: distinct, increasing, each strictly between 0 and 1")
        return self

    def inapplicable_fields(self) -> set[str]:
        """Fields this network does not read (a many-to-one network's decoder and attention
        settings, a seq2seq one's attention settings without attention, teacher forcing of the
        direct decoder, which feeds nothing back): a run logs none of them as a parameter, so the
        MLflow UI compares runs on what their networks have (the config.yaml keeps them all)."""
        attention = {name for name in type(self).model_fields if name.startswith("attention_")}
        forcing = {"teacher_forcing", "teacher_forcing_decay"}
        if self.architecture != "seq2seq":
            return attention | forcing | {"decoder"}
        unused = set() if self.attention != "none" else attention
        return unused | (forcing if self.decoder == "direct" else set())

    @model_validator(mode="before")
    @classmethod
    def _attention_default_of_its_architecture(cls, values: Any) -> Any:
        """Unset, ``attention`` is `bahdanau` for seq2seq and `none` for the networks that have
        none: one default per architecture, so the default config builds either with nothing set."""
        if not isinstance(values, dict) or "attention" in values:
            return values
        seq2seq = values.get("architecture") == "seq2seq"
        return {**values, "attention": "bahdanau" if seq2seq else "none"}

    @model_validator(mode="after")
    def _attention_needs_seq2seq(self) -> ModelConfig:
        """Attention asked for on a network without it is refused, not ignored: a many-to-one
        LSTM trained in its place would look like an attention model's run."""
        if self.attention != "none" and self.architecture != "seq2seq":
            raise ValueError(
                f"model.attention (--attention) {self.attention!r}: only seq2seq has attention (--model "
                "seq2seq, or model.architecture: seq2seq); a many-to-one network has none: leave "
                "attention unset or set it to none"
            )
        return self

    @model_validator(mode="after")
    def _decoder_needs_seq2seq(self) -> ModelConfig:
        if self.decoder != "autoregressive" and self.architecture != "seq2seq":
            raise ValueError("model.decoder: only seq2seq has a decoder (set architecture: seq2seq)")
        if self.highway and self.architecture == "seq2seq" and self.decoder != "direct":
            raise ValueError(
                "model.highway: a seq2seq model needs decoder: direct (the autoregressive decoder "
                "feeds its own outputs back, which a skip added afterwards would not be)"
            )
        return self

    @property
    def family(self) -> str:
        """Short readable name: ``lstm``, ``bi-gru``, ``seq2seq-gru-bahdanau``,
        ``seq2seq-direct-gru-bahdanau``."""
        cell = f"bi-{self.cell}" if self.bidirectional else self.cell
        if self.architecture == "seq2seq":
            decoder = "direct-" if self.decoder == "direct" else ""
            return f"seq2seq-{decoder}{cell}-{self.attention}"
        return cell


class TrainConfig(StrictModel):
    epochs: int = Field(20, ge=1)
    batch_size: int = Field(64, ge=1)
    learning_rate: float = Field(1e-3, gt=0)
    weight_decay: float = Field(1e-4, ge=0)
    loss: Literal["mse", "mae", "huber", "quantile"] = "mse"
    lr_schedule: Literal["none", "cosine", "plateau"] = "cosine"
    gradient_clip: float = Field(1.0, ge=0, description="max gradient norm; 0 disables")
    ema_decay: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="keep an exponential moving average of the weights, updated every optimizer "
        "step with this decay, starting from the first step's weights (they keep decay**n of it "
        "after n steps: with 0.99, a fifth after 160); validation, early stopping, the best "
        "checkpoint and the logged model then use the averaged weights. 0 = off",
    )
    patience: int = Field(5, ge=1, description="early stopping on val loss")
    limit_train_batches: int | None = Field(None, ge=1, description="cap batches per epoch")
    seed: int = 42
    accelerator: str = "auto"
    devices: int | str = Field(
        1, description="Lightning devices: a count, -1 (every device), 'auto' or indices like '0,1'"
    )
    num_nodes: int = Field(1, ge=1)
    strategy: str = "auto"
    progress_bar: bool = True

    @field_validator("devices")
    @classmethod
    def _lightning_devices(cls, value: int | str) -> int | str:
        """Refused here, by name: Lightning would fail on it deep inside with a traceback. A count
        given as text ("2" from the CLI or YAML) becomes the number."""
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
            value = int(value)
        if isinstance(value, int) and (value >= 1 or value == -1):
            return value
        if isinstance(value, str) and (value == "auto" or re.fullmatch(r"\d+(,\d+)*,?", value)):
            return value
        raise ValueError(
            f"{value!r}: give a count (1, 2 ...), -1 (every device), 'auto' or indices like '0,1'"
        )


class ForecastConfig(StrictModel):
    data: DataConfig
    split: SplitConfig = Field(default_factory=SplitConfig)
    window: WindowConfig = Field(default_factory=WindowConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    intervals: list[float] = Field(
        default_factory=lambda: [0.8],
        description="central prediction-interval levels: split-conformal on validation windows for "
        "point models, the matching quantile outputs for quantile models",
    )

    @model_validator(mode="before")
    @classmethod
    def _panels_scale_each_window(cls, values: Any) -> Any:
        """A panel's default ``model.level_norm`` is ``standard`` (what it needs, below): stated
        here, the one place defaults live, so the CLI and the Python API get it alike."""
        if not isinstance(values, dict):
            return values
        data, model = values.get("data"), values.get("model", {})
        id_column = data.get("id_column") if isinstance(data, dict) else getattr(data, "id_column", None)
        if id_column is None or not isinstance(model, dict) or "level_norm" in model:
            return values
        return {**values, "model": {**model, "level_norm": "standard"}}

    @model_validator(mode="after")
    def _consistent(self) -> ForecastConfig:
        model, window = self.model, self.window
        if (self.train.loss == "quantile") != bool(model.quantiles):
            raise ValueError("train.loss=quantile and model.quantiles go together (set both or neither)")
        if model.segment_length:
            self._check_segments(model, window)
        if model.highway > window.lookback:
            raise ValueError(f"model.highway ({model.highway}) exceeds window.lookback ({window.lookback})")
        if self.data.id_column is not None and model.level_norm != "standard":
            raise ValueError(
                "model.level_norm: a panel (data.id_column) needs `standard`: each window is scaled "
                "by its own mean and spread, so series of any scale, seen in training or not, are "
                f"forecast alike (got {model.level_norm!r})"
            )
        if model.series_embedding and self.data.id_column is None:
            raise ValueError("model.series_embedding: panels only (set data.id_column)")
        if any(not 0 < level < 1 for level in self.intervals):
            raise ValueError("intervals: coverage levels strictly between 0 and 1, e.g. [0.8, 0.95]")
        return self

    @staticmethod
    def _check_segments(model: ModelConfig, window: WindowConfig) -> None:
        w = model.segment_length
        if window.lookback % w:
            raise ValueError(f"model.segment_length ({w}) must divide window.lookback ({window.lookback})")
        if model.architecture == "seq2seq":
            if model.decoder != "direct":
                raise ValueError(
                    "model.segment_length: a seq2seq model needs decoder: direct (the autoregressive "
                    "decoder feeds back one step at a time)"
                )
            if window.horizon % w:
                raise ValueError(
                    f"model.segment_length ({w}) must divide window.horizon ({window.horizon}) for "
                    "seq2seq: its decoder emits whole segments"
                )


def without_attention_of_many_to_one(config: dict) -> dict:
    """A many-to-one model saved when ``model.attention`` defaulted to `bahdanau` for every
    architecture says `bahdanau`, though only seq2seq networks were ever built with attention: it
    loads as `none`, what its network has (the config now refuses attention on many-to-one).
    Nothing about the network changes."""
    model = config.get("model", {})
    if not isinstance(model, dict):  # not a section: validation names it
        return config
    if model.get("architecture", "many_to_one") == "seq2seq" or model.get("attention", "none") == "none":
        return config
    return {**config, "model": {**model, "attention": "none"}}


def with_attention_layout_of_its_time(config: dict) -> dict:
    """A saved config as its network was built (a many-to-one one without attention:
    ``without_attention_of_many_to_one``): before issue 41 every attention model had the
    `states` layout (one query per decoder state), and its saved config has no
    ``model.attention_layout``; a `lags` model saved before ``model.attention_values`` retrieved
    its steps' encoder states with their inputs; a `lags` or `steps` model saved before
    ``model.attention_retrieves_calendar`` retrieved its steps' calendar features with their values,
    and a step-by-step `lags` one their encoder states too (the field came with both changes).
    Such a model loads as it was built and forecasts as it did."""
    config = without_attention_of_many_to_one(config)
    model = config.get("model", {})
    attends = model.get("architecture") == "seq2seq" and model.get("attention", "bahdanau") != "none"
    if not attends:
        return config
    if "attention_layout" not in model:
        return {**config, "model": {**model, "attention_layout": "states"}}
    as_built = dict(model)
    if model["attention_layout"] == "lags" and "attention_values" not in model:
        as_built["attention_values"] = "states_and_inputs"
    if "attention_retrieves_calendar" not in model:
        as_built["attention_retrieves_calendar"] = True
        if model["attention_layout"] == "lags" and model.get("decoder", "autoregressive") != "direct":
            as_built["attention_values"] = "states_and_inputs"
    return {**config, "model": as_built} if as_built != model else config
