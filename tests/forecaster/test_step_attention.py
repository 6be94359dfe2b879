"""The `lags` and `steps` attention layouts (issue 41): a query per forecast step over a key per look-back
step; its factored weights are the plain softmax's; it learns to look where the future repeats
the past; models saved with the earlier `states` layout load and forecast as they did."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from forecaster.config import ForecastConfig, ModelConfig, with_attention_layout_of_its_time
from forecaster.data.calendar import calendar_feature_names
from forecaster.data.scaling import StandardScaler
from forecaster.models import build_network
from forecaster.models.lag_scores import LAG_SCORE_SCALE, LagScores
from forecaster.models.output import Forecast
from forecaster.models.seq2seq import Seq2SeqForecaster
from forecaster.models.step_attention import (
    Alignment,
    mix,
    nothing_retrieved,
    per_forecast_step,
    segment_softmax,
)
from forecaster.predictor import META_FILE, Prediction, Predictor

B, L, H, F, K, W, M = 4, 12, 8, 2, 3, 4, 3  # windows, look-back, horizon, series, calendar, segment, heads
HOURLY = 24


def seq2seq(decoder: str = "direct", segment: int = W, **model) -> torch.nn.Module:
    """The bare Seq2SeqForecaster (no level normalisation around it)."""
    config = ModelConfig(
        architecture="seq2seq",
        decoder=decoder,
        segment_length=segment,
        hidden_size=8,
        layers=1,
        dropout=0.0,
        level_norm="none",
        **model,
    )
    torch.manual_seed(0)
    return build_network(config, F, K, H, lookback=L, season=HOURLY).network


def inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, L, F + K, generator=g), torch.randn(B, H, K, generator=g)


def full_softmax(segment_scores: torch.Tensor, step_scores: torch.Tensor, w: int) -> torch.Tensor:
    """The B x H x L softmax the factored form stands for."""
    return torch.softmax(segment_scores.repeat_interleave(w, dim=-1) + step_scores, dim=-1)


@pytest.mark.parametrize("shared", [True, False], ids=["shared-steps", "per-window-steps"])
def test_the_factored_softmax_and_mix_are_the_plain_ones(shared):
    """Per head, the factors multiply to the B x m x H x L softmax; what they retrieve is what the
    mean of the heads' weights retrieves, and that mean is the reported attention."""
    g = torch.Generator().manual_seed(1)
    segment_scores = 3 * torch.randn(B, M, H, L // W, generator=g)
    step_scores = 3 * torch.randn(*(() if shared else (B,)), M, H, L, generator=g)
    alignment = segment_softmax(segment_scores, step_scores, W)
    expected = full_softmax(segment_scores, step_scores, W)  # (B, m, H, L)
    torch.testing.assert_close(alignment.weights.repeat_interleave(W, dim=-1) * alignment.within, expected)
    attention, within = alignment.reported()
    reported = Forecast(mean=torch.zeros(B, H), attention=attention, attention_within=within, segment=W)
    torch.testing.assert_close(reported.attention_per_step(), expected.mean(dim=1))
    segment_values, step_values = torch.randn(B, L // W, 5, generator=g), torch.randn(B, L, 5, generator=g)
    values = segment_values.repeat_interleave(W, dim=1) + step_values  # (B, L, 5)
    plain = torch.bmm(expected.mean(dim=1), values)  # (B, H, 5)
    torch.testing.assert_close(mix(alignment, segment_values, step_values), plain)
    one_step = Alignment(torch.softmax(step_scores.expand(B, M, H, L), dim=-1))  # w = 1: no factors
    torch.testing.assert_close(
        mix(one_step, values, torch.zeros_like(values)), torch.bmm(one_step.weights.mean(dim=1), values)
    )


@pytest.mark.parametrize(
    "layout, retrieved, with_calendar",
    [
        ("lags", "inputs", False),
        ("lags", "inputs", True),
        ("lags", "states_and_inputs", False),
        ("steps", "states_and_inputs", True),
    ],
)
def test_the_direct_decoders_weights_and_outputs_are_the_per_step_computation(
    layout, retrieved, with_calendar
):
    """Every forecast step t: softmax_i(content(s_t, h_i//w) + position(t, i) + calendar(t, i)
    [+ lag(t + L - i)]), and its output is its segment's value for t plus what those weights
    retrieve: `lags` emits from [s_t, the encoder's final state] as the network without attention
    does, `steps` from s_t alone; `inputs` retrieves the look-back steps' own inputs alone, the
    others their encoder states too; the inputs are the observed values alone unless
    ``attention_retrieves_calendar`` adds the steps' calendar features to them."""
    network = seq2seq(
        cell="gru",
        attention_heads=M,
        attention_layout=layout,
        attention_values=retrieved,
        attention_retrieves_calendar=with_calendar,
    )
    attention, seen = network.attention, {}
    network.encoder.register_forward_hook(lambda m, i, out: seen.update(encoded=out[0], final=out[1]))
    network.direct.rnn.register_forward_hook(lambda m, i, out: seen.update(states=out[0]))
    if layout == "lags":  # trained lag scores and values are not 0: make them so, or they would add nothing
        torch.nn.init.normal_(attention.lags.lag_score, std=0.01)
        for parameter in attention.values_parameters():
            torch.nn.init.normal_(parameter)
    past, future = inputs()
    out = network(past, future)
    encoded, states = seen["encoded"], seen["states"]  # (B, L/w, C), (B, H/w, hidden)
    content = attention.content(states, attention.content.keys(encoded))  # (B, m, H/w, L/w)
    content = content.repeat_interleave(W, dim=-2).repeat_interleave(W, dim=-1)  # (B, m, H, L)
    columns = attention.calendar_columns
    calendar = attention.calendar(columns.of_future(future), attention.calendar.keys(columns.of_past(past)))
    forecast_positions, lookback_positions = attention.positions()  # (H, P), (L, P)
    position = attention.position(forecast_positions, attention.position.keys(lookback_positions))
    lag = torch.zeros(M, H, L)
    if layout == "lags":
        lags = torch.arange(H)[:, None] + L - torch.arange(L)[None, :]  # (H, L): t + L - i
        lag = LAG_SCORE_SCALE * attention.lags.lag_score[:, lags - 1]  # (m, H, L)
    scores = content + position + lag + calendar  # (B, m, H, L)
    weights = torch.softmax(scores, dim=-1).mean(dim=1)  # (B, H, L): the mean over heads
    torch.testing.assert_close(out.attention_per_step(), weights)
    own_inputs = past if with_calendar else past[..., :F]  # (B, L, F+K) or (B, L, F)
    values = attention.input_values(own_inputs)  # (B, L, 1): each look-back step's own inputs
    if retrieved == "inputs":
        assert attention.state_values is None
    else:
        values = values + attention.state_values(encoded).repeat_interleave(W, dim=1)
    read = states  # (B, H/w, hidden)
    if layout == "lags":
        read = torch.cat([states, seen["final"][-1].unsqueeze(1).expand(-1, H // W, -1)], dim=-1)
    emitted = network.direct.output(read).reshape(B, H)  # (B, H): w values per segment
    torch.testing.assert_close(out.mean, emitted + torch.bmm(weights, values).squeeze(-1))


@pytest.mark.parametrize(
    "decoder, segment", [("direct", W), ("autoregressive", 0)], ids=["direct", "stepwise"]
)
def test_a_seed_starts_the_network_around_the_attention_as_it_starts_without_it(decoder, segment):
    """The attention draws its initial weights from a copy of the random stream: with one seed, the
    rest of the network starts with the very weights the same network without attention has, and
    what is drawn next (the first batches' order) is the same, so an ablation's two runs of one
    seed start from one point and differ by what the attention does."""
    with_attention = seq2seq(decoder, segment, cell="gru")
    drawn_next = torch.rand(5)
    without = seq2seq(decoder, segment, cell="gru", attention="none")
    torch.testing.assert_close(torch.rand(5), drawn_next, rtol=0, atol=0)
    around = {name: p for name, p in with_attention.named_parameters() if not name.startswith("attention.")}
    shared = dict(without.named_parameters())
    assert around.keys() == shared.keys()
    for name, parameter in around.items():
        torch.testing.assert_close(parameter, shared[name], rtol=0, atol=0, msg=name)


def test_the_lags_layouts_attention_starts_as_the_network_without_it():
    """What a step retrieves starts at 0 and the lag scores flat: at initialisation the `lags`
    network forecasts what its output layer makes of [s_t, the encoder's final state] alone, the
    output path the same network without attention has; training grows the attention's part."""
    network, seen = seq2seq(cell="gru"), {}
    network.encoder.register_forward_hook(lambda m, i, out: seen.update(final=out[1]))
    network.direct.rnn.register_forward_hook(lambda m, i, out: seen.update(states=out[0]))
    attention = network.attention
    assert torch.count_nonzero(attention.lags.lag_score) == 0
    out = network(*inputs())
    fixed = seen["final"][-1].unsqueeze(1).expand(-1, H // W, -1)  # (B, H/w, hidden)
    emitted = network.direct.output(torch.cat([seen["states"], fixed], dim=-1)).reshape(B, H)
    torch.testing.assert_close(out.mean, emitted, rtol=0, atol=0)
    assert not torch.allclose(out.attention_per_step()[:, 0], out.attention_per_step()[:, 1])


@pytest.mark.parametrize(
    "decoder, segment",
    [("direct", W), ("direct", 0), ("autoregressive", 0)],
    ids=["segments", "steps", "stepwise"],
)
@pytest.mark.parametrize("heads", [1, M])
def test_every_forecast_step_has_its_own_row(decoder, segment, heads):
    """Even untrained and inside one decoder segment: the rows differ, each a distribution over L."""
    out = seq2seq(decoder, segment, attention_heads=heads)(*inputs())
    weights = out.attention_per_step()  # (B, H, L)
    assert weights.shape == (B, H, L) and (weights >= 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H))
    for t in range(1, H):
        assert not torch.allclose(weights[:, t], weights[:, t - 1]), t


def test_per_forecast_step_repeats_each_segments_row_for_its_steps():
    rows = torch.arange(2 * 3 * 5, dtype=torch.float32).reshape(2, 3, 5)
    torch.testing.assert_close(per_forecast_step(rows, 4), rows.repeat_interleave(4, dim=1))


COPY_LAG = 24


def copy_task(generator: torch.Generator, windows: int, lookback: int, horizon: int):
    """Independent noise, and a future that repeats the value COPY_LAG steps back: the look-back
    step t + L - 24 holds forecast step t's value, and no other step says anything about it."""
    past = torch.randn(windows, lookback, 1, generator=generator)  # (N, L, 1)
    return past, past[:, lookback - COPY_LAG : lookback - COPY_LAG + horizon, 0]  # (N, H)


@pytest.fixture
def one_thread():
    """Small tensors: one thread is faster, and a second spins against whatever else runs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_attention_learns_to_look_at_the_lag_the_future_copies(one_thread):
    """The default direct decoder (one-day segments, as `--model seq2seq` builds it at L=96,
    H=24) trained for a few seconds: most of every row's weight lands on lag 24. Level
    normalisation is off: relative to the last value, the last step's lag-24 value is the level
    itself, which that row then never needs to retrieve."""
    lookback, horizon = 96, 24
    config = ModelConfig(
        architecture="seq2seq",
        decoder="direct",
        segment_length=24,
        cell="gru",
        hidden_size=16,
        layers=1,
        dropout=0.0,
        level_norm="none",
    )
    torch.manual_seed(0)
    network = build_network(config, 1, 0, horizon, lookback=lookback, season=HOURLY)
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for _ in range(300):
        past, target = copy_task(g, 64, lookback, horizon)
        loss = torch.nn.functional.mse_loss(network(past).mean, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    network.eval()
    past, target = copy_task(g, 128, lookback, horizon)
    with torch.no_grad():
        out = network(past)
    weights = out.attention_per_step()  # (N, H, L)
    steps = torch.arange(horizon)
    on_lag = weights[:, steps, steps + lookback - COPY_LAG]  # (N, H): each row's weight on lag 24
    assert on_lag.min() > 0.5, on_lag.min(dim=0).values
    assert on_lag.mean() > 0.8, on_lag.mean()
    assert torch.nn.functional.mse_loss(out.mean, target) < 0.05  # it copies (noise variance: 1)


def saved_predictor(
    tmp_path, layout: str, calendar: bool = False, decoder: str = "direct", **model
) -> Predictor:
    """A tiny saved seq2seq model on hourly data; ``calendar``: with calendar features; the direct
    decoder in segments of W, or the step-by-step one."""
    config = ForecastConfig.model_validate(
        {
            "data": {"path": "x.csv", "time_column": "t", "target": "y", "calendar_features": calendar},
            "window": {"lookback": L, "horizon": H},
            "model": {
                "architecture": "seq2seq",
                "decoder": decoder,
                "segment_length": W if decoder == "direct" else 0,
                "attention_layout": layout,
                "hidden_size": 8,
                "layers": 1,
                **model,
            },
        }
    )
    torch.manual_seed(0)
    calendar_count = len(calendar_feature_names(sub_daily=True)) if calendar else 0
    network = build_network(config.model, 1, calendar_count, H, lookback=L, season=HOURLY)
    predictor = Predictor(
        network, config, StandardScaler(mean=np.array([10.0]), std=np.array([2.0])), ["y"], "h"
    )
    predictor.save(tmp_path / layout)
    return predictor


def with_saved_model_config(directory, **fields) -> None:
    """Rewrites the saved model's config: each model.``field`` set to its value, or removed for
    None (a model saved before that field existed)."""
    meta = json.loads((directory / META_FILE).read_text())
    model = meta["config"]["model"]
    for field, value in fields.items():
        if value is None:
            del model[field]
        else:
            model[field] = value
    (directory / META_FILE).write_text(json.dumps(meta))


def loaded_as_saved_before(directory, field: str) -> Predictor:
    """The model saved in ``directory``, loaded as it would have been saved before
    model.``field`` existed: without it in its config."""
    with_saved_model_config(directory, **{field: None})
    return Predictor.load(directory)


def forecasts_as_before(before: Predictor, loaded: Predictor) -> Prediction:
    """Checks that ``loaded`` gives the very forecasts and weights ``before`` gave; returns them."""
    windows = np.random.default_rng(0).normal(10, 2, size=(5, L))
    hours = np.datetime64("2024-03-01T00") + np.arange(5)[:, None] * 7 + np.arange(L)[None, :]  # (5, L)
    times = hours.astype("datetime64[h]") if loaded.uses_calendar else None
    then = before.predict(windows, times, return_attention=True)
    now = loaded.predict(windows, times, return_attention=True)
    np.testing.assert_array_equal(now.mean, then.mean)
    np.testing.assert_array_equal(now.attention, then.attention)
    return now


def test_a_model_saved_before_the_steps_layout_loads_and_forecasts_as_it_did(tmp_path):
    """A model saved before issue 41 has no model.attention_layout in its config: it loads with the
    `states` layout it was trained with and gives the very same forecasts and weights."""
    before = saved_predictor(tmp_path, "states")
    loaded = loaded_as_saved_before(tmp_path / "states", "attention_layout")
    assert loaded.config.model.attention_layout == "states"
    now = forecasts_as_before(before, loaded)
    np.testing.assert_array_equal(
        now.attention[:, 0], now.attention[:, W - 1]
    )  # a segment's steps share a row


def test_a_model_saved_with_the_steps_layout_keeps_it(tmp_path):
    saved_predictor(tmp_path, "steps")
    loaded = Predictor.load(tmp_path / "steps")
    assert loaded.config.model.attention_layout == "steps"
    weights = loaded.predict(
        np.random.default_rng(0).normal(10, 2, size=(5, L)), return_attention=True
    ).attention
    assert not np.allclose(weights[:, 0], weights[:, 1])  # its own row per forecast step


def test_a_lags_model_saved_before_attention_values_loads_and_forecasts_as_it_did(tmp_path):
    """A `lags` model saved before model.attention_values retrieved its steps' encoder states
    with their inputs: it loads that way, with every saved weight, and gives the same forecasts."""
    before = saved_predictor(tmp_path, "lags", attention_values="states_and_inputs")
    torch.nn.init.normal_(before.network.network.attention.state_values.weight)  # trained: not 0
    before.save(tmp_path / "lags")
    loaded = loaded_as_saved_before(tmp_path / "lags", "attention_values")
    assert loaded.config.model.attention_values == "states_and_inputs"
    forecasts_as_before(before, loaded)


@pytest.mark.parametrize("layout", ["lags", "steps"])
def test_a_calendar_model_saved_before_attention_retrieves_calendar_loads_and_forecasts_as_it_did(
    tmp_path, layout
):
    """`lags` and `steps` models with calendar features saved before
    model.attention_retrieves_calendar retrieved their steps' calendar with their values: they load
    that way, with every saved weight, and give the same forecasts and weights."""
    before = saved_predictor(tmp_path, layout, calendar=True, attention_retrieves_calendar=True)
    attention = before.network.network.attention
    torch.nn.init.normal_(attention.input_values.weight)  # trained: not 0
    assert attention.input_values.in_features == 1 + len(calendar_feature_names(sub_daily=True))
    before.save(tmp_path / layout)
    loaded = loaded_as_saved_before(tmp_path / layout, "attention_retrieves_calendar")
    assert loaded.config.model.attention_retrieves_calendar
    forecasts_as_before(before, loaded)


def test_a_stepwise_lags_model_saved_before_attention_retrieves_calendar_loads_and_forecasts_as_it_did(
    tmp_path,
):
    """A step-by-step `lags` model saved before model.attention_retrieves_calendar retrieved its
    steps' encoder states and calendar with their values, whatever its attention_values said: it
    loads that way, with every saved weight, and gives the same forecasts and weights."""
    before = saved_predictor(
        tmp_path,
        "lags",
        calendar=True,
        decoder="autoregressive",
        attention_values="states_and_inputs",
        attention_retrieves_calendar=True,
    )
    with_saved_model_config(
        tmp_path / "lags", attention_values="inputs"
    )  # what it was saved with: the default then
    loaded = loaded_as_saved_before(tmp_path / "lags", "attention_retrieves_calendar")
    assert loaded.config.model.attention_values == "states_and_inputs"
    assert loaded.network.network.attention.state_values is not None
    forecasts_as_before(before, loaded)


def test_a_stepwise_lags_model_that_retrieved_states_under_inputs_loads_and_forecasts_as_it_did(tmp_path):
    """A step-by-step `lags` model saved while the fourth pass was under way says
    ``attention_values: inputs`` and has ``attention_retrieves_calendar``, yet retrieved its encoder
    states: its weights say so, and it loads with them and gives the same forecasts and weights."""
    before = saved_predictor(
        tmp_path, "lags", calendar=True, decoder="autoregressive", attention_values="states_and_inputs"
    )
    with_saved_model_config(tmp_path / "lags", attention_values="inputs")  # what its config said
    loaded = Predictor.load(tmp_path / "lags")
    assert loaded.config.model.attention_values == "states_and_inputs"
    assert not loaded.config.model.attention_retrieves_calendar
    forecasts_as_before(before, loaded)


@pytest.mark.parametrize("retrieved", ["inputs", "states_and_inputs"])
def test_the_stepwise_decoders_context_is_what_its_weights_retrieve(retrieved):
    """Each step's context, the step-by-step decoder's RNN input, is its weights over the look-back
    steps' values: their observed values projected (`inputs`), and their encoder states too
    (`states_and_inputs`)."""
    network = seq2seq("autoregressive", 0, cell="gru", attention_layout="lags", attention_values=retrieved)
    attention, seen, steps = network.attention, {}, []
    assert (attention.state_values is None) == (retrieved == "inputs")
    network.encoder.register_forward_hook(lambda m, i, out: seen.update(encoded=out[0]))
    attention.register_forward_hook(lambda m, args, out: steps.append((args[2], out)))
    past, future = inputs()
    network(past, future)
    values = attention.input_values(past[..., :F])  # (B, L, C): the observed values, projected
    if retrieved == "states_and_inputs":
        values = values + attention.state_values(seen["encoded"])
    assert len(steps) == H
    for keys, (context, weights) in steps:
        torch.testing.assert_close(keys.values, values)
        torch.testing.assert_close(context, torch.bmm(weights.unsqueeze(1), values).squeeze(1))


def test_a_new_calendar_model_retrieves_its_observed_values_alone(tmp_path):
    """What a look-back step retrieves does not move with its calendar features: the same weights
    over the same observations retrieve the same, whatever hour the windows start at."""
    attention = saved_predictor(tmp_path, "lags", calendar=True).network.network.attention
    assert attention.input_values.in_features == 1  # the target's scaled value alone
    past = torch.randn(B, L, 1 + len(calendar_feature_names(sub_daily=True)))  # (B, L, 1+K)
    moved = torch.cat([past[..., :1], torch.randn_like(past[..., 1:])], dim=-1)  # other calendar features
    torch.testing.assert_close(attention.retrieved_inputs(moved), past[..., :1])
    torch.testing.assert_close(attention.retrieved_inputs(past), past[..., :1])


def test_an_unknown_attention_values_setting_is_refused_by_name():
    """The config refuses it first; a network built in code must not read it as another value."""
    with pytest.raises(ValueError, match="attention_values 'states'"):
        Seq2SeqForecaster(
            F, H, lookback=L, decoder="direct", attention_layout="lags", attention_values="states"
        )


def test_only_attention_models_saved_without_a_layout_get_the_earlier_one():
    old = {"model": {"architecture": "seq2seq", "attention": "bahdanau"}}
    assert with_attention_layout_of_its_time(old)["model"]["attention_layout"] == "states"
    lags = with_attention_layout_of_its_time(
        {"model": {"architecture": "seq2seq", "attention_layout": "lags"}}
    )
    assert lags["model"]["attention_values"] == "states_and_inputs"
    assert lags["model"]["attention_retrieves_calendar"] is True
    steps = {"model": {"architecture": "seq2seq", "attention_layout": "steps"}}
    assert with_attention_layout_of_its_time(steps)["model"]["attention_retrieves_calendar"] is True
    direct = {
        "architecture": "seq2seq",
        "attention_layout": "lags",
        "attention_values": "inputs",
        "decoder": "direct",
    }
    assert with_attention_layout_of_its_time({"model": direct})["model"] == {
        **direct,
        "attention_retrieves_calendar": True,
    }
    stepwise = {**direct, "decoder": "autoregressive"}  # it retrieved the encoder states too
    assert with_attention_layout_of_its_time({"model": stepwise})["model"] == {
        **stepwise,
        "attention_values": "states_and_inputs",
        "attention_retrieves_calendar": True,
    }
    now = {"attention_layout": "lags", "attention_values": "inputs", "attention_retrieves_calendar": False}
    for unchanged in (
        {"model": {"architecture": "seq2seq", "attention": "none"}},
        {"model": {"architecture": "many_to_one"}},
        {"model": {"architecture": "seq2seq", **now}},
    ):
        assert with_attention_layout_of_its_time(unchanged) == unchanged


def test_a_lag_score_weighs_the_same_lag_from_every_forecast_step():
    """The `lags` block is a function of t + L - i alone: forecast step t + 1's row is step t's
    shifted by one look-back step, so a learned "24 hours back" moves along with the forecast."""
    scores_of = LagScores(H, L, heads=M)
    torch.nn.init.normal_(scores_of.lag_score)
    scores = scores_of()  # (m, H, L)
    assert scores.shape == (M, H, L)
    torch.testing.assert_close(scores[:, 1:, 1:], scores[:, :-1, :-1])
    lag = torch.arange(H)[:, None] + L - torch.arange(L)[None, :]  # (H, L)
    torch.testing.assert_close(scores, LAG_SCORE_SCALE * scores_of.lag_score[:, lag - 1])
    assert LagScores(H, L, heads=1)().abs().max() == 0  # no lag preferred before training


def test_the_lag_scale_multiplies_every_lag_score():
    """``model.attention_lag_scale`` is the stored scores' multiplier: the same parameters at 30
    give three tenths of what they give at the default 100."""
    default, slower = LagScores(H, L, heads=M), LagScores(H, L, heads=M, scale=30.0)
    torch.nn.init.normal_(default.lag_score)
    slower.lag_score.data.copy_(default.lag_score.data)
    torch.testing.assert_close(slower(), default() * 30.0 / LAG_SCORE_SCALE)


@pytest.mark.parametrize("decoder", ["direct", "autoregressive"])
def test_a_models_lag_scale_is_saved_with_it(tmp_path, decoder):
    """A model trained with another lag scale loads with it and forecasts as it did: the scale is
    part of the network, not a constant of the code that loads it."""
    before = saved_predictor(tmp_path, "lags", decoder=decoder, attention_lag_scale=30.0)
    lag_scores = before.network.network.attention.lags
    assert lag_scores.scale == 30.0
    torch.nn.init.normal_(lag_scores.lag_score, std=0.05)  # trained: some lags preferred
    torch.nn.init.normal_(before.network.network.attention.input_values.weight)  # trained: not 0
    before.save(tmp_path / "lags")
    loaded = Predictor.load(tmp_path / "lags")
    assert loaded.config.model.attention_lag_scale == 30.0
    assert loaded.network.network.attention.lags.scale == 30.0
    forecasts_as_before(before, loaded)


def test_a_lags_model_saved_before_the_lag_scale_setting_keeps_the_scale_it_was_trained_with(tmp_path):
    """Models saved before ``model.attention_lag_scale`` were trained at 100: without the field they
    load at 100 and forecast as they did (a new default would need them mapped to 100, as
    ``with_attention_layout_of_its_time`` maps the other fields)."""
    before = saved_predictor(tmp_path, "lags")
    torch.nn.init.normal_(before.network.network.attention.lags.lag_score, std=0.05)
    torch.nn.init.normal_(before.network.network.attention.input_values.weight)
    before.save(tmp_path / "lags")
    loaded = loaded_as_saved_before(tmp_path / "lags", "attention_lag_scale")
    assert loaded.network.network.attention.lags.scale == 100.0
    forecasts_as_before(before, loaded)


@pytest.mark.parametrize(
    ("decoder", "segment", "retrieved"),
    [("direct", W, "inputs"), ("direct", W, "states_and_inputs"), ("autoregressive", 0, "states_and_inputs")],
)
def test_with_nothing_retrieved_the_forecast_is_the_one_whose_values_are_zero(decoder, segment, retrieved):
    """Inside ``nothing_retrieved`` every step retrieves 0, encoder states included: the forecast is
    that of the same network with its value projections at 0, whatever they hold, and outside it
    the network forecasts as before."""
    network = seq2seq(decoder, segment, attention_layout="lags", attention_values=retrieved).eval()
    for parameter in network.attention.values_parameters():
        torch.nn.init.normal_(parameter)  # the `lags` layout starts them at 0
    past, future = inputs()
    with torch.no_grad():
        forecast = network(past, future).mean
        with nothing_retrieved(network) as switched:
            without = network(past, future).mean
            with nothing_retrieved(network):  # nested, as an evaluation inside it nests it
                pass
            torch.testing.assert_close(network(past, future).mean, without)
        assert switched and torch.equal(network(past, future).mean, forecast)
        for parameter in network.attention.values_parameters():
            parameter.zero_()
        torch.testing.assert_close(without, network(past, future).mean)
    assert not torch.allclose(without, forecast)


def test_nothing_retrieved_restores_the_retrieval_when_what_it_wraps_fails():
    network = seq2seq("direct", W, attention_layout="lags").eval()
    with pytest.raises(RuntimeError), nothing_retrieved(network):
        assert not network.attention.retrieving
        raise RuntimeError("a forecast failed")
    assert network.attention.retrieving


def test_nothing_retrieved_changes_nothing_in_a_network_without_step_attention():
    network = seq2seq("autoregressive", 0, attention_layout="states").eval()
    past, future = inputs()
    with torch.no_grad():
        forecast = network(past, future).mean
        with nothing_retrieved(network) as switched:
            assert not switched and torch.equal(network(past, future).mean, forecast)
