"""benchmarks/paired_loss_test.py tells a real difference of two forecasters' window losses from
what overlapping windows produce by chance: it keeps its size where windows share hours, finds a
difference that is there, and its interval and p-value agree."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import paired_loss_test as paired  # noqa: E402

DRAWS = 20_000  # null draws in these tests (the benchmark's SIMULATIONS is 10 times as many)


def test_the_autocovariances_are_the_textbook_sums():
    series = np.random.default_rng(0).normal(size=50)
    centred = series - series.mean()
    expected = [np.sum(centred[: 50 - k] * centred[k:]) / 50 for k in range(6)]
    np.testing.assert_allclose(paired.autocovariances(series, 5), expected, atol=1e-12)


def test_window_losses_that_share_hours_are_sums_of_hourly_terms():
    terms = np.arange(10.0)
    np.testing.assert_allclose(paired.overlapping_sums(terms, 3), [3, 6, 9, 12, 15, 18, 21, 24])


def sharing_hours(rng: np.random.Generator, windows: int, horizon: int, spread: float) -> np.ndarray:
    """Window losses about 1 whose windows share hours as forecast windows do."""
    return (
        1.0 + spread * paired.overlapping_sums(rng.standard_normal(windows + horizon - 1), horizon) / horizon
    )


def scaled_pair(
    seed: int, windows: int, horizon: int, factor: float, noise: float
) -> tuple[np.ndarray, np.ndarray]:
    """A's losses ``factor`` times B's plus independent noise, B's sharing hours (spread 0.2)."""
    rng = np.random.default_rng(seed)
    b = sharing_hours(rng, windows, horizon, 0.2)
    return factor * b + noise * rng.standard_normal(windows), b


def autocorrelated_hours(rng: np.random.Generator, count: int, phi: float) -> np.ndarray:
    """AR(1) per-hour terms, started in their stationary distribution."""
    shocks = rng.standard_normal(count)
    terms = np.empty(count)
    terms[0] = shocks[0] / np.sqrt(1 - phi**2)
    for hour in range(1, count):
        terms[hour] = phi * terms[hour - 1] + shocks[hour]
    return terms


def test_with_no_difference_it_rejects_about_one_time_in_twenty_though_windows_share_hours():
    # the hard case: the windows share hours over a large share of the period (H = 96 of 400
    # windows) and the per-hour terms are autocorrelated too; a test that ignored the overlap
    # rejects far more often
    rng = np.random.default_rng(1)
    horizon, windows, trials = 96, 400, 600
    rejected = 0
    for _ in range(trials):
        hours = autocorrelated_hours(rng, windows + horizon - 1, phi=0.9)
        difference = paired.overlapping_sums(hours, horizon) / horizon
        rejected += (
            paired.paired_test(1.0 + 0.01 * difference, np.ones(windows), horizon, DRAWS).p_value < 0.05
        )
    assert 0.02 <= rejected / trials <= 0.09  # a null that ignores the overlap: about 0.14


def test_a_real_difference_is_found_and_its_ratio_is_the_ratio_of_the_means():
    horizon = 24
    better, base = scaled_pair(2, 2000, horizon, factor=0.95, noise=0.01)
    found = paired.paired_test(better, base, horizon, DRAWS)
    assert found.ratio == pytest.approx(better.mean() / base.mean())
    assert found.verdict == "lower" and found.high < 1.0 and found.p_value < 0.01
    assert paired.paired_test(base, better, horizon, DRAWS).verdict == "higher"


def test_the_interval_holds_one_exactly_when_the_p_value_is_above_the_level():
    rng = np.random.default_rng(3)
    horizon, windows = 24, 600
    verdicts = set()
    for shift in np.linspace(0.0, 0.05, 41):
        base = sharing_hours(rng, windows, horizon, 0.1)
        tested = paired.paired_test(
            base * (1 - shift) + 0.02 * rng.standard_normal(windows), base, horizon, DRAWS
        )
        assert (tested.low <= 1.0 <= tested.high) == (tested.verdict == "not resolved"), (shift, tested)
        assert (tested.verdict == "not resolved") == (tested.p_value > 1 - paired.LEVEL)
        verdicts.add(tested.verdict)
    assert verdicts == {"lower", "not resolved"}


def test_the_interval_is_every_ratio_the_test_would_not_reject():
    # Fieller's interval inverts the test: at its ends |mean(a - R b)| / se(a - R b) is the
    # critical value, and at the ratio itself it is 0
    horizon, windows = 24, 800
    a, b = scaled_pair(4, windows, horizon, factor=0.8, noise=0.05)
    tested = paired.paired_test(a, b, horizon, DRAWS)
    critical = paired.critical_value(paired.null_statistics(windows, horizon, tested.bandwidth, DRAWS))

    def statistic_at(ratio: float) -> float:
        return float(abs(paired.statistic(a - ratio * b, tested.bandwidth)))

    assert statistic_at(tested.low) == pytest.approx(critical, rel=1e-6)
    assert statistic_at(tested.high) == pytest.approx(critical, rel=1e-6)
    assert statistic_at(tested.ratio) < 1e-9 and tested.low < tested.ratio < tested.high


def test_identical_forecasts_are_not_different_and_a_constant_gap_is():
    losses = np.random.default_rng(5).uniform(0.5, 1.5, 300)
    same = paired.paired_test(losses, losses, 24, DRAWS)
    assert same.p_value == 1.0 and same.verdict == "not resolved" and same.ratio == 1.0
    assert paired.paired_test(losses + 0.1, losses, 24, DRAWS).verdict == "higher"


def test_where_bs_own_mean_is_not_resolved_the_interval_is_unbounded_and_the_p_value_decides():
    # heavy-tailed losses over few horizons: B's mean alone is not resolved from 0, so no ratio is
    # excluded; a constant gap of 0.1 is still a difference beyond doubt
    rng = np.random.default_rng(6)
    b = np.exp(2.0 * paired.overlapping_sums(rng.standard_normal(300 + 23), 24) / np.sqrt(24))
    tested = paired.paired_test(b + 0.1, b, 24, DRAWS)
    assert (tested.low, tested.high) == (-np.inf, np.inf)
    assert tested.p_value < 0.001 and tested.verdict == "higher"


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="two \\(N,\\) arrays of one shape"):
        paired.paired_test(np.ones(10), np.ones(11), 2)
    with pytest.raises(ValueError, match="must be finite"):
        paired.paired_test(np.array([1.0, np.nan, 1.0]), np.ones(3), 1)
    with pytest.raises(ValueError, match="too few for a horizon of 720"):
        paired.paired_test(np.ones(500), np.ones(500), 720)
