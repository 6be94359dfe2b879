"""Recurrent forecasting networks sharing one contract:
``forward(past, future=None, target=None, teacher_forcing=0.0) -> Forecast``."""

from forecaster.models.factory import build_network
from forecaster.models.output import Forecast

__all__ = ["Forecast", "build_network"]
