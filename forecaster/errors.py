"""Errors a user can act on: each names what is wrong and where."""


class ForecasterError(Exception):
    """Base class for errors that should reach the user as one clear line, not a traceback."""


class DataError(ForecasterError):
    """A data file or column cannot be used as given (names file, column, row or timestamp)."""


class ConfigError(ForecasterError):
    """A setting is invalid or inconsistent with the data (names the field)."""


class ModelLoadError(ForecasterError):
    """No model can be loaded from the URI given (names it, and MLflow's reason)."""
