"""The Python API: a model in a notebook, the way Darts and neuralforecast users write it.

    from forecaster import Forecaster

    f = Forecaster(model="seq2seq", attention="bahdanau", lookback=96, horizon=24)
    f.fit(df, time_column="date", target="OT")       # any DataFrame, a file or a bundled dataset
    f.evaluate()                                     # test metrics beside the baselines'
    f.predict(df)                                    # the next H steps after df's end
    f.log(experiment="etth1", register="etth1-s2s")  # MLflow run, model, registry (pipelines/)
    g = Forecaster.load("models:/etth1-s2s@champion")

It is the path the CLI takes too, not a second one: `forecast train` fits through ``fit`` (its
run's logger and checkpoints passed as ``TrainingHooks``), `forecast evaluate` and `forecast
predict` score and forecast with forecaster/model_data.py and forecaster/next_steps.py as
``evaluate`` and ``predict`` do, and ``log`` hands the fitted model to the stages that record a
`forecast train` run. The arguments are the CLI's options (forecaster/options.py), so every
default is the config's (forecaster/config.py).

Nothing here decides on the test split: ``evaluate`` reports it; early stopping, the intervals'
calibration and the promotion gate (``log(register=...)``) read the selection data only."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import pandas as pd

from forecaster.config import ForecastConfig, check_model_choice
from forecaster.data.datamodule import Prepared, prepare
from forecaster.data.loading import FRAME_SOURCE, LoadedSeries
from forecaster.data.panel import LoadedPanel
from forecaster.data.source import load_from_config
from forecaster.errors import ConfigError, did_you_mean
from forecaster.evaluation import MODEL, Evaluation, evaluate
from forecaster.model_data import data_config_for, evaluate_model, load_model_data, own_columns
from forecaster.next_attention import next_attention
from forecaster.next_steps import check_predictable, forecast_loaded
from forecaster.options import data_settings, merge, model_settings, read_yaml, window_settings
from forecaster.predictor import Predictor
from forecaster.selection import evaluate_selection
from forecaster.training import TrainedModel, TrainingHooks, train_model

Data: TypeAlias = pd.DataFrame | str | Path  # a DataFrame, a CSV/Parquet file, or a bundled dataset's name


@dataclass
class LoggedModel:
    """What ``Forecaster.log`` recorded: the run, the logged model and, with ``register``, the
    registered version and whether it took the alias (the promotion gate's reason beside it)."""

    run_id: str
    model_uri: str
    registered_name: str | None = None
    registered_version: str | None = None
    promoted: bool | None = None
    reason: str | None = None
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)  # test, as `forecast train`


class Forecaster:
    """A recurrent forecaster: configure, ``fit``, ``evaluate``, ``predict``, ``log``, ``load``.

    ``model``: ``rnn``, ``lstm``, ``gru`` (a many-to-one network of that cell) or ``seq2seq``, or
    the whole model section as a mapping (``{"architecture": "seq2seq", "dropout": 0.1}``);
    ``cell``, ``bidirectional``, ``attention``, ``decoder``, ``hidden_size``, ``layers``,
    ``lookback``, ``horizon``, ``epochs`` as `forecast train`'s options and ``--set`` keys;
    ``config``: a YAML file or a mapping of its sections (the arguments win over it);
    ``sections``: more of them, e.g. ``train={"batch_size": 128}``, ``split={"train": 0.8,
    "val": 0.1, "test": 0.1}``. What is not given is the config's default (forecaster/config.py,
    docs/training.md)."""

    def __init__(
        self,
        model: str | Mapping[str, Any] | None = None,
        *,
        cell: str | None = None,
        bidirectional: bool | None = None,
        attention: str | None = None,
        decoder: str | None = None,
        hidden_size: int | None = None,
        layers: int | None = None,
        lookback: int | None = None,
        horizon: int | None = None,
        epochs: int | None = None,
        config: str | Path | Mapping[str, Any] | ForecastConfig | None = None,
        **sections: Any,
    ) -> None:
        self.settings = initial_settings(config)
        merge_sections(self.settings, sections)
        if isinstance(model, Mapping):
            merge(self.settings, "model", dict(model))
            model = None
        check_model_choice(model, f"Forecaster(model={model!r})")
        merge(self.settings, "model", model_settings(model, cell, bidirectional, attention, decoder))
        sizes = {"hidden_size": hidden_size, "layers": layers}
        merge(self.settings, "model", {key: value for key, value in sizes.items() if value is not None})
        merge(self.settings, "window", window_settings(lookback, horizon))
        merge(self.settings, "train", {"epochs": epochs} if epochs is not None else {})
        # the run settings (experiment, alias ...) of a YAML written for `forecast train`: log()'s defaults
        self.tracking: dict[str, Any] = dict(self.settings.pop("tracking", {}))
        self.config: ForecastConfig | None = None
        self.predictor: Predictor | None = None
        self.prepared: Prepared | None = None  # the data ``fit`` trained on, split as it was
        self.trained: TrainedModel | None = None
        self.table: pd.DataFrame | None = None  # ``fit``'s DataFrame, if it was given one
        self.model_uri: str | None = None  # where the model is logged or loaded from

    # -- fitting --------------------------------------------------------------------------------
    def prepare_data(
        self,
        data: Data | None = None,
        *,
        time_column: str | None = None,
        target: str | None = None,
        covariates: list[str] | None = None,
        future_covariates: list[str] | None = None,
        id_column: str | None = None,
    ) -> Prepared:
        """Validate the config with ``data`` and read it, split and windowed: every data problem
        (a column, a row, a gap) is said here, before any training. ``fit`` calls it; the CLI
        calls it first, so that a bad file leaves no MLflow run behind."""
        check_data_type(data)
        settings = copy.deepcopy(self.settings)
        table = data if isinstance(data, pd.DataFrame) else None
        source = FRAME_SOURCE if table is not None else None if data is None else str(data)
        given = data_settings(source if table is None else None, time_column, target, covariates,
                              future_covariates, id_column)  # fmt: skip
        if table is not None:
            given = {"dataset": None, "path": FRAME_SOURCE, **given}
        merge(settings, "data", given)
        if "data" not in settings:
            raise ConfigError("give the data: a DataFrame, a CSV/Parquet file or a bundled dataset's name")
        if table is not None:
            check_frame_columns(settings["data"])
        self.config = validated(settings)
        self.table = table
        self.prepared = prepare(load_from_config(self.config.data, table=table), self.config)
        return self.prepared

    def fit(
        self,
        data: Data | None = None,
        *,
        time_column: str | None = None,
        target: str | None = None,
        covariates: list[str] | None = None,
        future_covariates: list[str] | None = None,
        id_column: str | None = None,
        hooks: TrainingHooks | None = None,
    ) -> Forecaster:
        """Train on ``data`` (a DataFrame, with the time column as a column or as its index; a
        file; a bundled dataset; None: the config's, or what ``prepare_data`` read): early stopping
        and the intervals' calibration on validation, test left for ``evaluate``. ``covariates``:
        past covariate columns; ``future_covariates``: columns known ahead; ``id_column``: long
        format, one model across every series. ``hooks``: a logger, callbacks and checkpoints
        for Lightning (pipelines/train.py passes MLflow's). Returns the Forecaster, fitted."""
        if (
            data is not None
            or self.prepared is None
            or any(v is not None for v in (time_column, target, covariates, future_covariates, id_column))
        ):
            self.prepare_data(data, time_column=time_column, target=target, covariates=covariates,
                              future_covariates=future_covariates, id_column=id_column)  # fmt: skip
        assert self.config is not None and self.prepared is not None
        self.trained = train_model(self.config, self.prepared, **(hooks or TrainingHooks()).arguments())  # type: ignore[arg-type]
        self.predictor, self.model_uri = self.trained.predictor, None
        return self

    # -- using the model ------------------------------------------------------------------------
    def predict(
        self,
        data: Data | None = None,
        *,
        time_column: str | None = None,
        target: str | None = None,
        id_column: str | None = None,
    ) -> pd.DataFrame:
        """The next H steps after the end of ``data`` (of every series of a panel, by
        ``id_column``): one row per series and step, the timestamp, ``{target}_forecast`` and,
        where the model has intervals, ``{target}_q{level}`` (e.g. ``_q0.1`` and ``_q0.9``: the 80%
        interval), as `forecast predict` writes them. ``data`` None: the data the model was fit
        on. Series too short to forecast are left out, with why, in ``.attrs["skipped"]``."""
        predictor, loaded = self.history_for(data, time_column, target, id_column)
        frame, skipped = forecast_loaded(predictor, loaded)
        frame.attrs["skipped"] = skipped
        return frame

    def attention(
        self,
        data: Data | None = None,
        *,
        time_column: str | None = None,
        target: str | None = None,
        id_column: str | None = None,
    ) -> pd.DataFrame:
        """Where the forecast after the end of ``data`` reads from: the attention weights of an
        attention model, a row per forecast step (its timestamp) and a column per look-back step
        (its timestamp), each row summing to 1 (``forecaster/next_attention.py``); a panel's
        series stacked under their ids. ``data`` None: the data the model was fit on. What
        ``predict`` forecasts from the same data, and the service's ``return_attention``."""
        return next_attention(*self.history_for(data, time_column, target, id_column))

    def history_for(
        self, data: Data | None, time_column: str | None, target: str | None, id_column: str | None
    ) -> tuple[Predictor, LoadedSeries | LoadedPanel]:
        """The fitted model and the history it forecasts after (``predict``, ``attention``); a
        panel's members that break a rule left out, named in its ``skipped``."""
        predictor = self.fitted_predictor()
        check_predictable(predictor, "this model")
        data_config, table = self.data_for(data, time_column, target, id_column)
        return predictor, load_model_data(predictor, data_config, True, table)

    def evaluate(
        self,
        data: Data | None = None,
        *,
        time_column: str | None = None,
        target: str | None = None,
        id_column: str | None = None,
    ) -> pd.DataFrame:
        """The model's test metrics beside the naive and seasonal-naive baselines' on the same
        windows (one row each: ``model``, ``naive``, ``seasonal_naive``), and each one's selection
        MAE (what models are chosen by; test is only reported). ``data`` None: the data the model
        was fit on, split as in training (the figures `forecast train` prints); else ``data``,
        split the same way. ``.attrs``: the split, its windows, the interval coverage."""
        predictor = self.fitted_predictor()
        if data is None and self.prepared is not None and id_column is None:
            test = evaluate(predictor, self.prepared, "test")
            selection = evaluate_selection(predictor, self.prepared, predictor.config.split.folds)
        else:
            data_config, table = self.data_for(data, time_column, target, id_column)
            _, (test, selection) = evaluate_model(predictor, data_config, table, splits=("test", "selection"))
        return metrics_frame(test, selection)

    def log(
        self,
        experiment: str | None = None,
        *,
        register: str | None = None,
        alias: str | None = None,
        allow_worse_than_naive: bool | None = None,
        run_name: str | None = None,
        tracking_uri: str | None = None,
    ) -> LoggedModel:
        """Record the fitted model in MLflow as `forecast train` does (one run: config, data
        provenance, metrics beside the baselines, the pyfunc model; ``register``: a registered
        version, given ``alias`` only through the promotion gate). pipelines/ writes it: the only
        writer to MLflow tracking. ``tracking_uri``: default $MLFLOW_TRACKING_URI or
        sqlite:///mlflow.db, as the CLI's."""
        if self.predictor is None or self.prepared is None or self.trained is None:
            raise ConfigError("log a model this Forecaster fit (a loaded one is logged already)")
        given = {
            "experiment": experiment,
            "registered_model": register,
            "alias": alias,
            "allow_worse_than_naive": allow_worse_than_naive,
            "run_name": run_name,
        }
        tracking = {**self.tracking, **{k: v for k, v in given.items() if v is not None}}
        logged = log_to_mlflow(self, tracking, tracking_uri)
        self.model_uri = logged.model_uri
        return logged

    @classmethod
    def load(cls, model_uri: str, runtime: str = "auto") -> Forecaster:
        """A logged or registered model (``models:/NAME@ALIAS``, ``models:/NAME/3``, ``runs:/...``,
        ``models:/m-...`` or a local directory), ready to ``predict`` and ``evaluate``.
        ``runtime``: what runs the network: auto, onnx or torch (forecaster/runtime.py)."""
        from forecaster.model_uri import check_model_uri
        from forecaster.pyfunc import load_predictor

        check_model_uri(model_uri)
        predictor = load_predictor(model_uri).use_runtime(runtime)
        loaded = cls(config=predictor.config)
        loaded.config, loaded.predictor, loaded.model_uri = predictor.config, predictor, model_uri
        return loaded

    # -- what it holds --------------------------------------------------------------------------
    @property
    def lookback(self) -> int:
        return self.fitted_predictor().lookback

    @property
    def horizon(self) -> int:
        return self.fitted_predictor().horizon

    def fitted_predictor(self) -> Predictor:
        if self.predictor is None:
            raise ConfigError("fit the Forecaster first, or load one (Forecaster.load(model_uri))")
        return self.predictor

    def data_for(
        self, data: Data | None, time_column: str | None, target: str | None, id_column: str | None
    ) -> tuple[Any, pd.DataFrame | None]:
        """The data settings and rows ``predict`` and ``evaluate`` read: ``data`` with the model's
        own columns (a different time or target column named), or the model's own data."""
        predictor = self.fitted_predictor()
        check_data_type(data)
        if data is None and self.table is not None:  # the frame fit read: a panel's by its ids again
            data, id_column = self.table, id_column or predictor.config.data.id_column
        overrides = {} if id_column is None else {"id_column": id_column}
        if isinstance(data, pd.DataFrame):
            own_time, own_target = own_columns(predictor)
            overrides |= {"path": FRAME_SOURCE, "time_column": time_column or own_time,
                          "target": target or own_target}  # fmt: skip
            return data_config_for(predictor, overrides), data
        if data is not None:
            overrides |= data_settings(str(data), time_column, target)
        return data_config_for(predictor, overrides), None


# the config sections ``Forecaster(**sections)`` takes as mappings (``model`` has its own argument;
# ``tracking``: ``log``'s defaults, as a `forecast train` YAML's); ``intervals`` is a list of levels
MAPPING_SECTIONS = ("data", "split", "window", "train", "tracking")
LIST_SECTIONS = ("intervals",)


def merge_sections(settings: dict[str, Any], sections: Mapping[str, Any]) -> None:
    """``Forecaster``'s keyword arguments beyond its own, each a config section over ``settings``.
    A name that is no section is a misspelt argument (``lookbak=5``): said as such, not read as a
    section whose value is not a mapping."""
    for name, values in sections.items():
        if name in LIST_SECTIONS:
            settings[name] = values  # the config validates it, naming the field
        elif name not in MAPPING_SECTIONS:
            raise ConfigError(unknown_argument(name))
        elif not isinstance(values, Mapping):
            raise ConfigError(
                f"Forecaster({name}=...): the {name} section is a mapping of its settings, e.g. "
                f"{name}={{...}}, not {type(values).__name__} {values!r}"
            )
        else:
            merge(settings, name, dict(values))


def unknown_argument(name: str) -> str:
    """What ``Forecaster(name=...)`` is told: the closest argument, then every one it takes."""
    arguments = [
        p for p in inspect.signature(Forecaster.__init__).parameters if p not in ("self", "sections")
    ]
    sections = [*MAPPING_SECTIONS, *LIST_SECTIONS]
    return (
        f"Forecaster({name}=...): unknown argument{did_you_mean(name, [*arguments, *sections])} "
        f"(arguments: {', '.join(arguments)}; config sections: {', '.join(sections)})"
    )


def check_data_type(data: object) -> None:
    """``Data`` is a DataFrame, a file or a bundled dataset's name: anything else (an array, a
    Series, a list) would be read as a file name, its whole repr said "not found"."""
    if data is None or isinstance(data, pd.DataFrame | str | Path):
        return
    hint = (
        "series.to_frame() or series.reset_index() gives a DataFrame, with its index as a column"
        if isinstance(data, pd.Series)
        else "pd.DataFrame({time_column: timestamps, target: values}) gives one"
    )
    package = type(data).__module__.split(".")[0]
    kind = type(data).__name__ if package == "builtins" else f"{package}.{type(data).__name__}"
    raise ConfigError(
        f"data is a DataFrame, a CSV/Parquet file or a bundled dataset's name, not a {kind}: {hint}"
    )


def check_frame_columns(data: Mapping[str, Any]) -> None:
    """A DataFrame has no bundled dataset's columns to fall back on: its time column and target
    are named by ``fit``'s arguments (or the config's data section), said in those terms rather
    than the config's words for a file."""
    missing = [name for name in ("time_column", "target") if data.get(name) is None]
    if missing:
        named = " and ".join(f"`{name}`" for name in missing)
        raise ConfigError(
            f"a DataFrame needs {named}: fit(df, time_column=..., target=...) (the time column may be "
            "df's index, named as time_column), or data={'time_column': ..., 'target': ...}"
        )


def initial_settings(config: str | Path | Mapping[str, Any] | ForecastConfig | None) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, ForecastConfig):
        return config.model_dump(mode="json", exclude_unset=False)
    if isinstance(config, str | Path):
        return read_yaml(config)
    return copy.deepcopy(dict(config))


def validated(settings: dict[str, Any]) -> ForecastConfig:
    from pydantic import ValidationError

    from forecaster.options import config_error

    try:
        return ForecastConfig.model_validate(settings)
    except ValidationError as exc:
        raise config_error(exc, "Forecaster settings") from None


def metrics_frame(test: Evaluation, selection: Evaluation) -> pd.DataFrame:
    """One row per forecaster (the model first), test metrics and the selection MAE."""
    rows = {
        name: {**metrics, "selection_mae": selection.metrics[name]["mae"]}
        for name, metrics in test.metrics.items()
    }
    frame = pd.DataFrame.from_dict(rows, orient="index").rename_axis("forecaster")
    frame.attrs = {
        "split": "test",
        "windows": test.windows,
        "skill_vs_naive": test.skill("mae", "naive"),
        "intervals": {
            level: {"coverage": r["coverage"], "width": r["width"]} for level, r in test.intervals.items()
        },
    }
    return frame.loc[[MODEL, *(name for name in frame.index if name != MODEL)]]


def log_to_mlflow(forecaster: Forecaster, tracking: dict[str, Any], tracking_uri: str | None) -> LoggedModel:
    """Hand the fitted model to pipelines/, the one writer to MLflow tracking (docs/layout.md):
    imported here, when asked, so that forecaster/ stays free of it otherwise (tests/test_layers.py
    names this function as the one crossing)."""
    from pipelines.train import log_fitted

    outcome = log_fitted(forecaster, tracking, tracking_uri)
    promotion = outcome.promotion
    return LoggedModel(
        run_id=outcome.run_id,
        model_uri=outcome.model_uri,
        registered_name=outcome.registered_name,
        registered_version=outcome.registered_version,
        promoted=None if promotion is None else promotion.promoted,
        reason=None if promotion is None else promotion.reason,
        metrics=outcome.metrics,
    )
