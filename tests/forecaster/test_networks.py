"""Every network: shapes, learning one batch, determinism, attention weights, save/load."""

import json

import numpy as np
import pytest
import torch

from forecaster.config import ForecastConfig
from forecaster.data.scaling import StandardScaler
from forecaster.models import build_network
from forecaster.predictor import Predictor
from tests.forecaster.conftest import NETWORKS

B, L, H, F, K = 8, 12, 5, 3, 4
HOURLY = 24  # the seasonal period of the saved predictors' frequency, "h"


def batch(seed: int = 0, calendar: bool = True):
    g = torch.Generator().manual_seed(seed)
    past = torch.randn(B, L, F + (K if calendar else 0), generator=g)
    future = torch.randn(B, H, K, generator=g) if calendar else None
    target = torch.randn(B, H, generator=g)
    return past, future, target


@pytest.mark.parametrize("calendar", [False, True])
def test_output_shapes(model_config, calendar):
    network = build_network(model_config, F, K if calendar else 0, H, lookback=L)
    past, future, target = batch(calendar=calendar)
    out = network(past, future)
    assert out.mean.shape == (B, H)
    if model_config.architecture == "seq2seq" and model_config.attention == "bahdanau":
        assert out.attention.shape == (B, H, L)
    else:
        assert out.attention is None


@pytest.mark.parametrize("decoder", ["autoregressive", "direct"])
def test_attention_weights_are_a_distribution_over_encoder_positions(decoder):
    from forecaster.config import ModelConfig

    config = ModelConfig(architecture="seq2seq", attention="bahdanau", hidden_size=16, decoder=decoder)
    out = build_network(config, F, K, H, lookback=L)(*batch()[:2])
    assert (out.attention >= 0).all()
    torch.testing.assert_close(out.attention.sum(-1), torch.ones(B, H))


def test_overfits_one_small_batch(model_config):
    torch.manual_seed(0)
    network = build_network(model_config, F, K, H, lookback=L)
    past, future, target = batch()
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-2)
    first = None
    for _ in range(150):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(network(past, future, target, 0.5).mean, target)
        loss.backward()
        optimizer.step()
        first = first if first is not None else loss.item()
    network.eval()
    final = torch.nn.functional.mse_loss(network(past, future).mean, target).item()
    assert final < 0.1 * first, (first, final)


def test_same_seed_same_output(model_config):
    outputs = []
    for _ in range(2):
        torch.manual_seed(123)
        network = build_network(model_config, F, K, H, lookback=L).eval()
        outputs.append(network(*batch()[:2]).mean)
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0, atol=0)


def test_save_load_gives_the_same_numbers(model_config, tmp_path):
    config = ForecastConfig.model_validate(
        {
            "data": {
                "path": "x.csv",
                "time_column": "t",
                "target": "y",
                "calendar_features": False,
            },
            "window": {"lookback": L, "horizon": H},
            "model": model_config.model_dump(),
            "train": {"loss": "quantile" if model_config.quantiles else "mse"},
        }
    )
    torch.manual_seed(0)
    network = build_network(config.model, F, 0, H, lookback=L, season=HOURLY)
    scaler = StandardScaler(mean=np.array([10.0, 0.0, 5.0]), std=np.array([2.0, 1.0, 3.0]))
    predictor = Predictor(network, config, scaler, ["y", "a", "b"], "h")
    windows = np.random.default_rng(0).normal(10, 2, size=(6, L + 3, F))  # longer than L: cut
    before = predictor.predict(windows, return_attention=True)
    loaded = Predictor.load(predictor.save(tmp_path / "model"))
    after = loaded.predict(windows, return_attention=True)
    np.testing.assert_array_equal(before.mean, after.mean)
    assert before.quantiles.keys() == after.quantiles.keys()
    for level in before.quantiles:
        np.testing.assert_array_equal(before.quantiles[level], after.quantiles[level])
    if before.attention is not None:
        np.testing.assert_array_equal(before.attention, after.attention)
    with pytest.raises(ValueError, match="at least 12 steps"):
        predictor.predict(windows[:, :4])


def test_teacher_forcing_changes_training_output_only_for_seq2seq():
    from forecaster.config import ModelConfig

    config = ModelConfig(architecture="seq2seq", attention="none", hidden_size=16, dropout=0.0)
    torch.manual_seed(0)
    network = build_network(config, F, 0, H, lookback=L)
    past, _, target = batch(calendar=False)
    free = network(past).mean
    forced = network(past, None, target, teacher_forcing=1.0).mean
    assert torch.equal(free[:, 0], forced[:, 0])  # step 1 has no previous prediction to replace
    assert not torch.allclose(free[:, 1:], forced[:, 1:])


def direct_seq2seq(attention: str = "bahdanau", **extra):
    """The bare direct-decoder Seq2SeqForecaster (no level normalisation around it)."""
    from forecaster.config import ModelConfig

    config = ModelConfig(
        architecture="seq2seq",
        decoder="direct",
        attention=attention,
        hidden_size=16,
        dropout=0.0,
        level_norm="none",
        **extra,
    )
    torch.manual_seed(0)
    return build_network(config, F, K, H, lookback=L).network


@pytest.mark.parametrize("attention", ["none", "bahdanau"])
def test_the_direct_decoder_feeds_nothing_back(attention):
    network = direct_seq2seq(attention).train()
    past, future, target = batch()
    free = network(past, future)
    forced = network(past, future, target, teacher_forcing=1.0)
    other_truth = network(past, future, target + 100.0, teacher_forcing=1.0)
    for out in (forced, other_truth):
        torch.testing.assert_close(out.mean, free.mean, rtol=0, atol=0)  # every step, not just t=0
    # causal over the horizon: step t never sees the calendar of later steps
    later = future.clone()
    later[:, 3:] += 5.0
    changed = network(past, later).mean
    torch.testing.assert_close(changed[:, :3], free.mean[:, :3], rtol=0, atol=0)
    assert not torch.allclose(changed[:, 3:], free.mean[:, 3:])


def test_the_direct_decoder_runs_its_rnn_once_over_the_horizon():
    network = direct_seq2seq()
    calls = []
    network.direct.rnn.register_forward_hook(lambda m, inputs, out: calls.append(inputs[0].shape))
    network(*batch()[:2])
    assert calls == [torch.Size([B, H, K + 16])]  # calendar + position embedding, no previous y


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_batched_attention_equals_the_step_by_step_computation(cell):
    """The `states` layout (models saved before issue 41): one query s_{t-1} per decoder step."""
    network = direct_seq2seq(cell=cell, layers=2, attention_layout="states")
    seen = {}
    network.encoder.register_forward_hook(lambda m, inputs, out: seen.update(encoded=out[0]))
    network.direct.rnn.register_forward_hook(
        lambda m, inputs, out: seen.update(initial=inputs[1], states=out[0])
    )
    past, future, _ = batch()
    out = network(past, future)
    encoded, states = seen["encoded"], seen["states"]  # (B, L, C), (B, H, hidden)
    initial = seen["initial"][0] if cell == "lstm" else seen["initial"]  # (layers, B, hidden)
    keys = network.attention.project_keys(encoded)
    for t in range(H):
        query = initial[-1] if t == 0 else states[:, t - 1]  # s_{t-1}, as the stepwise decoder
        context, alpha = network.attention(query, encoded, keys)  # (B, C), (B, L)
        y = network.direct.output(torch.cat([states[:, t], context], dim=-1)).squeeze(-1)  # (B,)
        torch.testing.assert_close(out.attention[:, t], alpha)
        torch.testing.assert_close(out.mean[:, t], y)


def test_batched_attention_matches_the_module_on_arbitrary_queries():
    from forecaster.models.attention import BahdanauAttention

    torch.manual_seed(0)
    attention = BahdanauAttention(query_size=6, key_size=10, attention_size=7)
    queries, keys = torch.randn(B, H, 6), torch.randn(B, L, 10)
    projected = attention.project_keys(keys)
    contexts, weights = attention.attend_all(queries, keys, projected)
    assert contexts.shape == (B, H, 10) and weights.shape == (B, H, L)
    for t in range(H):
        context, alpha = attention(queries[:, t], keys, projected)
        torch.testing.assert_close(weights[:, t], alpha)
        torch.testing.assert_close(contexts[:, t], context)


def test_the_direct_decoder_without_attention_uses_the_fixed_context_at_every_step():
    network = direct_seq2seq("none")
    seen = {}
    network.direct.output.register_forward_hook(lambda m, inputs, out: seen.update(x=inputs[0]))
    out = network(*batch()[:2])
    assert out.attention is None
    contexts = seen["x"][..., 16:]  # (B, H, C) after the decoder state
    torch.testing.assert_close(contexts, contexts[:, :1].expand_as(contexts), rtol=0, atol=0)


def test_decoder_choice_is_for_seq2seq_only():
    from forecaster.config import ModelConfig

    with pytest.raises(ValueError, match="model.decoder: only seq2seq"):
        ModelConfig(architecture="many_to_one", decoder="direct")
    assert ModelConfig(architecture="seq2seq", decoder="direct").family == "seq2seq-direct-lstm-bahdanau"
    assert ModelConfig(architecture="seq2seq").family == "seq2seq-lstm-bahdanau"


def test_the_direct_decoders_highway_adds_the_linear_skip_and_the_step_by_step_one_refuses_it():
    """The seq2seq highway is the many-to-one networks' LSTNet skip: with the rest of the network's
    output held fixed, the forecast moves by exactly the skip's linear map of the last k steps."""
    from forecaster.config import ModelConfig

    with pytest.raises(ValueError, match="model.highway: a seq2seq model needs decoder: direct"):
        ModelConfig(architecture="seq2seq", decoder="autoregressive", highway=4)
    torch.manual_seed(0)
    config = ModelConfig(
        architecture="seq2seq", decoder="direct", hidden_size=8, layers=1, highway=4, level_norm="last"
    )
    network = build_network(config, 1, 0, 5, lookback=12).eval()
    past = torch.randn(3, 12, 1)  # (B, L, F)
    with torch.no_grad():
        before = network(past).mean  # (B, H)
        skip = network.network.highway
        skip.weight.add_(1.0)  # only the skip changes: the difference is its linear map
        after = network(past).mean
    level = past[:, -1:, 0]  # level_norm "last": the network sees the window relative to its last value
    expected = (past[:, -4:, 0] - level) @ torch.ones(4, 5)  # (B, H)
    assert torch.allclose(after - before, expected, atol=1e-5)


@pytest.mark.parametrize("name", [n for n in NETWORKS if "quantiles" in n])
def test_quantile_outputs_are_ordered_and_the_median_is_the_point_forecast(name):
    from forecaster.config import ModelConfig

    model_config = ModelConfig(hidden_size=16, **NETWORKS[name])
    out = build_network(model_config, F, K, H, lookback=L)(*batch()[:2])
    assert out.quantiles.shape == (B, H, 3)
    assert (out.quantiles[..., 0] <= out.quantiles[..., 1]).all()
    assert (out.quantiles[..., 1] <= out.quantiles[..., 2]).all()
    torch.testing.assert_close(out.mean, out.quantiles[..., 1])


def test_the_point_forecast_of_levels_without_a_median_is_interpolated_at_one_half():
    from forecaster.models.quantiles import median_of

    outputs = torch.tensor([[1.0, 5.0], [2.0, 4.0]])  # levels 0.1 and 0.9
    torch.testing.assert_close(median_of(outputs, [0.1, 0.9]), torch.tensor([3.0, 3.0]))
    torch.testing.assert_close(median_of(outputs, [0.3, 0.9]), torch.tensor([7 / 3, 8 / 3]))
    torch.testing.assert_close(median_of(outputs, [0.6, 0.9]), torch.tensor([1.0, 2.0]))  # nearest
    three = torch.tensor([[1.0, 2.0, 9.0]])
    torch.testing.assert_close(median_of(three, [0.1, 0.5, 0.9]), torch.tensor([2.0]))


def test_the_quantile_seq2seq_feeds_back_the_median_it_reports():
    from forecaster.config import ModelConfig

    config = ModelConfig(architecture="seq2seq", hidden_size=16, quantiles=[0.1, 0.9], level_norm="none")
    network = build_network(config, F, 0, H, lookback=L)
    fed = []
    network.network.decoder.register_forward_hook(lambda m, inputs, out: fed.append(inputs[0][:, 0, 0]))
    past = batch(calendar=False)[0]
    out = network(past)
    assert (out.quantiles[..., 0] <= out.quantiles[..., 1]).all()
    torch.testing.assert_close(out.mean, out.quantiles.mean(dim=-1))  # not the 0.9 output
    for t in range(1, H):
        torch.testing.assert_close(fed[t], out.mean[:, t - 1])


def test_pinball_loss_on_hand_values():
    from forecaster.models.quantiles import pinball_loss

    predicted = torch.tensor([[[1.0, 2.0]]])  # (B=1, H=1, Q=2)
    target = torch.tensor([[3.0]])
    levels = torch.tensor([0.1, 0.9])
    # under-forecast by 2 and 1: 0.1*2 and 0.9*1, averaged
    assert pinball_loss(predicted, target, levels).item() == pytest.approx((0.2 + 0.9) / 2)


def test_segment_length_must_divide_lookback():
    from forecaster.config import ForecastConfig

    with pytest.raises(ValueError, match="must divide window.lookback"):
        ForecastConfig.model_validate(
            {"data": {"dataset": "etth1"}, "window": {"lookback": 10}, "model": {"segment_length": 4}}
        )


def segment_seq2seq(attention: str = "bahdanau", horizon: int = 8, layout: str = "steps"):
    """SegRNN-style seq2seq: L=12 read as 3 segments of 4, H=8 emitted as 2 segments of 4."""
    from forecaster.config import ModelConfig

    config = ModelConfig(
        architecture="seq2seq",
        decoder="direct",
        attention=attention,
        attention_layout=layout,
        hidden_size=16,
        segment_length=4,
    )
    torch.manual_seed(0)
    return build_network(config, F, K, horizon, lookback=L)


def segment_batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(B, L, F + K, generator=g),
        torch.randn(B, 8, K, generator=g),
        torch.randn(B, 8, generator=g),
    )


def test_the_segment_seq2seq_reports_attention_per_step_as_a_distribution():
    """The `states` layout: decoder segment x encoder segment (tests/forecaster/test_step_attention.py
    has the `steps` layout's)."""
    network = segment_seq2seq(layout="states")
    past, future, _ = segment_batch()
    out = network(past, future)
    assert out.mean.shape == (B, 8) and out.attention.shape == (B, 2, 3)  # segment x segment
    steps = out.attention_per_step()
    assert steps.shape == (B, 8, L)
    torch.testing.assert_close(steps.sum(-1), torch.ones(B, 8))
    # a segment's weight is shared by its 4 look-back steps and by its 4 horizon steps
    torch.testing.assert_close(steps[:, :, 0], steps[:, :, 3])
    torch.testing.assert_close(steps[:, 0], steps[:, 3])
    torch.testing.assert_close(steps[:, 0, :4].sum(-1), out.attention[:, 0, 0])
    assert not torch.allclose(steps[:, 0], steps[:, 4])  # the next decoder step differs


def test_the_segment_seq2seq_decoder_steps_once_per_segment_and_learns():
    network = segment_seq2seq()
    calls = []
    network.network.direct.rnn.register_forward_hook(lambda m, inputs, out: calls.append(inputs[0].shape))
    past, future, target = segment_batch()
    network(past, future)
    assert calls == [torch.Size([B, 2, 4 * K + 16])]  # 2 segments: 4 steps of calendar + position
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-2)
    first = torch.nn.functional.mse_loss(network(past, future).mean, target).item()
    for _ in range(150):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(network(past, future).mean, target).backward()
        optimizer.step()
    assert torch.nn.functional.mse_loss(network(past, future).mean, target).item() < 0.1 * first


@pytest.mark.parametrize(
    ("window", "model", "message"),
    [
        ({"lookback": 12, "horizon": 6}, {"decoder": "direct"}, "must divide window.horizon"),
        ({"lookback": 12, "horizon": 8}, {}, "needs decoder: direct"),
        ({"lookback": 10, "horizon": 8}, {"decoder": "direct"}, "must divide window.lookback"),
    ],
)
def test_segment_seq2seq_configs_are_checked(window, model, message):
    with pytest.raises(ValueError, match=message):
        ForecastConfig.model_validate(
            {
                "data": {"dataset": "etth1"},
                "window": window,
                "model": {"architecture": "seq2seq", "segment_length": 4, **model},
            }
        )


@pytest.mark.parametrize("decoder", ["autoregressive", "direct"])
def test_a_seq2seq_saved_when_highway_was_ignored_loads_as_it_ran(decoder, tmp_path):
    """Before issue 34 a seq2seq network ignored model.highway: such a saved model (a highway in
    its config, none in its weights) loads without one and forecasts the same numbers."""
    from forecaster.predictor import META_FILE

    config = ForecastConfig.model_validate(
        {
            "data": {"path": "x.csv", "time_column": "t", "target": "y", "calendar_features": False},
            "window": {"lookback": L, "horizon": H},
            "model": {"architecture": "seq2seq", "decoder": decoder, "hidden_size": 8, "layers": 1},
        }
    )
    torch.manual_seed(0)
    scaler = StandardScaler(mean=np.array([10.0, 0.0, 5.0]), std=np.array([2.0, 1.0, 3.0]))
    predictor = Predictor(
        build_network(config.model, F, 0, H, lookback=L, season=HOURLY), config, scaler, ["y", "a", "b"], "h"
    )
    directory = predictor.save(tmp_path / "model")
    meta = json.loads((directory / META_FILE).read_text())
    meta["config"]["model"]["highway"] = 4  # as an older version saved it: set, never built
    (directory / META_FILE).write_text(json.dumps(meta))
    windows = np.random.default_rng(0).normal(10, 2, size=(3, L, F))
    loaded = Predictor.load(directory)
    assert loaded.config.model.highway == 0
    np.testing.assert_array_equal(loaded.predict(windows).mean, predictor.predict(windows).mean)
