"""The `forecast` command line, wired: each command lives in its group's module under
pipelines/commands/ and is registered here, in the order `forecast --help` lists them.

- training: train, evaluate, backtest, datasets
- sweep: sweep
- predicting: predict
- registry: compare, runs, register, promote
- serving: ui, serve
- monitoring: monitor, upgrade-log, retrain

Every user error ends in one line on stderr and a non-zero exit (pipelines/commands/common.py).
The same work is open to Python without a shell: ``from forecaster import Forecaster``
(docs/python-api.md), which `train`, `evaluate` and `predict` are built on."""

from __future__ import annotations

import typer

from pipelines.commands import monitoring, predicting, registry, serving, sweep, training
from pipelines.commands.common import quiet_environment, quiet_libraries
from pipelines.commands.reports import report_training

__all__ = ["app", "main", "quiet_environment", "quiet_libraries", "report_training"]

app = typer.Typer(
    help="Train, track, compare and serve recurrent forecasters (RNN/LSTM/GRU/seq2seq+attention).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMANDS = {
    "train": training.train,
    "evaluate": training.evaluate,
    "backtest": training.backtest,
    "sweep": sweep.sweep,
    "predict": predicting.predict,
    "compare": registry.compare,
    "runs": registry.runs,
    "register": registry.register_command,
    "promote": registry.promote,
    "datasets": training.datasets,
    "ui": serving.ui,
    "serve": serving.serve,
    "monitor": monitoring.monitor,
    "upgrade-log": monitoring.upgrade_log,
    "retrain": monitoring.retrain,
}
for name, command in COMMANDS.items():
    app.command(name)(command)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
