"""The tracking store the service reads its model from, looked at before MLflow opens it.

MLflow creates a SQLite store it is pointed at (a 954 kB empty ``mlflow.db``), so `forecast serve`
started in the wrong folder would leave a file behind and then say only that the registry had no
model. The file is checked first, and a missing model is explained: which URI, which store, and how
a model gets there."""

from __future__ import annotations

from infra.database_urls import missing_sqlite_store
from infra.redaction import redact


class NoStoreError(LookupError):
    """The SQLite tracking store does not exist: nothing was ever trained into it."""


def check_store(tracking_uri: str) -> None:
    """Raises NoStoreError, without creating anything, when a SQLite store's file is missing."""
    path = missing_sqlite_store(tracking_uri)
    if path is not None:
        raise NoStoreError(f"the tracking store {path.resolve()} does not exist")


def no_model_reason(model_uri: str, tracking_uri: str, store_missing: bool) -> str:
    """Why there is nothing to serve, naming the URI and the store (redacted) and the way out."""
    store = f"the tracking store {redact(tracking_uri)}"
    if store_missing:
        store += ", which does not exist (nothing was trained into it)"
    return (
        f"no model at {redact(model_uri)} in {store}: train one with "
        "`forecast train ... --register NAME` into that store, or run `make demo`"
    )


def no_alias_reason(model_uri: str, tracking_uri: str, name: str, alias: str) -> str:
    """Why there is nothing to serve when the registered model exists but the alias does not
    (MLflow: "Registered model alias ... not found"): training another model would not help."""
    return (
        f"the registered model {name!r} has no alias {alias!r} ({redact(model_uri)} in the tracking "
        f"store {redact(tracking_uri)}): point it at a version with `forecast promote --name {name} "
        f"--version N --alias {alias}`, or serve a version (models:/{name}/N)"
    )
