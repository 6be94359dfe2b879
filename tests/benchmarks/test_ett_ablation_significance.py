"""benchmarks/ett_ablation_significance.py tests the attention ablation's test differences: its
records are about the ablation table's own runs, a retrained run that is not the committed one
stops it, and the table says which differences the test period resolves."""

from __future__ import annotations

import statistics
import subprocess
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import ett_ablation_significance as significance  # noqa: E402
import ett_benchmark  # noqa: E402

ATTENTION, NONE = significance.ATTENTION, significance.NONE


def committed_run(network: str, lookback: int, horizon: int, seed: int) -> dict:
    return ett_benchmark.committed_run(network, lookback, horizon, seed)


def committed_test_mse(network: str, lookback: int, horizon: int, seed: int) -> float:
    return committed_run(network, lookback, horizon, seed)["test"]["model"]["mse"]


RECORDS = (significance.RESULTS, significance.RESULTS_LAG_SCALE_10)


@pytest.mark.parametrize("path", RECORDS, ids=lambda path: path.stem)
def test_the_committed_records_are_the_ablation_tables_runs(path):
    # every seed's test MSE is that of both networks' runs of one commit, run together, so the pooled
    # ratio is the ablation table's of that time: the seventh pass measured the runs at the default
    # lag scale (c3aaf70, superseded since), the tenth pass the committed runs at 10 (benchmarks/README.md)
    records = significance.read(path)
    assert records, "no committed records"
    for record in records:
        cell = (record["lookback"], record["horizon"])
        shared: set[str] | None = None
        for network in (ATTENTION, NONE):
            by_commit = ett_benchmark.runs_by_commit(network, *cell, record["seeds"])
            matching = {
                commit
                for commit, runs in by_commit.items()
                if record["test_mse"][network]
                == pytest.approx([r["test"]["model"]["mse"] for r in runs], rel=1e-4)
            }
            shared = matching if shared is None else shared & matching
        assert shared, cell  # no commit at which both networks ran these runs
        if path == significance.RESULTS_LAG_SCALE_10:  # today's ablation table's runs, not earlier ones
            committed = {
                committed_run(network, *cell, s)["commit"]
                for network in (ATTENTION, NONE)
                for s in record["seeds"]
            }
            assert committed <= shared, cell
        ratio = statistics.mean(record["test_mse"][ATTENTION]) / statistics.mean(record["test_mse"][NONE])
        assert record["ratio"] == pytest.approx(ratio, rel=1e-5)  # from the kept losses (6 digits)
        assert record["low"] < record["ratio"] < record["high"] and 0 < record["p_value"] <= 1
        kept = [statistics.mean(record["losses"][network]) for network in (ATTENTION, NONE)]
        assert kept == pytest.approx(
            [statistics.mean(record["test_mse"][n]) for n in (ATTENTION, NONE)], rel=1e-5
        )


@pytest.mark.parametrize("path", RECORDS, ids=lambda path: path.stem)
def test_the_readme_table_is_rendered_from_the_committed_records(path):
    document = (REPO / "benchmarks" / "README.md").read_text()
    begin, end = significance.markers(path)
    assert document.count(begin) == 1 and document.count(end) == 1
    block = document.split(begin)[1].split(end)[0]
    assert block.strip() == significance.render(significance.read(path)).strip()


@pytest.mark.slow  # 200,000 null draws: about 25 s
def test_a_retest_of_the_kept_losses_gives_the_recorded_test():
    # the smallest cell: the test is a function of the kept window losses alone
    record = next(r for r in significance.read() if (r["lookback"], r["horizon"]) == (96, 24))
    assert significance.tested(record) | {"tested_at": record["tested_at"]} == record  # all but the commit


def test_a_retrained_run_that_is_not_the_committed_one_stops_the_measurement():
    mse = committed_test_mse(NONE, 96, 24, 0)
    significance.reproduced(NONE, 96, 24, 0, mse * (1 + 1e-6))  # the same run, float noise
    with pytest.raises(SystemExit, match="no longer trains the committed run"):
        significance.reproduced(NONE, 96, 24, 0, mse * 1.01)
    with pytest.raises(SystemExit, match="no committed run"):
        significance.reproduced(NONE, 96, 25, 0, mse)


def record(
    lookback: int, horizon: int, low: float, high: float, ratio: float = 1.0, p_value: float = 0.5
) -> dict:
    return {
        "losses": {ATTENTION: [0.1] * 10, NONE: [0.1] * 10},
        "lookback": lookback,
        "horizon": horizon,
        "seeds": [0, 1],
        "test_mse": {ATTENTION: [0.099, 0.101], NONE: [0.1, 0.1]},
        "ratio": ratio,
        "low": low,
        "high": high,
        "p_value": p_value,
        "windows": 2000,
        "bandwidth": horizon + 168,
    }


def test_the_table_says_which_differences_the_test_period_resolves():
    table = significance.render(
        [
            record(336, 96, 1.01, 1.05, ratio=1.03, p_value=0.01),
            record(96, 24, 0.98, 1.02),
            record(96, 48, 0.9, 0.99, ratio=0.95, p_value=0.0499),
        ]
    )
    lines = table.splitlines()
    assert lines[2].startswith("| 96 | 24 | 2000 (84.3) | 0.1000 / 0.1000 | 0.9900 / 1.0100 | 1.000 |")
    assert lines[2].endswith("| 0.980 to 1.020 | 0.5000 | not resolved |")
    assert lines[3].endswith("| lower |") and lines[4].endswith("| higher |")
    assert "lower in 1 of 3 cells, higher in 1, not resolved by the test period in 1 (each cell" in table


def test_a_rerun_replaces_its_own_record_and_keeps_the_others(tmp_path):
    old, other = record(96, 24, 0.9, 1.1), record(96, 48, 0.9, 1.1)
    new = old | {"p_value": 0.01}
    path = tmp_path / "significance.jsonl"
    ett_benchmark.write_runs(path, significance.merged([old, other], new))
    assert significance.read(path) == [other, new] and not path.with_suffix(".partial").exists()


@pytest.mark.slow  # trains two real models: in make test, not make test-fast
def test_a_cell_is_measured_on_the_committed_runs():
    measured = significance.measure(96, 24, [0])  # stops unless both runs are the committed ones
    assert measured["windows"] == 2857 and measured["bandwidth"] == 24 + 168
    assert measured["low"] < measured["ratio"] < measured["high"]


def test_the_command_line_names_what_is_wrong(tmp_path):
    script = [sys.executable, str(REPO / "benchmarks/ett_ablation_significance.py")]
    for arguments, says in (
        (["--horizons", "999", "--lookbacks", "96"], "--horizons: none of [999]"),
        (["--readme", str(tmp_path / "R.md")], "use it with --render"),
        (["--seeds", "a"], "comma-separated integers"),
        (["--render", "--readme", str(tmp_path / "R.md")], "has no"),
        (["--render", "--results", str(tmp_path / "none.jsonl")], "no records in"),
        (["--retest", "--results", str(tmp_path / "none.jsonl")], "no records in"),
        (["--threads", "0"], "a positive integer, not '0'"),
    ):
        (tmp_path / "R.md").write_text("no markers\n")
        done = subprocess.run([*script, *arguments], capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and says in done.stderr, (arguments, done.stderr[-500:])
