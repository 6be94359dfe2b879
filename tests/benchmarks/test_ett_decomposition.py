"""benchmarks/ett_decomposition.py splits the ablation's attention / twin into what the retrieved term
does (attention / base) and what training beside the attention did to the network under it (base /
twin): the base is the attention network's own forecast with nothing retrieved, and its records are
of the ablation's own runs."""

from __future__ import annotations

import statistics
import sys

import pytest
import torch

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import ett_ablation_significance as significance  # noqa: E402
import ett_benchmark  # noqa: E402
import ett_decomposition as decomposition  # noqa: E402


def ablation_network():
    """The ablation's attention network, untrained, in evaluation mode."""
    from forecaster.models import build_network

    config = ett_benchmark.run_config(
        96, 24, decomposition.ATTENTION, 0, ett_benchmark.EPOCHS, "cpu"
    ).forecast_config()
    network = build_network(
        config.model, series_features=1, calendar_features=0, horizon=24, lookback=96, season=24
    )
    return network.eval()


@pytest.mark.parametrize("training", [False, True])
def test_with_nothing_retrieved_the_forecast_is_what_the_network_under_the_attention_emits(training):
    """Inside ``nothing_retrieved`` the forecast does not depend on the value projection (so the
    retrieved term is 0) and equals the forecast with that projection at 0; outside it, it does."""
    network = ablation_network().train(training)
    past = torch.randn(4, 96, 1)
    projection = network.network.attention.input_values.weight

    def forecasts(scale: float) -> torch.Tensor:
        torch.manual_seed(0)  # the same dropout in training mode
        with torch.no_grad():
            projection.fill_(scale)
            return network(past).mean  # (B, H)

    emitted = forecasts(0.0)
    with decomposition.nothing_retrieved():
        assert torch.equal(forecasts(5.0), emitted)
    assert not torch.allclose(forecasts(5.0), emitted)


def test_the_committed_records_are_the_ablations_runs_split_in_two():
    records = decomposition.read()
    assert records, "no committed records"
    ablated = {(r["lookback"], r["horizon"]): r for r in significance.read(decomposition.placebo.TWIN_LOSSES)}
    assert {(r["lookback"], r["horizon"]) for r in records} == set(ablated)
    for record in records:
        twin = ablated[(record["lookback"], record["horizon"])]
        assert record["seeds"] == twin["seeds"]
        # the attention forecast is the ablation's: its test MSE per seed and its pooled window losses
        assert record["test_mse"]["attention"] == pytest.approx(
            twin["test_mse"][decomposition.ATTENTION], rel=1e-4
        )
        assert record["losses"]["attention"] == pytest.approx(
            twin["losses"][decomposition.ATTENTION], rel=1e-4
        )
        for forecast in decomposition.FORECASTS:
            assert statistics.mean(record["losses"][forecast]) == pytest.approx(
                statistics.mean(record["test_mse"][forecast]), rel=1e-5
            )
        base, attention = (statistics.mean(record["losses"][f]) for f in ("base", "attention"))
        for test, ratio in (
            (record["base_against_twin"], base / statistics.mean(twin["losses"][decomposition.TWIN])),
            (record["attention_against_base"], attention / base),
        ):
            assert test["ratio"] == pytest.approx(ratio, rel=1e-9)
            assert test["low"] < test["ratio"] < test["high"] and 0 < test["p_value"] <= 1


def test_the_readme_table_is_rendered_from_the_committed_records():
    document = (REPO / "benchmarks" / "README.md").read_text()
    block = document.split(decomposition.BEGIN)[1].split(decomposition.END)[0]
    assert block.strip() == decomposition.render(decomposition.read()).strip()
