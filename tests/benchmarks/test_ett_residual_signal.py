"""benchmarks/ett_residual_signal.py bounds what a linear map of the look-back adds to a trained
network: its ridge recovers a linear rule, its records are of the benchmark's own runs, and a run
scores selection only."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from forecaster.baselines import nlinear_design
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import ett_benchmark  # noqa: E402
import ett_residual_signal as signal  # noqa: E402


def test_the_ridge_recovers_a_linear_rule_and_the_penalty_shrinks_it():
    rng = np.random.default_rng(0)
    past = rng.normal(size=(500, 8)).cumsum(axis=1)  # (N, L)
    rule = rng.normal(size=(8, 3))  # (L - 1 + bias, H)
    residual = nlinear_design(past) @ rule  # (N, H): exactly linear in the features
    assert nlinear_design(past).shape == (500, 8) and np.all(nlinear_design(past)[:, -1] == 1)
    np.testing.assert_allclose(signal.ridge(nlinear_design(past), residual, 1e-9), rule, atol=1e-6)
    shrunk = signal.ridge(nlinear_design(past), residual, 1e6)
    assert np.linalg.norm(shrunk) < 0.1 * np.linalg.norm(rule)


def test_the_committed_records_are_the_benchmarks_own_runs():
    # each record retrains a committed run (run_config, the same seed): its own selection MSE is that
    # run's, so the estimate is about networks the tables show or showed, not about other weights.
    # The sixth pass measured the runs of its time: the attention network's are superseded since the
    # tenth pass (its lag scale), so a record may be a superseded run's
    records = signal.read()
    assert records, "no committed records"
    runs: dict[tuple, list[dict]] = {}
    for r in ett_benchmark.recorded_runs():
        if r.get("selection_folds"):
            runs.setdefault((r["network"], r["lookback"], r["horizon"], r["seed"]), []).append(r)
    for record in records:
        candidates = runs[(record["network"], record["lookback"], record["horizon"], record["seed"])]
        assert any(
            record["selection_mse"] == pytest.approx(ett_benchmark.folds_mse(run, 2), rel=1e-4)
            for run in candidates
        ), record
        assert set(record["ratios"]) == {str(p) for p in signal.PENALTIES}


def test_the_render_shows_the_best_ratio_per_seed_its_mean_and_the_grids_edge():
    largest = str(max(signal.PENALTIES))
    records = [
        {"network": "n", "lookback": 96, "horizon": 24, "seed": 1, "selection_mse": 0.05}
        | {"ratios": {"1.0": 1.01, "10.0": 0.98, largest: 0.99}},
        {"network": "n", "lookback": 96, "horizon": 24, "seed": 0, "selection_mse": 0.05}
        | {"ratios": {"1.0": 1.02, "10.0": 1.01, largest: 1.001}},  # no correction helps: 1
        {"network": "n", "lookback": 96, "horizon": 48, "seed": 0, "selection_mse": 0.07}
        | {"ratios": {"1.0": 1.01, "10.0": 0.99, largest: 0.97}},  # the best at the edge
    ]
    table = signal.render(records)
    assert "| n | 96 | 24 | 0.0500 | 1.0000 / 0.9800 (n=2) | 0.9900 |" in table
    assert "| n | 96 | 48 | 0.0700 | 0.9700* (n=1) | 0.9700 |" in table
    assert "* the best at the largest penalty" in table
    assert "*" not in signal.render(records[:2])


def test_a_rerun_replaces_its_own_record_and_keeps_the_others(tmp_path):
    old = {
        "network": "n",
        "lookback": 96,
        "horizon": 24,
        "seed": 0,
        "selection_mse": 0.05,
        "ratios": {"1.0": 1.0},
    }
    other = old | {"seed": 1}
    new = old | {"ratios": {"1.0": 0.9}}
    path = tmp_path / "signal.jsonl"
    ett_benchmark.write_runs(path, signal.merged([old, other], new))
    assert signal.read(path) == [other, new] and not path.with_suffix(".partial").exists()


@pytest.mark.slow  # trains a real model: in make test, not make test-fast
def test_a_run_trains_as_the_benchmark_and_never_reads_test(monkeypatch):
    from forecaster.data.datamodule import PreparedSeries

    windows = PreparedSeries.windows

    class Sealed:
        """The test split's windows: their count may be checked (prepare does, for every split),
        nothing in them read."""

        def __init__(self, sealed) -> None:
            self.count = len(sealed)

        def __len__(self) -> int:
            return self.count

        def __getattr__(self, name: str):
            raise AssertionError(f"the residual signal read the test split ({name})")

    def sealing_test(self, split, *args, **kwargs):
        opened = windows(self, split, *args, **kwargs)
        return Sealed(opened) if split == "test" else opened

    monkeypatch.setattr(PreparedSeries, "windows", sealing_test)
    record = signal.measure("seg-seq2seq", 96, 24, 0)
    committed = next(
        r
        for r in ett_benchmark.read_runs(ett_benchmark.RAW_RESULTS)
        if (r["network"], r["lookback"], r["horizon"], r["seed"]) == ("seg-seq2seq", 96, 24, 0)
    )
    assert record["selection_mse"] == pytest.approx(ett_benchmark.folds_mse(committed, 2), rel=1e-4)
    assert record["epochs_cap"] == ett_benchmark.EPOCHS and set(record["ratios"]) == {
        str(p) for p in signal.PENALTIES
    }
    assert 0.5 < signal.best(record) <= 1.0


def test_the_command_line_names_what_is_wrong(tmp_path):
    script = [sys.executable, str(REPO / "benchmarks/ett_residual_signal.py")]
    for arguments, says in (
        (["seg-seq2seq", "--horizons", "999", "--lookbacks", "96"], "--horizons: none of [999]"),
        (["seg-seq2seq", "--render"], "--render only prints"),
        (["--readme", str(tmp_path / "R.md")], "use it with --render"),
        (["seg-seq2seq", "--seeds", "a"], "comma-separated integers"),
        (["seg-seq2seq", "--lookbacks", "100"], "--lookbacks: [100] not in [96, 336]"),
    ):
        done = subprocess.run([*script, *arguments], capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and says in done.stderr, (arguments, done.stderr[-500:])
