"""benchmarks/ett_probe.py tries a configuration change on the selection window only: its runs
keep no test figure, its ratios are against the committed runs of the same seeds, and a bad
setting is named in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

PROBE = [sys.executable, str(REPO / "benchmarks/ett_probe.py")]


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_a_probe_trains_scores_selection_only_and_keeps_its_run(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark

    results = tmp_path / "probes.jsonl"
    done = subprocess.run(
        [*PROBE, "seg-lstm", "--set", "train.epochs=1", "--lookbacks", "96", "--horizons", "24"]
        + ["--results", str(results)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (record,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert set(record) == {
        *("network", "sets", "lookback", "horizon", "seed", "commit", "machine", "k", "base"),
        *("selection_mse", "selection_naive_mse", "epochs", "seconds"),
    }
    assert record["sets"] == ["train.epochs=1"] and record["epochs"] == 1
    assert record["base"] == {"settings": ett_benchmark.NETWORKS["seg-lstm"], "train": {"ema_decay": 0.99}}
    assert (
        record["machine"]["cpu"] and record["machine"]["cpu_capability"] and record["machine"]["threads"] >= 1
    )
    assert "selection MSE" in done.stdout and "test" not in done.stdout.lower()


def test_ratios_are_against_the_committed_runs_of_the_same_seeds():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from ett_probe import committed_selection, summary

    committed = committed_selection("seg-lstm")
    doubled = [
        {"lookback": 336, "horizon": 96, "seed": s, "selection_mse": 2 * committed[(336, 96, s)]}
        for s in (0, 1)
    ]
    unknown = [{"lookback": 336, "horizon": 96, "seed": 99, "selection_mse": 0.05}]
    lines = summary(doubled, "seg-lstm")
    assert "2.000x committed" in lines[0] and lines[-1].endswith("over 1 cells: 2.000")
    assert "no committed runs of these seeds" in summary(unknown, "seg-lstm")[0]


@pytest.mark.slow  # trains real models: in make test, not make test-fast
def test_a_bad_setting_is_named_in_one_line():
    for bad, says in (("train.ema_decay=1", "train.ema_decay"), ("nonsense", "expected KEY=VALUE")):
        done = subprocess.run([*PROBE, "seg-gru", "--set", bad], capture_output=True, text=True, timeout=300)
        assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr


def test_a_thread_count_that_is_not_positive_is_named_in_one_line():
    done = subprocess.run([*PROBE, "seg-gru", "--threads", "0"], capture_output=True, text=True, timeout=120)
    assert (
        done.returncode != 0
        and "a positive integer, not '0'" in done.stderr
        and "Traceback" not in done.stderr
    )


def test_the_readme_probe_table_is_the_committed_probes_rendered():
    """benchmarks/README.md's table of the configurations tried on today's selection rule is what
    `ett_probe.py --render` makes of the committed probes: no ratio in it is typed by hand."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark
    import ett_probe

    readme = (REPO / "benchmarks/README.md").read_text()
    block = ett_benchmark.readme_tables(readme, (ett_probe.BEGIN, ett_probe.END))
    assert block == ett_probe.render(ett_benchmark.read_runs(ett_probe.PROBES))
    assert "| seg-seq2seq-attention (states layout) |" in block  # probes made before issue 41


def test_the_probes_alignment_table_averages_the_runs_that_recorded_one():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import ett_benchmark
    from ett_probe import alignment_table

    base = {"settings": ett_benchmark.NETWORKS["seg-seq2seq-attention"], "train": {}}

    def probe(sets: list[str], entropy: float, **more) -> dict:
        alignment = {"entropy": entropy, "row_distance": 0.1, "seasonal_share": 0.05}
        alignment["seasonal_share_uniform"] = 0.04
        probe = {"network": "seg-seq2seq-attention", "sets": sets, "lookback": 96, "k": 2, "base": base}
        return {**probe, "alignment": alignment, **more}

    lines = alignment_table([probe([], 0.9), probe([], 0.7), probe(["model.attention_heads=4"], 0.8)])
    rows = [line for line in lines if line.startswith("| seg-seq2seq-attention")]
    assert rows == [
        "| seg-seq2seq-attention (lags layout) | 96 | (unchanged) | 0.800 | 0.100 | 5.0% (4.0%) | 2 |",
        "| seg-seq2seq-attention (lags layout) | 96 | model.attention_heads=4 | 0.800 | 0.100 | 5.0% (4.0%) | 1 |",
    ]
    assert alignment_table([probe([], 0.9, k=1)]) == []  # another selection rule's probes: not shown


def test_attention_probes_are_set_against_the_network_without_attention():
    """The table issue 41's passes judged attention changes by: per cell, the change's mean over
    seeds over the twin's mean over the same seeds; against the twin's probes with the same change
    where it has some (an epoch cap given to both), its committed runs otherwise; then the cells
    below 1, the worst cell and the geometric mean. The committed pair is the first row. A table per
    configuration: the current one, then the one before the tenth pass (lag scale 100), whose
    committed runs are the superseded ones."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from ett_probe import EARLIER_CONFIGURATIONS, against_twin, base_runs, committed_selection, configuration

    twin = committed_selection("seg-seq2seq", 2, configuration("seg-seq2seq"))
    attention = committed_selection("seg-seq2seq-attention", 2, configuration("seg-seq2seq-attention"))
    (_, earlier), *_ = EARLIER_CONFIGURATIONS["seg-seq2seq-attention"]
    attention_before = committed_selection("seg-seq2seq-attention", 2, earlier)
    assert "attention_lag_scale" not in earlier["settings"] and len(attention_before) == 30
    # the network without attention's runs made beside those (the same commits), rerun since
    commits_before = {run["commit"] for run in base_runs("seg-seq2seq-attention", earlier)}
    twin_before = committed_selection("seg-seq2seq", 2, configuration("seg-seq2seq"), commits_before)
    assert len(twin_before) == 30

    def probe(network: str, sets: list[str], horizon: int, seed: int, mse: float) -> dict:
        return {
            "network": network, "sets": sets, "lookback": 96, "horizon": horizon, "seed": seed,
            "k": 2, "base": configuration(network), "selection_mse": mse,
        }  # fmt: skip

    a, b, c = twin[(96, 24, 0)], twin[(96, 24, 1)], twin[(96, 48, 0)]
    a_before = twin_before[(96, 24, 0)]
    unequal = [
        probe("seg-seq2seq-attention", ["x=1"], 24, 0, 2 * a),
        probe("seg-seq2seq-attention", ["x=1"], 24, 1, 4 * b),
        probe("seg-seq2seq-attention", ["x=1"], 48, 0, 0.5 * c),
    ]
    both = [  # the twin probed with the change too, at (96, 48) only: (96, 24) has no reference
        *(probe("seg-seq2seq-attention", ["y=1"], h, 0, 0.06) for h in (24, 48)),
        probe("seg-seq2seq", ["y=1"], 48, 0, 0.05),
    ]
    on_earlier = [{**probe("seg-seq2seq-attention", ["w=1"], 24, 0, 3 * a_before), "base": earlier}]
    elsewhere = [
        {**probe("seg-seq2seq-attention", ["z=1"], 24, 0, 0.05), "base": {"settings": {}, "train": {}}}
    ]
    lines = against_twin(unequal + both + on_earlier + elsewhere)
    tables = [part for part in "\n".join(lines).split("\n\n") if part.strip()]
    assert len(tables) == 4  # heading, table, heading, table, and nothing else

    def rows(table: str) -> list[list[str]]:
        return [line.split(" | ") for line in table.splitlines() if line.startswith("| ")]

    current, previous = rows(tables[1]), rows(tables[3])
    assert "current configuration" in tables[0] and "before the tenth pass" in tables[2]
    assert len(current) == 4  # the header, then three rows: w=1 and z=1 changed other configurations
    committed = sum(attention[(96, 24, s)] for s in (0, 1, 2)) / sum(twin[(96, 24, s)] for s in (0, 1, 2))
    assert current[1][:3] == ["| (committed)", "committed", f"{committed:.4f}"]
    mean_ratio = (2 * a + 4 * b) / (a + b)  # the ratio of the seed means, not the mean ratio 3
    assert current[2][:12] == ["| x=1", "committed", f"{mean_ratio:.4f}", "0.5000", *[""] * 8]
    assert current[2][-4:] == ["1 of 2", f"{mean_ratio:.4f}", f"{(mean_ratio * 0.5) ** 0.5:.4f}", "3 |"]
    assert current[3][:4] == ["| y=1", "the same change", "", "1.2000"]

    # the configuration before: its superseded runs against the twin's runs of the same commits (6 of
    # 10 cells below them), and the probe of a change to it. At L=336, H=96 the twin's rerun and the
    # runs it replaced give different ratios, so the pairing by commit shows
    def seed_means(runs: dict, cell: tuple[int, int]) -> float:
        return sum(runs[(*cell, s)] for s in (0, 1, 2))

    then = seed_means(attention_before, (336, 96)) / seed_means(twin_before, (336, 96))
    rerun = seed_means(attention_before, (336, 96)) / seed_means(twin, (336, 96))
    assert f"{then:.4f}" != f"{rerun:.4f}"
    before = seed_means(attention_before, (96, 24)) / seed_means(twin_before, (96, 24))
    assert len(previous) == 3 and previous[1][:3] == ["| (committed)", "committed", f"{before:.4f}"]
    assert previous[1][8] == f"{then:.4f}" and previous[1][-4] == "6 of 10"  # L=336 H=96
    assert previous[2][:3] == ["| w=1", "committed", "3.0000"]
