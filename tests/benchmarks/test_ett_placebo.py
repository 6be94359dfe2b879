"""benchmarks/ett_placebo.py trains the ablation's attention network retrieving other windows'
look-backs: in training another window of the batch, never its own, and nothing in evaluation; its
records are tested against the ablation's twin, and its table is theirs."""

from __future__ import annotations

import statistics
import sys

import pytest
import torch

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import ett_ablation_significance as significance  # noqa: E402
import ett_benchmark  # noqa: E402
import ett_placebo as placebo  # noqa: E402

from forecaster.models.step_attention import StepAttention  # noqa: E402


@pytest.mark.parametrize("size", [2, 3, 7, 128])
def test_a_derangement_sends_every_row_to_another(size):
    source = placebo.derangement(size, torch.Generator().manual_seed(size))
    assert sorted(source.tolist()) == list(range(size))
    assert all(source[row] != row for row in range(size))


def retrieving(attention: StepAttention, past: torch.Tensor) -> torch.Tensor:
    """What each window's look-back adds to its values, (B, L, 1) -> (B,): the value of the
    look-back step it holds, with the value projection set to 1."""
    return attention.input_values_of(past)[:, 0, 0]


def test_the_placebo_retrieves_another_windows_look_back_in_training_nothing_in_evaluation():
    attention = StepAttention(query_size=4, state_size=4, input_size=1, value_size=1, horizon=2, lookback=3)
    torch.nn.init.ones_(attention.input_values.weight)
    batch = torch.arange(5.0).reshape(5, 1, 1).expand(5, 3, 1)  # window b holds b everywhere
    with placebo.values_from_other_windows(seed=0):
        attention.train()
        read = retrieving(attention, batch)
        assert sorted(read.tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert all(read[b] != b for b in range(5))  # another window of the batch
        assert retrieving(attention, batch[:1]).tolist() == [0.0]  # alone in its batch: nothing
        attention.eval()
        assert retrieving(attention, batch).tolist() == [0.0] * 5
    assert retrieving(attention, batch).tolist() == batch[:, 0, 0].tolist()  # its own again


def test_the_committed_records_are_tested_against_the_ablations_twin():
    records = placebo.read()
    assert records, "no committed records"
    for record in records:
        twin = placebo.twin_losses(record["lookback"], record["horizon"])
        assert record["seeds"] == twin["seeds"] and len(record["test_mse"]) == len(record["seeds"])
        assert len(record["losses"]) == len(twin["losses"][placebo.TWIN]) == record["windows"]
        pooled = statistics.mean(record["losses"])
        assert pooled == pytest.approx(statistics.mean(record["test_mse"]), rel=1e-5)
        assert record["ratio"] == pytest.approx(
            pooled / statistics.mean(twin["losses"][placebo.TWIN]), rel=1e-9
        )
        assert record["low"] < record["ratio"] < record["high"] and 0 < record["p_value"] <= 1
        retrieval = record["attention_against_placebo"]
        attention = statistics.mean(twin["losses"][placebo.ATTENTION])
        assert retrieval["ratio"] == pytest.approx(attention / pooled, rel=1e-9)
        assert retrieval["low"] < retrieval["ratio"] < retrieval["high"] and 0 < retrieval["p_value"] <= 1
    assert {(r["lookback"], r["horizon"]) for r in records} == {
        (r["lookback"], r["horizon"]) for r in significance.read(placebo.TWIN_LOSSES)
    }


def test_the_readme_table_is_rendered_from_the_committed_records():
    document = (REPO / "benchmarks" / "README.md").read_text()
    block = document.split(placebo.BEGIN)[1].split(placebo.END)[0]
    assert block.strip() == placebo.render(placebo.read()).strip()


def test_in_evaluation_the_placebo_network_forecasts_without_what_its_attention_retrieves():
    """End to end on the ablation's own network: what a forecast step retrieves reaches the forecast
    only through ``input_values_of``, so inside the placebo the forecast does not depend on the
    value projection, and outside it does."""
    from forecaster.models import build_network

    config = ett_benchmark.run_config(
        96, 24, placebo.ATTENTION, 0, ett_benchmark.EPOCHS, "cpu"
    ).forecast_config()
    network = build_network(
        config.model, series_features=1, calendar_features=0, horizon=24, lookback=96, season=24
    )
    network.eval()
    past = torch.randn(4, 96, 1)
    projection = network.network.attention.input_values.weight

    def forecasts(scale: float) -> torch.Tensor:
        with torch.no_grad():
            projection.fill_(scale)
            return network(past).mean  # (B, H)

    with placebo.values_from_other_windows(seed=0):
        assert torch.equal(forecasts(0.0), forecasts(5.0))
    assert not torch.allclose(forecasts(0.0), forecasts(5.0))
