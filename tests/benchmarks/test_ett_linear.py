"""The NLinear reference rows are what benchmarks/ett_linear.py makes of the benchmark's windows."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_committed_linear_record_is_what_the_fit_makes_of_the_windows():
    # a least-squares fit has no seed: rerun on the same windows it gives the committed figures
    # (to rounding), so a table row cannot drift from the code or the data it claims
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark
    import ett_linear

    committed = ett_benchmark.read_linear()[(96, 24)]
    fresh = ett_linear.measure(96, 24, committed["std_c"], "now", {})
    assert fresh["train_windows"] == committed["train_windows"]
    assert fresh["test_windows"] == committed["test_windows"] == 2857
    for got, want in zip(fresh["selection_folds"], committed["selection_folds"], strict=True):
        assert got["model"]["mse"] == pytest.approx(want["model"]["mse"], rel=1e-6)
    assert fresh["test"]["model"]["mse"] == pytest.approx(committed["test"]["model"]["mse"], rel=1e-6)
    assert fresh["test"]["model"]["mae"] == pytest.approx(committed["test"]["model"]["mae"], rel=1e-6)


def test_every_benchmark_cell_has_a_linear_record():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark

    cells = {(lookback, h) for lookback, horizons in ett_benchmark.HORIZONS.items() for h in horizons}
    assert set(ett_benchmark.read_linear()) == cells
