"""The MLflow pyfunc that packs a trained Predictor (network weights, config, fitted scaler,
window sizes, feature names, and the network's ONNX export where it was verified), so
``mlflow.pyfunc.load_model(...).predict(raw windows)`` and ``mlflow models serve`` return forecasts
in original units; ``INFERENCE_RUNTIME`` picks what runs the network (``forecaster/runtime.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow.pyfunc
import numpy as np
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.pyfunc import PythonModel, PythonModelContext
from mlflow.types.schema import ColSpec, ParamSchema, ParamSpec, Schema, TensorSpec

from forecaster.data.clock import instants_on_clock
from forecaster.predictor import Predictor
from forecaster.runtime import runtime_from_environment

ARTIFACT_KEY = "predictor"


class ForecastPyfunc(PythonModel):
    """Input: raw windows, (N, L) for a univariate model or (N, L, F) (feature order as in the
    model's metadata); for calendar models a dict with ``values`` and ``timestamps`` (unix
    seconds, (N, L); on a model whose clock is a zone, instants converted to its wall time), and
    for models with future covariates ``future`` (N, H, Kf), their values over the forecast steps
    (order as in the metadata's ``future_covariates``). Many series per call: one window each; a
    panel model scales each window by itself. Output: (N, H) forecasts in the target's units."""

    predictor: Predictor

    def load_context(self, context: PythonModelContext) -> None:
        self.predictor = Predictor.load(context.artifacts[ARTIFACT_KEY], runtime_from_environment())

    def predict(
        self,
        context: PythonModelContext,
        model_input: np.ndarray,
        params: dict[str, Any] | None = None,
    ) -> np.ndarray | dict[str, np.ndarray]:
        """(N, H) forecasts; with ``params={"intervals": True}`` a dict: ``forecast`` and one
        (N, H) array per quantile level ("0.1", "0.9", ...) where the model has intervals.

        ``model_input`` is annotated ``np.ndarray``, one of the hints MLflow accepts without
        inferring a schema from it: the logged signature (``signature_for``) stays the contract,
        and MLflow stops warning that ``predict`` has no type hints. Calendar models receive a
        dict of arrays (``values``, ``timestamps``) as the signature says; a DataFrame also works."""
        values, timestamps, future = _split_input(model_input)
        if timestamps is not None:  # unix seconds are instants: on a zone's clock, its wall time
            timestamps = instants_on_clock(timestamps, self.predictor.clock)
        known: dict[str, Any] = (
            {} if future is None else {"future": future}
        )  # the call stays as it was without
        prediction = self.predictor.predict(values, timestamps, **known)
        if not (params or {}).get("intervals"):
            return prediction.mean
        return {"forecast": prediction.mean, **{f"{q:g}": v for q, v in prediction.quantiles.items()}}


def _split_input(model_input: Any) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    if isinstance(model_input, dict):
        timestamps = model_input.get("timestamps")
        if timestamps is not None:
            timestamps = pd.to_datetime(np.asarray(timestamps).reshape(-1), unit="s").values.reshape(
                np.shape(timestamps)
            )
        future = model_input.get("future")
        future = None if future is None else np.asarray(future, dtype=np.float64)
        return np.asarray(model_input["values"], dtype=np.float64), timestamps, future
    if isinstance(model_input, pd.DataFrame):
        return model_input.to_numpy(dtype=np.float64), None, None
    return np.asarray(model_input, dtype=np.float64), None, None


def signature_for(predictor: Predictor) -> ModelSignature:
    lookback, features = predictor.lookback, len(predictor.features)
    shape = (-1, lookback) if features == 1 else (-1, lookback, features)
    outputs = Schema([TensorSpec(np.dtype(np.float64), (-1, predictor.horizon))])
    params = ParamSchema([ParamSpec("intervals", "boolean", False)])
    if not predictor.uses_calendar and not predictor.future_covariates:
        inputs = Schema([TensorSpec(np.dtype(np.float64), shape)])
        return ModelSignature(inputs=inputs, outputs=outputs, params=params)
    specs: list[ColSpec | TensorSpec] = [TensorSpec(np.dtype(np.float64), shape, name="values")]
    if predictor.uses_calendar:
        specs.append(TensorSpec(np.dtype(np.int64), (-1, lookback), name="timestamps"))
    if predictor.future_covariates:
        ahead = (-1, predictor.horizon, len(predictor.future_covariates))
        specs.append(TensorSpec(np.dtype(np.float64), ahead, name="future"))
    return ModelSignature(inputs=Schema(specs), outputs=outputs, params=params)


def input_example_for(
    predictor: Predictor,
    past: np.ndarray,
    past_times: np.ndarray | None,
    future: np.ndarray | None = None,
) -> np.ndarray | dict[str, np.ndarray]:
    """One raw window in the signature's layout (``future``: its (1, H, Kf) future covariates)."""
    values = past[:1, :, 0] if len(predictor.features) == 1 else past[:1]
    if not predictor.uses_calendar and not predictor.future_covariates:
        return values
    example = {"values": values}
    if predictor.uses_calendar:
        example["timestamps"] = past_times[:1].astype("datetime64[s]").astype(np.int64)
    if predictor.future_covariates:
        example["future"] = future[:1]
    return example


def pip_requirements() -> list[str]:
    """What a logged model says it needs, at the versions that made it. MLflow's is the imported
    package's own version: where only mlflow-skinny is installed (as on the accelerator machine,
    deploy/device/wheels.txt) there is no `mlflow` distribution to ask, and the version is the same."""
    from importlib.metadata import version

    def installed(package: str) -> str:
        return mlflow.__version__ if package == "mlflow" else version(package)

    packages = ["torch", "pytorch-lightning", "pandas", "numpy", "mlflow", "pydantic", "onnxruntime"]
    return [f"{p}=={installed(p).split('+')[0]}" for p in packages]  # drop local tags (+cpu)


def code_paths() -> list[str]:
    """The code a logged model carries (MLflow's ``code_paths``): this package, copied into the
    model's ``code/`` folder and put on ``sys.path`` when it loads, so that
    ``mlflow.pyfunc.load_model`` works where this project is not installed (an environment with
    the requirements above only). forecaster/ imports none of this repository's other packages
    (tests/test_layers.py), so it is all the model needs."""
    return [str(Path(__file__).resolve().parent)]


def save_predictor_dir(predictor: Predictor, directory: str | Path) -> str:
    return str(predictor.save(Path(directory) / ARTIFACT_KEY))


def load_predictor(model_uri: str) -> Predictor:
    """The Predictor inside a logged or registered model (any URI MLflow reads)."""
    from mlflow.exceptions import MlflowException

    from forecaster.errors import ModelLoadError

    try:
        model = mlflow.pyfunc.load_model(model_uri)
    except (MlflowException, OSError) as exc:
        raise ModelLoadError(f"cannot load model {model_uri}: {exc}") from None
    return model.unwrap_python_model().predictor
