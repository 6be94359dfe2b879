"""``model.attention_base_loss`` (issue 41, fifth pass): the direct decoder's `lags` attention adds
what it retrieves to the output of the network under it; in training that network's forecast
alone is scored too, so it stays a forecaster by itself."""

from __future__ import annotations

import pytest
import torch

from forecaster.config import ModelConfig
from forecaster.models import build_network
from forecaster.module import ForecastModule

B, L, H, W = 4, 48, 24, 24  # windows, look-back, horizon, segment (one day)


def network(**model) -> torch.nn.Module:
    """A level-normalised seq2seq with the direct decoder and `lags` attention, as the benchmark's."""
    config = ModelConfig(
        architecture="seq2seq",
        decoder="direct",
        segment_length=W,
        hidden_size=8,
        layers=1,
        dropout=0.0,
        level_norm="last",
        **model,
    )
    torch.manual_seed(0)
    built = build_network(config, 1, 0, H, lookback=L, season=24)
    torch.nn.init.normal_(built.network.attention.input_values.weight)  # retrieve something
    return built


def batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    series = torch.randn(B, L + H, generator=g).cumsum(dim=1) + 20.0  # far from 0: the level matters
    return {"past": series[:, :L, None], "target": series[:, L:]}


def test_in_training_the_forecast_without_attention_is_the_network_under_it():
    net = network()
    data = batch()
    net.train()
    out = net(data["past"])
    base = out.without_attention
    with torch.no_grad():
        net.network.attention.input_values.weight.zero_()  # retrieve nothing
        alone = net(data["past"]).mean
    torch.testing.assert_close(base.mean, alone)
    assert not torch.allclose(out.mean, alone)  # the attention did add something
    net.eval()
    assert net(data["past"]).without_attention is None  # serving and validation never make it


def losses(base_loss: bool, stage: str) -> tuple[torch.Tensor, torch.Tensor, ForecastModule]:
    module = ForecastModule(network(), loss="mse", base_loss=base_loss)
    module.train(stage == "train")
    data = batch(1)
    loss = module._step(data, stage)["loss"]
    with torch.no_grad():
        out = module.network(data["past"])
    return loss, out, module


def test_training_scores_both_forecasts_and_validation_the_forecast_alone():
    mse = torch.nn.functional.mse_loss
    target = batch(1)["target"]
    loss, out, _ = losses(base_loss=True, stage="train")
    torch.testing.assert_close(loss, mse(out.mean, target) + mse(out.without_attention.mean, target))
    loss, out, _ = losses(base_loss=False, stage="train")
    torch.testing.assert_close(loss, mse(out.mean, target))
    loss, out, _ = losses(base_loss=True, stage="val")
    torch.testing.assert_close(loss, mse(out.mean, target))


@pytest.mark.parametrize("base_loss", [True, False])
def test_the_attentions_own_weights_learn_from_the_forecast_alone(base_loss):
    # the forecast without attention does not depend on what the attention retrieves, so the
    # extra term moves the network under it and never the attention's value projection
    loss, _, module = losses(base_loss, stage="train")
    loss.backward()
    values = module.network.network.attention.input_values.weight.grad.clone()
    encoder = module.network.network.encoder.weight_hh_l0.grad.clone()
    reference, _, plain = losses(False, stage="train")
    reference.backward()
    torch.testing.assert_close(values, plain.network.network.attention.input_values.weight.grad)
    moved = not torch.allclose(encoder, plain.network.network.encoder.weight_hh_l0.grad)
    assert moved == base_loss
