"""The ETT tables are rendered from raw runs only, and the row marked chosen is picked on the
selection window: a network that is best on test but not on selection is not chosen."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.rendering import render_into_readme

REPO = Path(__file__).resolve().parents[2]


def record(
    network: str,
    seed: int,
    selection_mse: float,
    test_mse: float,
    horizon: int = 24,
    folds: tuple[float, ...] | None = None,
) -> dict:
    def scores(mse: float) -> dict:
        return {
            "model": {"mse": mse, "mae": mse / 2, "mae_c": mse * 9},
            "naive": {"mse": 0.1, "mae": 0.05, "mae_c": 0.9},
            "seasonal_naive": {"mse": 0.2, "mae": 0.1, "mae_c": 1.8},
        }

    return {
        "network": network,
        "lookback": 96,
        "horizon": horizon,
        "seed": seed,
        "commit": "abc1234",
        "settings": {},
        "std_c": 9.1765,
        "seconds": 10.0,
        "epochs": 3,
        "test_windows": 2881 - horizon,
        "test": scores(test_mse),
        "selection": scores(selection_mse),
        "coverage_80": 0.8,
        "run_id": f"{network}-{seed}",
        **({} if folds is None else {"selection_folds": [scores(mse) for mse in folds]}),
    }


def rendered(tmp_path, runs: list[dict]) -> str:
    raw = tmp_path / "runs.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in runs))
    command = [sys.executable, str(REPO / "benchmarks/ett_benchmark.py"), "--render", "--results", str(raw)]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def test_the_chosen_row_is_picked_on_selection_not_test(tmp_path):
    runs = [
        *(record("lstm", s, selection_mse=0.030, test_mse=0.060 + s / 1000) for s in range(3)),
        *(record("gru", s, selection_mse=0.040, test_mse=0.050 + s / 1000) for s in range(3)),  # best test
    ]
    raw = tmp_path / "runs.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in runs))
    table = subprocess.run(
        [sys.executable, str(REPO / "benchmarks/ett_benchmark.py"), "--render", "--results", str(raw)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lstm = next(line for line in table.splitlines() if line.startswith("| **lstm**"))
    gru = next(line for line in table.splitlines() if line.startswith("| **gru**"))
    assert "(chosen)" in lstm and "(chosen)" not in gru
    assert "0.0610/0.0305 +-0.0010/0.0005 (n=3)" in lstm  # mean +- sample std over the 3 seeds
    assert "6 runs at commit(s) abc1234" in table


def test_the_readme_tables_are_the_committed_raw_results_rendered():
    """benchmarks/README.md's ETT tables are exactly what --render makes of the committed runs:
    a hand edit of a figure, or results left uncommitted, fails here."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark

    readme = (REPO / "benchmarks/README.md").read_text()
    runs = ett_benchmark.read_runs(ett_benchmark.RAW_RESULTS)
    assert runs, "no raw results committed in benchmarks/results/ett-runs.jsonl"
    assert ett_benchmark.readme_tables(readme) == ett_benchmark.render(runs, ett_benchmark.read_linear())


def linear_record(lookback: int, horizon: int, selection_mse: float, test_mse: float) -> dict:
    """An NLinear record as benchmarks/ett_linear.py writes it."""
    return {
        "network": "nlinear-ls",
        "lookback": lookback,
        "horizon": horizon,
        "commit": "abc1234",
        "seconds": 0.5,
        "selection_folds": [{"model": {"mse": selection_mse, "mae": 0.1}}] * 2,
        "test": {"model": {"mse": test_mse, "mae": 0.2, "mae_c": 1.8}},
    }


def test_the_linear_reference_is_shown_beside_the_networks_and_never_picked(tmp_path):
    # NLinear below the pick on selection at H=24: the sentence says it would be chosen, yet the
    # (chosen) mark stays on the networks' own pick; its test figure is shown, not used
    runs = [record("lstm", s, selection_mse=0.030, test_mse=0.060) for s in range(2)]
    linear = tmp_path / "linear.jsonl"
    linear.write_text(json.dumps(linear_record(96, 24, selection_mse=0.020, test_mse=0.070)) + "\n")
    raw = tmp_path / "runs.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in runs))
    command = [sys.executable, str(REPO / "benchmarks/ett_benchmark.py"), "--render", "--results", str(raw)]
    table = subprocess.run(
        [*command, "--linear-results", str(linear)], capture_output=True, text=True, check=True
    ).stdout
    assert "| nlinear-ls (NLinear, least squares, these windows) | 0.0700/0.2000 |" in table
    assert "| nlinear-ls: selection MSE, test MAE degC | sel. MSE 0.0200; 1.800 degC |" in table
    assert "H=24: 0.0200 against lstm's 0.0300. As a candidate it would be chosen at H=24" in table
    assert "its test MSE is below the chosen network's at no horizon" in table
    assert "(chosen)" in next(line for line in table.splitlines() if line.startswith("| **lstm**"))
    missing = subprocess.run(
        [*command, "--linear-results", str(tmp_path / "none.jsonl")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "nlinear-ls" not in missing


def test_render_writes_between_the_markers_only(tmp_path):
    raw = tmp_path / "runs.jsonl"
    raw.write_text("".join(json.dumps(record("lstm", s, 0.03, 0.06)) + "\n" for s in range(2)))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark

    text = render_into_readme(tmp_path, "ett_benchmark.py", raw, ett_benchmark.BEGIN, ett_benchmark.END)
    assert "| **lstm** |" in text


def test_the_readme_peer_table_is_the_committed_peer_runs_rendered():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import peers

    runs = [json.loads(line) for line in peers.RAW_RESULTS.read_text().splitlines()]
    assert peers.render(runs) in (REPO / "benchmarks/README.md").read_text()


def test_only_seeds_adds_chosen_seeds_and_names_a_bad_value():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from ett_benchmark import seed_list

    assert seed_list("1, 2", 3) == {1, 2} and seed_list(None, 3) is None
    for bad, says in (("3", "[3] not in 0..2"), ("one", "'one' is not a comma-separated list")):
        done = subprocess.run(
            [sys.executable, str(REPO / "benchmarks/ett_benchmark.py"), "--only-seeds", bad, "--render"],
            capture_output=True,
            text=True,
        )
        assert done.returncode != 0 and "--only-seeds: " in done.stderr and says in done.stderr
        assert "Traceback" not in done.stderr


def test_the_rolling_origin_rule_picks_and_the_rank_table_compares_it_with_one_fold(tmp_path):
    """Three networks scored on both folds: fold 1 alone (k = 1) favours `a`, the mean of the two
    folds `b`, which is also best on test. The table marks `b` chosen, and its rank rows say what
    each rule picked from the same runs. A run scored by the old rule (no folds) is shown but
    never picked, however low its selection figure."""
    fold_figures = {"a": (0.10, 0.30), "b": (0.12, 0.20), "c": (0.14, 0.28)}  # means .20 / .16 / .21
    test_figures = {"a": 0.07, "b": 0.05, "c": 0.06}
    runs = [
        record(net, 0, selection_mse=sum(folds) / 2, test_mse=test_figures[net], folds=folds)
        for net, folds in fold_figures.items()
    ]
    runs.append(record("old", 0, selection_mse=0.01, test_mse=0.09))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark

    ett_benchmark.NETWORKS.update({name: {} for name in ("a", "b", "c", "old")})
    table = ett_benchmark.render(runs)
    row = {net: next(line for line in table.splitlines() if line.startswith(f"| **{net}**")) for net in "abc"}
    assert "(chosen)" in row["b"] and "(chosen)" not in row["a"] + row["c"]
    old = next(line for line in table.splitlines() if line.startswith("| **old**"))
    assert "[k=1]" in old and "(chosen)" not in old
    rank = next(line for line in table.splitlines() if line.startswith("| 96 | 24 | 3 |"))
    assert "| b (0.0500) | a (0.0700, +40.0%) | b (0.0500, +0.0%) |" in rank
    assert "| -0.50 | +0.50 | -0.50 |" in rank  # rho k=1, rho k=2, fold 2 against fold 1
    assert "k = 1: the pick was the best on test in 0 of 1 cells" in table
    assert "k = 2: the pick was the best on test in 1 of 1 cells" in table


def test_the_attention_table_sets_each_attention_row_against_the_same_network_without(tmp_path):
    """Issue 41's ablation: attention against none per cell (ratio of test MSEs), against naive,
    fit seconds as a ratio to the timing reference's, and the alignment of every attention row."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark

    alignment = {"entropy": 0.5, "row_distance": 0.25, "seasonal_share": 0.125}
    alignment |= {"seasonal_share_uniform": 0.0417, "period": 24, "windows": 64}
    test_figures = {24: (0.040, 0.050), 48: (0.090, 0.060)}  # horizon -> (with, without) attention
    runs = []
    for horizon, (attended, plain) in test_figures.items():
        runs += [
            record("seg-seq2seq-attention", 0, 0.1, attended, horizon) | {"train_seconds": 30.0},
            record("seg-seq2seq", 0, 0.1, plain, horizon) | {"train_seconds": 20.0},
            record("seg-gru", 0, 0.1, 0.05, horizon) | {"train_seconds": 10.0},
        ]
        runs[-3]["alignment"] = alignment
    table = ett_benchmark.render(runs)
    assert (
        "| 96 | 24 | 0.0400 +-0.0000 (n=1) | 0.0500 +-0.0000 (n=1) | 0.800 | 0.1000 | 30 / 20 / 10 | 3.00 |"
        in table
    )
    assert "| 96 | 48 | 0.0900 +-0.0000 (n=1) | 0.0600 +-0.0000 (n=1) | 1.500 |" in table
    assert (
        "Attention lower than none in 1 of 2 cells, lower than naive in 2 of 2; fit time 3.00x to 3.00x"
        in table
    )
    assert "| seg-seq2seq-attention | 96 | 24 | no | 0.500 | 0.250 | 12.5% (4.2%) | 0.0400 | 1 |" in table


@pytest.mark.parametrize("lightning", [False, True], ids=["raised", "lightnings-exit"])
def test_ctrl_c_between_or_inside_a_cells_training_keeps_the_cells_before_it(tmp_path, capsys, lightning):
    """A cell script stopped by Ctrl-C keeps the cells it finished and says so (exit 130), whether the
    KeyboardInterrupt reaches it or Lightning, inside fit, turned it into sys.exit(1)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    results = tmp_path / "records.jsonl"
    args = argparse.Namespace(lookbacks="96", horizons="24,48", seeds="0", threads=1, results=results)

    def measure(lookback: int, horizon: int, seeds: list[int]) -> dict:
        if horizon == 48:
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                if lightning:
                    sys.exit(1)
                raise
        return {"lookback": lookback, "horizon": horizon}

    def merged(records: list[dict], record: dict) -> list[dict]:
        return [*records, record]

    try:
        with pytest.raises(SystemExit) as stopped:
            ett_benchmark.measure_cells(args, measure, ett_benchmark.read_runs, merged, str)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped.value.code == 130
    assert [r["horizon"] for r in ett_benchmark.read_runs(results)] == [24]
    assert f"interrupted: {results} holds the cells measured before it" in capsys.readouterr().err
