"""Build the configured network for given input sizes."""

from __future__ import annotations

from typing import Any

from torch import nn

from forecaster.config import ModelConfig
from forecaster.models.level import LevelNormalized
from forecaster.models.recurrent import RecurrentForecaster
from forecaster.models.seq2seq import Seq2SeqForecaster
from forecaster.models.series_embedding import SeriesEmbedded
from forecaster.models.step_attention import CalendarColumns


def build_network(
    config: ModelConfig,
    series_features: int,
    calendar_features: int,
    horizon: int,
    future_covariates: int = 0,
    series_count: int = 0,
    lookback: int | None = None,
    season: int = 1,
) -> nn.Module:
    """``series_features`` F (target first) plus ``calendar_features`` K make the input width; the
    forecast steps see ``future_covariates`` Kf then the K calendar features: (B, H, Kf+K). With
    ``config.series_embedding`` E, a panel's ``series_count`` series each get a learned vector,
    appended to both (``series_embedding.py``). A seq2seq model with the `steps` attention layout
    also needs the ``lookback`` L, and uses the data's ``season`` (its seasonal period,
    forecaster/data/frequency.py) to compare the steps' positions."""
    embedded = config.series_embedding if series_count else 0
    common: dict[str, Any] = dict(
        input_size=series_features + calendar_features + embedded,
        horizon=horizon,
        future_size=future_covariates + calendar_features + embedded,
        cell=config.cell,
        hidden_size=config.hidden_size,
        layers=config.layers,
        dropout=config.dropout,
        bidirectional=config.bidirectional,
        quantiles=config.quantiles,
    )
    core: nn.Module
    if config.architecture == "seq2seq":
        core = Seq2SeqForecaster(
            **common,
            attention=config.attention,
            decoder=config.decoder,
            segment_length=config.segment_length,
            highway=config.highway,
            attention_layout=config.attention_layout,
            attention_heads=config.attention_heads,
            attention_values=config.attention_values,
            attention_retrieves_calendar=config.attention_retrieves_calendar,
            attention_lag_scale=config.attention_lag_scale,
            lookback=lookback,
            season=season,
            calendar=CalendarColumns(series_features, future_covariates, calendar_features)
            if calendar_features
            else None,
        )
    else:
        core = RecurrentForecaster(**common, segment_length=config.segment_length, highway=config.highway)
    network = LevelNormalized(core, config.level_norm, series_features)
    return SeriesEmbedded(network, series_count, embedded, horizon) if embedded else network
