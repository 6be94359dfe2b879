"""tests/README.md's before/after table is what tests/suite_record.py renders from the committed
records, and the record is read correctly off pytest's output and coverage.py's JSON report."""

from __future__ import annotations

import pytest

from tests.suite_record import REPO, coverage_by_package, load_records, parse_log, read_block, render

LOG = """
============================= slowest 3 durations ==============================
81.20s call     tests/test_readme.py::test_readme_blocks_run_as_written
12.02s setup    tests/service/test_parity.py::test_the_service_answers[gru]
0.50s teardown tests/deploy/test_stack.py::test_runs_live_in_postgresql_and_artifacts_in_the_bucket
=========== 790 passed, 2 skipped in 512.31s (0:08:32) ===========
"""


def test_the_readme_table_is_rendered_from_the_committed_records():
    records = load_records()
    assert {"before", "after"} <= set(records), "commit tests/records/suite-before.json and -after.json"
    assert read_block(REPO / "tests" / "README.md") == render(records), (
        "run: .venv/bin/python -m tests.suite_record --render --readme tests/README.md"
    )


def test_the_coverage_after_is_not_lower_than_before():
    records = load_records()
    for kind, covered in (("lines", "covered_lines"), ("branches", "covered_branches")):
        total = "statements" if kind == "lines" else "branches"
        shares = {
            name: sum(r["coverage"][p][covered] for p in r["coverage"])
            / sum(r["coverage"][p][total] for p in r["coverage"])
            for name, r in records.items()
            if name in ("before", "after")
        }
        assert shares["after"] >= shares["before"] - 1e-12, (kind, shares)


def test_a_log_gives_the_seconds_the_outcome_and_the_slowest_tests():
    parsed = parse_log(LOG)
    assert parsed["seconds"] == pytest.approx(512.31) and parsed["outcome"] == "790 passed, 2 skipped"
    assert [s["test"] for s in parsed["slowest"]][
        0
    ] == "tests/test_readme.py::test_readme_blocks_run_as_written"
    assert [s["phase"] for s in parsed["slowest"]] == ["call", "setup", "teardown"]
    with pytest.raises(SystemExit, match="no pytest summary line"):
        parse_log("collected 3 items\n")


def test_coverage_is_summed_by_package_whatever_the_checkout():
    summary = {"num_statements": 10, "covered_lines": 7, "num_branches": 4, "covered_branches": 2}
    report = {
        "files": {
            "forecaster/config.py": {"summary": summary},
            "/elsewhere/checkout/forecaster/models/seq2seq.py": {"summary": summary},
            "service/main.py": {"summary": summary},
            "benchmarks/wrk.py": {"summary": summary},  # not one of the packages: left out
        }
    }
    totals = coverage_by_package(report)
    assert totals["forecaster"] == {
        "statements": 20,
        "covered_lines": 14,
        "branches": 8,
        "covered_branches": 4,
    }
    assert totals["service"]["statements"] == 10 and totals["pipelines"]["statements"] == 0
