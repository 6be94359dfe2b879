"""The forms of a registered model's URI that the service and the CLI both read: an alias
(``models:/NAME@ALIAS``, which can move) and a version (``models:/NAME/3``, which cannot)."""

from __future__ import annotations

import re

DEFAULT_MODEL_URI = "models:/demo-forecaster@champion"  # what `make demo` registers

ALIAS_URI = re.compile(r"^models:/(?P<name>[^/@]+)@(?P<alias>[^/]+)$")
VERSION_URI = re.compile(r"^models:/(?P<name>[^/@]+)/(?P<version>\d+)$")
LOGGED_MODEL_URI = re.compile(r"^models:/m-[0-9a-f]+$")  # what a training logs (MLflow 3)
RUN_URI = re.compile(r"^runs:/[^/]+/.+$")  # runs:/RUN_ID/ARTIFACT_PATH
# the schemes MLflow reads models from (its artifact repositories, mlflow 3.17); a local path has none
SCHEMES = {
    "abfss", "b2", "dbfs", "file", "ftp", "gs", "hdfs", "http", "https", "mlflow-artifacts", "models",
    "r2", "runs", "s3", "sftp", "viewfs", "wasbs",
}  # fmt: skip
SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+):")  # two letters at least: not C:\
FORMS = "models:/NAME@ALIAS, models:/NAME/VERSION, models:/m-ID (a logged model) or runs:/RUN_ID/PATH"


def check_model_uri(uri: str) -> None:
    """Refuse a URI no model can be loaded from, as the user wrote it, before MLflow is imported
    (seconds; a minute on a busy machine) to say the same: the registry forms, a logged model,
    a run's artifact, another scheme MLflow reads, or a local directory that exists."""
    from pathlib import Path

    from forecaster.errors import ConfigError

    scheme = SCHEME.match(uri)
    if scheme is None:
        if not Path(uri).exists():
            raise ConfigError(f"--model-uri {uri!r}: no such directory, and not a URI ({FORMS})")
        return
    name = scheme["scheme"].lower()
    if name not in SCHEMES:
        raise ConfigError(f"--model-uri {uri!r}: unknown scheme {name + ':'!r}; expected {FORMS}")
    if name == "models" and not any(f.match(uri) for f in (ALIAS_URI, VERSION_URI, LOGGED_MODEL_URI)):
        stage = re.match(r"^models:/[^/@]+/[A-Za-z]\w*$", uri)  # models:/NAME/latest, .../Production
        if stage is None:
            raise ConfigError(f"--model-uri {uri!r}: not a model URI; expected {FORMS}")
    if name == "runs" and not RUN_URI.match(uri):
        raise ConfigError(f"--model-uri {uri!r}: a run's model is runs:/RUN_ID/PATH; expected {FORMS}")
