"""The ETT tables are rendered from raw runs only, and the row marked chosen is picked on the
selection window: a network that is best on test but not on selection is not chosen."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def record(network: str, seed: int, selection_mse: float, test_mse: float, horizon: int = 24) -> dict:
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
    }


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
    assert ett_benchmark.readme_tables(readme) == ett_benchmark.render(runs)


def test_render_writes_between_the_markers_only(tmp_path):
    raw = tmp_path / "runs.jsonl"
    raw.write_text("".join(json.dumps(record("lstm", s, 0.03, 0.06)) + "\n" for s in range(2)))
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark

    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\nbefore\n{ett_benchmark.BEGIN}\nold table\n{ett_benchmark.END}\nafter\n")
    command = [sys.executable, str(REPO / "benchmarks/ett_benchmark.py"), "--render", "--results", str(raw)]
    subprocess.run([*command, "--readme", str(readme)], check=True, capture_output=True)
    text = readme.read_text()
    assert text.startswith("# Title\nbefore\n") and text.endswith(f"{ett_benchmark.END}\nafter\n")
    assert "old table" not in text and "| **lstm** |" in text


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
