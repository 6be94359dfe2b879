"""The forms of a registered model's URI that the service and the CLI both read: an alias
(``models:/NAME@ALIAS``, which can move) and a version (``models:/NAME/3``, which cannot)."""

from __future__ import annotations

import re

DEFAULT_MODEL_URI = "models:/demo-forecaster@champion"  # what `make demo` registers

ALIAS_URI = re.compile(r"^models:/(?P<name>[^/@]+)@(?P<alias>[^/]+)$")
VERSION_URI = re.compile(r"^models:/(?P<name>[^/@]+)/(?P<version>\d+)$")
