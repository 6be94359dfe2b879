"""benchmarks/README.md's monitor tables are what --render makes of the committed raw results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_readme_monitor_tables_are_the_committed_results_rendered():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import monitor_bench

    results = json.loads(monitor_bench.RAW_RESULTS.read_text())
    assert results["sizes"] and results["predict"], "no raw results in benchmarks/results/monitor_bench.json"
    readme = (REPO / "benchmarks/README.md").read_text()
    assert monitor_bench.readme_tables(readme) == monitor_bench.render(results)
