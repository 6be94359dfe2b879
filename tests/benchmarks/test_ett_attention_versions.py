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


def test_a_cells_seed_means_are_set_against_the_twins_on_selection_and_on_test():
    version = versions.Version("hand-made", "a1", "t1")
    recorded = [
        # seed by seed attention is below on selection in 2 of 3, above on test in 2 of 3: the
        # means read otherwise (selection 3.0 against 2.0 above; test 2.0 against 3.0 below)
        run(versions.ATTENTION, "a1", 0, (1.0, 1.0), 4.0),
        run(versions.TWIN, "t1", 0, (2.0, 2.0), 3.0),
        run(versions.ATTENTION, "a1", 1, (1.0, 1.0), 1.5),
        run(versions.TWIN, "t1", 1, (2.0, 2.0), 1.0),
        run(versions.ATTENTION, "a1", 2, (7.0, 7.0), 0.5),
        run(versions.TWIN, "t1", 2, (2.0, 2.0), 5.0),
    ]
    assert versions.means_below(version, 96, 24, recorded) == (False, True)
    assert versions.means_below(version, 96, 48, recorded) is None  # no runs at that cell
    without_a_twin = [r for r in recorded if (r["network"], r["seed"]) != (versions.TWIN, 0)]
    assert versions.means_below(version, 96, 24, without_a_twin) is None


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


def test_side_agreement_bands_selection_distance_and_counts_test_on_selections_side():
    ratios = [
        (0.999, 1.002),  # under 0.5%: selection below, test above
        (1.004, 1.001),  # under 0.5%: both above
        (0.995, 0.990),  # exactly 0.5% from 1: the second band; both below
        (1.019, 0.999),  # second band: selection above, test below
        (0.970, 1.000),  # 3%: selection below, test exactly 1 (not below)
        (1.050, 1.020),  # 5%: both above
    ]
    bands = versions.side_agreement(ratios)
    assert [(b.same_side, b.runs) for b in bands] == [(1, 2), (1, 2), (1, 2)]
    assert [versions.band_label(b) for b in bands] == ["under 0.5%", "0.5% to 2.0%", "2.0% or more"]
    assert versions.side_agreement([])[0] == versions.SideAgreement(0.0, 0.005, 0, 0)


def test_seed_ratios_cover_every_version_at_every_cell_and_seed():
    ratios = versions.seed_ratios(versions.every_run())
    assert len(ratios) == len(versions.VERSIONS) * len(ett_placebo.read()) * 3
    assert sum(b.runs for b in versions.side_agreement(ratios)) == len(ratios)
