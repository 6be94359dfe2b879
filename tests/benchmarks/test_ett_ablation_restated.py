"""benchmarks/ett_ablation_restated.py reads issue 41's ablation target as written and as restated:
not resolved worse in any cell, and below the twin on selection and test wherever selection puts
the two 2% or more apart, which must happen somewhere."""

from __future__ import annotations

import statistics
import sys

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import ett_ablation_restated as restated  # noqa: E402
import ett_attention_versions as versions  # noqa: E402
import ett_placebo as placebo  # noqa: E402


def cell(selection_ratio: float, test_ratio: float, verdict: str = "not resolved") -> restated.Cell:
    return restated.Cell(96, 24, [selection_ratio] * 3, selection_ratio, test_ratio, verdict, 0.5)


@pytest.mark.parametrize(
    ("selection", "test", "verdict", "why"),
    [
        (0.999, 1.004, "not resolved", None),  # a near tie above on test, not resolved: not held against it
        (0.999, 1.004, "higher", "resolved higher on test"),
        (0.97, 0.98, "higher", "resolved higher on test"),
        (1.03, 0.95, "not resolved", "selection has attention above"),  # selection saw it worse
        (0.97, 1.001, "not resolved", "selection has attention below, test above"),
        (0.98, 0.99, "not resolved", None),  # 2% below on selection, below on test
        (0.9801, 1.2, "not resolved", None),  # under 2% apart: selection cannot tell them apart
    ],
)
def test_a_cell_fails_where_test_resolves_it_worse_or_contradicts_what_selection_separates(
    selection, test, verdict, why
):
    assert restated.shortfall(cell(selection, test, verdict)) == why


def test_the_restated_target_needs_a_cell_where_attention_is_seen_helping():
    near_ties = [cell(0.999, 0.998), cell(1.001, 1.003)]
    assert all(restated.shortfall(c) is None for c in near_ties)
    assert not restated.restated_met(near_ties)  # a network that does nothing would pass without it
    assert restated.restated_met([*near_ties, cell(0.95, 0.9)])
    assert not restated.restated_met([*near_ties, cell(0.95, 0.9), cell(0.999, 1.01, "higher")])


def test_the_two_percent_line_is_the_agreement_tables():
    assert restated.SEPARATES == 0.02 and restated.SEPARATES in versions.BANDS


def test_cells_are_read_from_the_committed_runs_and_the_paired_test_records():
    cells = restated.read_cells()
    assert len(cells) == 10
    for c in cells:
        attention = placebo.committed_runs(restated.ATTENTION, c.lookback, c.horizon, [0, 1, 2])
        twin = placebo.committed_runs(restated.TWIN, c.lookback, c.horizon, [0, 1, 2])
        test = statistics.mean(map(versions.test, attention)) / statistics.mean(map(versions.test, twin))
        assert c.test_ratio == pytest.approx(test, rel=1e-9)  # the paired test's runs are the committed ones
        selection = [
            versions.selection(a) / versions.selection(t) for a, t in zip(attention, twin, strict=True)
        ]
        assert c.selection == pytest.approx(selection, rel=1e-12)


def test_the_readme_table_is_rendered_from_the_committed_records():
    document = (REPO / "benchmarks" / "README.md").read_text()
    block = document.split(restated.BEGIN)[1].split(restated.END)[0]
    assert block.strip() == restated.render(restated.read_cells(), restated.read_placebo_cells()).strip()


def test_todays_version_read_from_its_runs_is_the_table_read_from_the_paired_tests():
    todays = next(v for v in versions.VERSIONS if v.attention == "de8ab97")
    from_runs = restated.version_cells(todays, versions.every_run())
    from_tests = sorted(restated.read_cells(), key=lambda c: (c.lookback, c.horizon))
    assert [(c.lookback, c.horizon, c.verdict) for c in from_runs] == [
        (c.lookback, c.horizon, c.verdict) for c in from_tests
    ]
    for a, b in zip(from_runs, from_tests, strict=True):
        assert a.selection == pytest.approx(b.selection, rel=1e-12)
        assert a.test_ratio == pytest.approx(b.test_ratio, rel=1e-9)


def test_a_versions_reading_names_where_it_fails_and_what_was_not_tested():
    version = versions.Version("hand-made", "a1", "t1")
    helping = cell(0.95, 0.9)
    assert restated.version_reading(version, [helping, cell(0.999, 1.01)]) == "hand-made: met"
    untested = [helping._replace(verdict=restated.UNTESTED)]
    assert "clause 1 not tested" in restated.version_reading(version, untested)
    failing = [helping, cell(1.03, 1.05)._replace(lookback=336, horizon=720)]
    assert restated.version_reading(version, failing) == (
        "hand-made: not met: L=336 H=720 (selection has attention above)"
    )
    assert (
        restated.version_reading(version, [cell(0.999, 0.99)]) == "hand-made: not met: seen helping nowhere"
    )
