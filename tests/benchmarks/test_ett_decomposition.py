"""benchmarks/ett_decomposition.py splits the ablation's attention / twin into what the retrieved term
does (attention / base) and what training beside the attention did to the network under it (base /
twin): its records are of the ablation's own runs. The base, the network's forecast with nothing
retrieved, is tests/forecaster/test_step_attention.py's ``nothing_retrieved``."""

from __future__ import annotations

import statistics
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import ett_ablation_significance as significance  # noqa: E402
import ett_decomposition as decomposition  # noqa: E402


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


def test_the_table_counts_each_factor_on_the_side_it_falls():
    """A cell whose retrieved term lowers its network's forecast (attention below base) and whose
    network under it is above the twin, on selection and on test, is counted so, and its ratios
    are the table's."""
    lookback, horizon, seeds = 96, 24, [0, 1, 2]
    twin_selection = decomposition.placebo.committed_selection(decomposition.TWIN, lookback, horizon, seeds)
    twin_test = decomposition.placebo.twin_losses(lookback, horizon)["test_mse"][decomposition.TWIN]
    base = {"selection": [x * 1.02 for x in twin_selection], "test": [x * 1.03 for x in twin_test]}
    record = {
        "lookback": lookback,
        "horizon": horizon,
        "seeds": seeds,
        "selection_mse": {"base": base["selection"], "attention": [x * 0.99 for x in base["selection"]]},
        "test_mse": {"base": base["test"], "attention": [x * 0.98 for x in base["test"]]},
        "base_against_twin": {"ratio": 1.03, "p_value": 0.5},
        "attention_against_base": {"ratio": 0.98, "p_value": 0.5},
    }
    table = decomposition.render([record])
    row = table.splitlines()[2].split(" | ")
    assert [row[2], row[3], row[4], row[5]] == ["1.0098", "0.9900", "1.0200", "1.0094"]
    assert "0.9800 / 0.9800 / 0.9800" in table and "1.0300 / 1.0300 / 1.0300" in table
    assert (
        "lowers the attention network's own forecast in 1 of 1 cells on selection and 1 on test; the "
        "network under it is above the twin in 1 on selection and 1 on test"
    ) in " ".join(table.split())
