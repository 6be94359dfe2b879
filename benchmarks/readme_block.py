"""A generated block of a Markdown file, between two marker comments: the benchmarks write their
tables there from committed raw results (``--render --readme``), and tests check that what is
there is what the results render to."""

from __future__ import annotations

from pathlib import Path


def write_block(path: Path, begin: str, end: str, content: str) -> None:
    """Replace what stands between ``begin`` and ``end`` in ``path`` with ``content``."""
    if not path.is_file():
        raise SystemExit(f"{path} is not a file to write the table into")
    text = path.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"--readme: {path} has no {begin} ... {end} block")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{content}{end}{tail}")


def read_block(text: str, begin: str, end: str) -> str:
    return text.split(begin, 1)[1].split(end, 1)[0].lstrip("\n")
