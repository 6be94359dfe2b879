"""What every benchmark's ``--render --readme`` must do to a README: replace the block between its
two markers and leave every other line as it was."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def render_into_readme(tmp_path: Path, script: str, results: Path, begin: str, end: str) -> str:
    """Run ``benchmarks/<script> --render --results RESULTS --readme`` on a README holding an old
    block between ``begin`` and ``end``; check that only the block changed and return the text."""
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\nbefore\n{begin}\nold table\n{end}\nafter\n")
    command = [sys.executable, str(REPO / "benchmarks" / script), "--render", "--results", str(results)]
    subprocess.run([*command, "--readme", str(readme)], check=True, capture_output=True)
    text = readme.read_text()
    assert text.startswith("# Title\nbefore\n") and text.endswith(f"{end}\nafter\n")
    assert "old table" not in text
    return text
