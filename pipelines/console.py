"""Terminal output: tables and one-line errors."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table

console = Console(highlight=False, width=None if Console().is_terminal else 160)
errors = Console(stderr=True, highlight=False, width=None if Console().is_terminal else 160)
SHORT_NAMES = {"directional_accuracy": "dir. accuracy"}
LIGHTNING_LOGGERS = ("pytorch_lightning", "lightning.pytorch", "lightning_fabric")


def quiet_lightning() -> None:
    """Lightning's info lines ("GPU available: False", a logger tip, "`weights_only` was not
    set") off the terminal: warnings stay. Call it after Lightning is imported: importing it sets
    its logger back to INFO."""
    for name in LIGHTNING_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def notice(line: str) -> None:
    """A line about what the command does (resuming, a stale run) on stderr, whole however long:
    stdout may be a --json document."""
    errors.print(line, markup=False, soft_wrap=True)


def finite(document: object) -> object:
    """``document`` with every NaN or infinite float as None (a flat series' MASE is NaN, a skill
    over a zero naive MAE infinite): JSON has neither, and ``jq`` refuses Python's ``NaN``."""
    if isinstance(document, dict):
        return {key: finite(value) for key, value in document.items()}
    if isinstance(document, list | tuple):
        return [finite(value) for value in document]
    if isinstance(document, float) and not math.isfinite(document):
        return None
    return document


def print_json(document: object) -> None:
    """A command's --json document, alone on stdout, as strict JSON (NaN and infinities null)."""
    print(json.dumps(finite(document), allow_nan=False), flush=True)


@contextmanager
def human_output_on_stderr(enabled: bool = True) -> Iterator[None]:
    """With --json, stdout carries the JSON document alone (so `| jq` works): tables, progress
    and result lines go to stderr meanwhile, and back to stdout after (in-process callers)."""
    if not enabled:
        yield
        return
    console.stderr = True
    try:
        yield
    finally:
        console.stderr = False


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    view = Table(title=title, title_justify="left")
    for i, column in enumerate(columns):
        view.add_column(
            SHORT_NAMES.get(column, column), justify="left" if i == 0 else "right", no_wrap=i == 0
        )
    for row in rows:
        view.add_row(*(fmt(value) for value in row))
    console.print(view)


def fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.3e}"
    return str(value)


def metrics_table(title: str, metrics: dict[str, dict[str, float]]) -> None:
    """One row per forecaster (model first, then baselines)."""
    from forecaster.evaluation import MODEL  # imports torch: not for `--help` or a one-line error

    names = [MODEL] + [n for n in metrics if n != MODEL]
    columns = list(next(iter(metrics.values())))
    rows = [[name, *(metrics[name][c] for c in columns)] for name in names]
    naive_mae = metrics.get("naive", {}).get("mae")
    if naive_mae:
        columns.append("skill vs naive")
        for row, name in zip(rows, names, strict=True):
            row.append(1 - metrics[name]["mae"] / naive_mae)
    table(title, ["forecaster", *columns], rows)
