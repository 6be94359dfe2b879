"""benchmarks/ett_attention_versions.py sets every recorded version of the ablation's attention
network against the twin run at its commit, seed by seed, on selection and on test."""

from __future__ import annotations

import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import ett_attention_versions as versions  # noqa: E402
import ett_placebo  # noqa: E402


def run(network: str, commit: str, seed: int, selection: tuple[float, float], test: float) -> dict:
    """A run record as the benchmark writes it, at L=96, H=24: its two selection folds and test."""
    return {
        "network": network,
        "commit": commit,
        "lookback": 96,
        "horizon": 24,
        "seed": seed,
        "selection_folds": [{"model": {"mse": mse}} for mse in selection],
        "test": {"model": {"mse": test}},
    }


def test_a_version_counts_the_seeds_below_its_own_twin_on_the_folds_mean_and_on_test():
    version = versions.Version("hand-made", "a1", "t1")
    recorded = [
        run(versions.ATTENTION, "a1", 0, (1.0, 3.0), 5.0),  # selection 2.0 against 2.5: below; test above
        run(versions.TWIN, "t1", 0, (2.0, 3.0), 4.0),
        run(versions.ATTENTION, "a1", 1, (1.0, 5.0), 3.0),  # 3.0 against 2.0: above; test below
        run(versions.TWIN, "t1", 1, (1.0, 3.0), 4.0),
        run(versions.TWIN, "t2", 1, (9.0, 9.0), 0.5),  # another commit's twin: not its own
        # fold 1 alone (1.0 against 1.5) would say below; the two folds' mean (2.0 against 1.5) above
        run(versions.ATTENTION, "a1", 2, (1.0, 3.0), 1.0),
        run(versions.TWIN, "t1", 2, (1.5, 1.5), 1.0),  # test equal: not below
    ]
    assert versions.version_below(version, 96, 24, recorded) == versions.Below(selection=1, test=1, seeds=3)
    assert versions.version_below(version, 96, 48, recorded) is None  # no runs at that cell
    without_a_twin = [r for r in recorded if (r["network"], r["seed"]) != (versions.TWIN, 1)]
    assert versions.version_below(version, 96, 24, without_a_twin) is None


def test_every_version_has_both_networks_at_every_cell_and_seed():
    recorded = versions.every_run()
    for record in ett_placebo.read():
        for version in versions.VERSIONS:
            below = versions.version_below(version, record["lookback"], record["horizon"], recorded)
            assert below is not None and below.seeds == 3, (version, record["lookback"], record["horizon"])


def test_the_readme_table_is_rendered_from_the_committed_runs():
    document = (REPO / "benchmarks" / "README.md").read_text()
    block = document.split(versions.BEGIN)[1].split(versions.END)[0]
    assert block.strip() == versions.render(ett_placebo.read()).strip()
