"""Errors a user can act on: each names what is wrong and where."""

from collections.abc import Iterable
from difflib import get_close_matches

# said by every door that asks a model for its attention weights (the Python API, the service)
NO_ATTENTION = "this model has no attention (only seq2seq models with model.attention: bahdanau have one)"


class ForecasterError(Exception):
    """Base class for errors that should reach the user as one clear line, not a traceback."""


class DataError(ForecasterError):
    """A data file or column cannot be used as given (names file, column, row or timestamp)."""


class ConfigError(ForecasterError):
    """A setting is invalid or inconsistent with the data (names the field)."""


class ModelLoadError(ForecasterError):
    """No model can be loaded from the URI given (names it, and MLflow's reason)."""


def did_you_mean(given: str, choices: Iterable[str]) -> str:
    """``"; did you mean `lookback`?"`` for the choice closest to a misspelling, else nothing:
    the fix in the error itself, for the typo that caused it."""
    close = get_close_matches(given, list(choices), n=1)
    return f"; did you mean `{close[0]}`?" if close else ""
