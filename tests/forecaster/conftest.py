import pytest

from forecaster.config import ForecastConfig, ModelConfig


def tiny_gru_config(**train) -> ForecastConfig:
    """A one-layer GRU of 8 units on Melbourne's temperatures (L=14, H=4): a fit in seconds, for
    tests of how training behaves rather than of what it learns."""
    return ForecastConfig.model_validate(
        {
            "data": {"dataset": "melbourne-temp"},
            "window": {"lookback": 14, "horizon": 4},
            "model": {"cell": "gru", "hidden_size": 8, "layers": 1},
            "train": {"progress_bar": False, **train},
            "intervals": [],
        }
    )


NETWORKS = {
    "rnn": dict(cell="rnn"),
    "lstm": dict(cell="lstm"),
    "gru": dict(cell="gru"),
    "bi-rnn": dict(cell="rnn", bidirectional=True),
    "bi-lstm": dict(cell="lstm", bidirectional=True),
    "bi-gru": dict(cell="gru", bidirectional=True),
    "seq2seq": dict(architecture="seq2seq", cell="gru", attention="none"),
    "seq2seq-attention": dict(architecture="seq2seq", cell="lstm", attention="bahdanau"),
    "seq2seq-bi-attention": dict(
        architecture="seq2seq", cell="gru", attention="bahdanau", bidirectional=True
    ),
    "seq2seq-direct": dict(architecture="seq2seq", decoder="direct", cell="gru", attention="none"),
    "seq2seq-direct-bi-attention": dict(
        architecture="seq2seq", decoder="direct", cell="lstm", attention="bahdanau", bidirectional=True
    ),
    "seq2seq-direct-attention-quantiles": dict(
        architecture="seq2seq", decoder="direct", attention="bahdanau", quantiles=[0.1, 0.5, 0.9]
    ),
    "lstm-segments": dict(cell="lstm", segment_length=4),
    "gru-highway": dict(cell="gru", highway=6),
    "seq2seq-direct-attention-highway": dict(
        architecture="seq2seq", decoder="direct", attention="bahdanau", highway=6
    ),
    "lstm-quantiles": dict(cell="lstm", quantiles=[0.1, 0.5, 0.9]),
    "seq2seq-attention-quantiles": dict(
        architecture="seq2seq", attention="bahdanau", quantiles=[0.1, 0.5, 0.9]
    ),
}


@pytest.fixture(params=sorted(NETWORKS))
def model_config(request) -> ModelConfig:
    return ModelConfig(hidden_size=16, layers=2, dropout=0.0, **NETWORKS[request.param])
