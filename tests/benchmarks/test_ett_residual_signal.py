"""benchmarks/ett_residual_signal.py bounds what a linear map of the look-back adds to a trained
network: its ridge recovers a linear rule, its records are of the benchmark's own runs, and a run
scores selection only."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import ett_benchmark  # noqa: E402
import ett_residual_signal as signal  # noqa: E402


def test_the_ridge_recovers_a_linear_rule_and_the_penalty_shrinks_it():
    rng = np.random.default_rng(0)
    past = rng.normal(size=(500, 8)).cumsum(axis=1)  # (N, L)
    rule = rng.normal(size=(8, 3))  # (L - 1 + bias, H)
    residual = signal.features(past) @ rule  # (N, H): exactly linear in the features
    assert signal.features(past).shape == (500, 8) and np.all(signal.features(past)[:, -1] == 1)
    np.testing.assert_allclose(signal.ridge(signal.features(past), residual, 1e-9), rule, atol=1e-6)
    shrunk = signal.ridge(signal.features(past), residual, 1e6)
    assert np.linalg.norm(shrunk) < 0.1 * np.linalg.norm(rule)


def test_the_committed_records_are_the_benchmarks_own_runs():
    # each record retrains a committed run (run_config, the same seed): its own selection MSE is that
    # run's, so the bound is about the networks the tables show, not about other weights
    records = signal.read()
    assert records, "no committed records"
    runs = {
        (r["network"], r["lookback"], r["horizon"], r["seed"]): r
        for r in ett_benchmark.read_runs(ett_benchmark.RAW_RESULTS)
        if r.get("selection_folds")
    }
    for record in records:
        run = runs[(record["network"], record["lookback"], record["horizon"], record["seed"])]
        assert record["selection_mse"] == pytest.approx(ett_benchmark.folds_mse(run, 2), rel=1e-4)
        assert set(record["ratios"]) == {str(p) for p in signal.PENALTIES}


def test_the_render_shows_the_best_ratio_per_seed_and_its_mean():
    records = [
        {"network": "n", "lookback": 96, "horizon": 24, "seed": s, "selection_mse": 0.05}
        | {"ratios": {"1.0": 1.01, "10.0": best}}
        for s, best in ((1, 0.98), (0, 0.99))
    ]
    table = signal.render(records)
    assert "| n | 96 | 24 | 0.0500 | 0.9900 / 0.9800 (n=2) | 0.9850 |" in table


def test_the_readme_table_is_the_committed_records_rendered():
    readme = (REPO / "benchmarks/README.md").read_text()
    block = ett_benchmark.readme_tables(readme, (signal.BEGIN, signal.END))
    assert block == signal.render(signal.read())


@pytest.mark.slow  # trains a real model: in make test, not make test-fast
def test_a_run_trains_as_the_benchmark_and_keeps_its_record(tmp_path):
    results = tmp_path / "signal.jsonl"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/ett_residual_signal.py"), "seg-seq2seq"]
        + ["--lookbacks", "96", "--horizons", "24", "--seeds", "0", "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    committed = next(
        r
        for r in ett_benchmark.read_runs(ett_benchmark.RAW_RESULTS)
        if (r["network"], r["lookback"], r["horizon"], r["seed"]) == ("seg-seq2seq", 96, 24, 0)
    )
    assert record["selection_mse"] == pytest.approx(ett_benchmark.folds_mse(committed, 2), rel=1e-4)
    assert 0.5 < min(record["ratios"].values()) < 1.5
    assert "test" not in done.stdout.lower()
