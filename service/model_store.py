"""The model being served: resolved from the registry, loaded once, moved to the device, warmed
up, and swapped atomically when the alias moves. In-flight batches keep the object they started
with, so they finish on the old version."""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import mlflow
import numpy as np
import torch

from forecaster.model_uri import ALIAS_URI, VERSION_URI
from forecaster.predictor import Prediction, Predictor
from infra.redaction import redact
from service.example_window import example_window
from service.registry_store import NoStoreError, check_store, no_alias_reason, no_model_reason

log = logging.getLogger("service.model")

NO_MODEL = "the registry has no model at the configured URI"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class ModelRef:
    """What a URI points at right now: the concrete version behind an alias."""

    uri: str  # as configured
    load_uri: str  # pinned: models:/NAME/VERSION where there is a registry entry
    name: str | None = None  # registered models only
    version: str | None = None
    run_id: str | None = None
    shown_uri: str = field(init=False)  # load_uri with any credentials redacted: what we tell
    logged_as: tuple[str, str, str] = field(init=False)  # (model name, version, alias) in the forecast log

    def __post_init__(self) -> None:
        self.shown_uri = redact(self.load_uri) or ""
        alias = ALIAS_URI.match(self.uri)  # once per model, not per logged request
        name = self.name or self.shown_uri[:200]
        self.logged_as = (name, self.version or "", alias["alias"] if alias else "")


@dataclass
class LoadedModel:
    ref: ModelRef
    predictor: Predictor
    device: str
    training_metrics: dict[str, float] = field(default_factory=dict)
    runtime: str = "torch"  # what runs the network (forecaster/runtime.py): torch or onnx
    runtime_note: str | None = None  # why it is torch where ONNX was asked for (or auto's pick)
    loaded_at: float = field(default_factory=time.time)

    def predict(
        self,
        values: np.ndarray,
        timestamps: np.ndarray | None,
        attention: bool,
        future: np.ndarray | None = None,
        series_ids: list[str | None] | None = None,
    ) -> Prediction:
        known: dict[str, Any] = {} if future is None else {"future": future}  # as it was without
        if series_ids is not None:
            known["series_ids"] = series_ids
        return self.predictor.predict(values, timestamps, return_attention=attention, **known)


def pick_device(setting: str) -> str:
    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if setting.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"DEVICE={setting} but CUDA is not available on this machine")
    return setting


def resolve(uri: str, client: mlflow.MlflowClient) -> ModelRef:
    alias = ALIAS_URI.match(uri)
    if alias:
        version = client.get_model_version_by_alias(alias["name"], alias["alias"])
        return ModelRef(
            uri,
            f"models:/{alias['name']}/{version.version}",
            alias["name"],
            str(version.version),
            version.run_id,
        )
    pinned = VERSION_URI.match(uri)
    if pinned:
        version = client.get_model_version(pinned["name"], pinned["version"])
        return ModelRef(uri, uri, pinned["name"], str(version.version), version.run_id)
    return ModelRef(uri, uri)  # a runs:/, file or s3 URI: no registry name


def training_metrics(client: mlflow.MlflowClient, run_id: str | None) -> dict[str, Any]:
    if not run_id:
        return {}
    metrics = client.get_run(run_id).data.metrics
    keep = ("test_", "naive_test_", "seasonal_naive_test_", "best_val_")
    return {k: v for k, v in sorted(metrics.items()) if k.startswith(keep) and k != "test_mae_by_step"}


class ReloadBusyError(Exception):
    """Another load is still running (the registry may be hanging); this one did not wait."""


def describe_failure(exc: BaseException) -> str:
    """A load failure in words fit for a public endpoint: no paths or credentials, and no URIs but
    the two an operator configured, when the model is not there (ModelStore.failed adds them)."""
    text = f"{type(exc).__name__} {exc}".lower()
    if isinstance(exc, ReloadBusyError):
        return "a model load is still in progress"
    if isinstance(exc, TimeoutError) or "timed out" in text or "timeout" in text:
        return "the model registry did not answer in time"
    if any(
        word in text for word in ("connection", "max retries", "unreachable", "name or service", "refused")
    ):
        return "the model registry could not be reached"
    if isinstance(exc, NoStoreError) or any(
        words in text for words in ("resource_does_not_exist", "not found", "does not exist")
    ):
        return NO_MODEL
    return "the model could not be loaded"


@dataclass
class LoadStatus:
    """What the last attempts to resolve or load the model said, for readiness and operators."""

    last_attempt: float | None = None
    last_success: float | None = None  # last time the registry answered (loaded or unchanged)
    failures: int = 0  # consecutive
    reason: str | None = None  # in words, public
    error: str | None = None  # redacted details, for the admin status only


class ModelStore:
    """Holds the current LoadedModel; loading is serialised, reading is a plain attribute read.

    Every call to the registry is bounded: MLflow's HTTP timeout and retries come from the service
    settings (see ``bound_registry_calls``), and a load that finds another one still running gives
    up after ``lock_timeout`` seconds instead of queueing behind it."""

    def __init__(
        self,
        tracking_uri: str,
        model_uri: str,
        device: str,
        dtype: str,
        lock_timeout: float = 1.0,
        runtime: str = "auto",
    ) -> None:
        self.tracking_uri = tracking_uri
        self.runtime = runtime  # INFERENCE_RUNTIME
        self.model_uri = model_uri
        self.device = pick_device(device)
        self.dtype = DTYPES[dtype] if self.device.startswith("cuda") else torch.float32
        self.current: LoadedModel | None = None
        self.status = LoadStatus()
        self.lock_timeout = lock_timeout
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self.current is not None

    def client(self) -> mlflow.MlflowClient:
        return mlflow.MlflowClient(self.tracking_uri)

    def load(self, ref: ModelRef) -> LoadedModel:
        mlflow.set_tracking_uri(self.tracking_uri)
        model = mlflow.pyfunc.load_model(ref.load_uri)
        predictor: Predictor = model.unwrap_python_model().predictor
        predictor.to(self.device, self.dtype).use_runtime(self.runtime)
        if predictor.runtime_note and self.runtime == "onnx":
            log.warning(
                "INFERENCE_RUNTIME=onnx but %s serves with torch: %s", ref.shown_uri, predictor.runtime_note
            )
        loaded = LoadedModel(
            ref,
            predictor,
            self.device,
            training_metrics(self.client(), ref.run_id),
            runtime=predictor.runtime.name,
            runtime_note=predictor.runtime_note,
        )
        self.warm_up(loaded)
        return loaded

    @staticmethod
    def warm_up(loaded: LoadedModel) -> None:
        """One forward pass on two copies of the example window (the one /docs shows), so the first
        caller does not pay for lazy initialisation, and a model that cannot run never gets
        swapped in."""
        window = example_window(loaded.predictor)
        times = None
        if window.timestamps is not None:  # as requests give them (service/validation.py)
            times = np.stack([window.timestamps.astype("datetime64[ns]")] * 2)
        future = None if window.future is None else np.stack([window.future] * 2)
        out = loaded.predict(np.stack([window.values] * 2), times, attention=True, future=future)
        if not np.isfinite(out.mean).all():
            raise RuntimeError("warm-up forecast is not finite")

    def refresh(self) -> tuple[bool, str]:
        """Load what the URI points at now if it differs from what is served. Returns (changed,
        message); on failure the old model keeps serving and the error is kept, redacted."""
        if not self._lock.acquire(timeout=self.lock_timeout):
            raise ReloadBusyError("another model load is still running")
        try:
            self.status.last_attempt = time.time()
            try:
                check_store(self.tracking_uri)  # before MLflow, which would create the file
                ref = resolve(self.model_uri, self.client())
                current = self.current
                if current is not None and current.ref.load_uri == ref.load_uri:
                    self._succeeded()
                    return False, f"already serving {ref.shown_uri}"
                loaded = self.load(ref)
            except Exception as exc:  # the registry or the artifact may be broken: keep serving
                self.failed(exc)
                raise
            self.current = loaded  # atomic swap: requests already batched keep the old object
            out_of_the_collectors_way()
            self._succeeded()
            log.info(
                "serving %s (version %s) on %s with %s",
                ref.shown_uri,
                ref.version,
                self.device,
                loaded.runtime,
            )
            return True, f"now serving {ref.shown_uri}"
        finally:
            self._lock.release()

    def failed(self, exc: BaseException) -> None:
        """Record a failed attempt (also called for one abandoned at its deadline)."""
        self.status.failures += 1
        self.status.reason = describe_failure(exc)
        if self.status.reason == NO_MODEL:  # the operator's mistake: say where we looked, and why
            self.status.reason = self.missing_model_reason(exc)
        self.status.error = redact(f"{type(exc).__name__}: {exc}")
        log.error("could not load %s: %s", redact(self.model_uri), self.status.error)

    def missing_model_reason(self, exc: BaseException) -> str:
        """The model at the URI is not there: an alias the registered model lacks (MLflow's
        "Registered model alias NAME not found"), or no model at all, or no store."""
        alias = ALIAS_URI.match(self.model_uri)
        if alias is not None and "registered model alias" in str(exc).lower():
            return no_alias_reason(self.model_uri, self.tracking_uri, alias["name"], alias["alias"])
        return no_model_reason(self.model_uri, self.tracking_uri, isinstance(exc, NoStoreError))

    def _succeeded(self) -> None:
        self.status.last_success = time.time()
        self.status.failures = 0
        self.status.reason = self.status.error = None


def out_of_the_collectors_way() -> None:
    """Move every object alive now (the model, torch, MLflow, pandas: about 450,000 of them) into
    the collector's permanent generation. They live as long as the process, yet each full
    collection walked them all: 240 ms with the event loop stopped, which the forecast log's
    queued records (they outlive a young collection) set off every few seconds under load, and
    which made the p99 latency. Frozen, a full collection walks only what came after.

    Once per load, the frozen objects are thawed and collected first, so that the model swapped
    out (and any garbage cycle) is freed rather than kept forever: one such pause per swap."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def not_ready_reason(store: ModelStore, public: bool = False) -> str:
    """Why no model is served, in words (never the raw error: it may quote URIs and paths).
    ``public``: for an unauthenticated caller of a service that has an API key, which learns the
    reason but not where the model and the store live (host, database, file path): those are
    for the log and for callers holding the key."""
    reason = store.status.reason or "the model is still loading"
    if public:
        for location, named in (
            (redact(store.model_uri), "the configured MODEL_URI"),
            (redact(store.tracking_uri), "the configured tracking store"),
        ):
            reason = reason.replace(location, named)
    return f"no model is loaded yet: {reason}; retrying"


def bound_registry_calls(timeout_s: int, retries: int) -> None:
    """MLflow reads its HTTP timeout and retry policy from the environment at each call: without
    this a dead tracking server holds a load for minutes (120 s timeout x 7 retries with backoff)."""
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(timeout_s)
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(retries)
    os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] = "1"
