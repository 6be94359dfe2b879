"""The ML core, and its Python API: ``from forecaster import Forecaster`` (forecaster/api.py,
docs/python-api.md). Imported on first use, so that ``import forecaster.errors`` (the CLI's
fast checks) does not pay for torch and Lightning."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forecaster.api import Forecaster, LoggedModel

__all__ = ["Forecaster", "LoggedModel"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from forecaster import api

        return getattr(api, name)
    raise AttributeError(f"module 'forecaster' has no attribute {name!r}")
