"""benchmarks/README.md's many-series tables are what --render makes of the committed raw results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_readme_panel_tables_are_the_committed_results_rendered():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import panel_bench

    results = json.loads(panel_bench.RAW_RESULTS.read_text())
    assert [e["series"] for e in results["sizes"]] == [100, 1000, 10000]
    readme = (REPO / "benchmarks/README.md").read_text()
    assert panel_bench.readme_tables(readme) == panel_bench.render(results)
