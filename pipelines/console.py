"""Terminal output: tables and one-line errors."""

from __future__ import annotations

import logging
from collections.abc import Sequence

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
