"""ETTh1 univariate (target OT) on the protocol of the Informer and DLinear papers, every network
beside the naive baselines and the published figures. Every configuration is a normal
`forecast train` run logged to MLflow (experiment "ett-benchmark"), so results can be compared in
the UI.

Protocol: train rows 0-8639, val 8640-11519, test 11520-14399 (12/4/4 months of 30 days; the last
3,020 rows unused); val/test inputs may start L rows before their border; z-score with the train
rows' statistics; stride-1 windows, every test window scored (2881 - H of them); MSE and MAE on
the z-scored scale (as the papers report) and MAE in degC.

    .venv/bin/python benchmarks/ett_benchmark.py                 # the CPU plan (hours on 2 cores)
    .venv/bin/python benchmarks/ett_benchmark.py --full          # every network x horizon x 3 seeds (GPU)
    .venv/bin/python benchmarks/ett_benchmark.py --full --accelerator gpu --tracking-uri http://mlflow:5000
    .venv/bin/python benchmarks/ett_benchmark.py --render        # the README tables from the raw results

Raw results: every finished run appends one JSON line to benchmarks/results/ett-runs.jsonl (the
network, look-back, horizon, seed, commit, and its selection, validation and test figures); the
tables are rendered from that file alone, never assembled by hand. Runs already in the file (same
network, look-back, horizon, seed and commit) are skipped, so an interrupted plan resumes.

Decisions read no test data: one configuration per network (NETWORKS, fixed before any run), used
at every horizon; early stopping on the validation rows; the row marked "chosen" at each look-back
and horizon is the network with the lowest mean selection MSE, whatever test says. Selection is
the rolling-origin rule (issue 34, forecaster/selection.py): the mean over SELECTION_FOLDS folds laid
back from the test split, each as long as the selection period. Every run records each fold's
figures, so the tables can also show what the one-window rule (k = 1: fold 1 alone) would have
picked from the very same models, and how well each rule's order agrees with test's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
from provenance import commit, machine  # noqa: E402
from readme_block import read_block, write_block  # noqa: E402

RAW_RESULTS = REPO / "benchmarks" / "results" / "ett-runs.jsonl"
SUPERSEDED = REPO / "benchmarks" / "results" / "ett-runs-superseded.jsonl"  # the runs a rerun replaced
# NLinear by least squares on the same windows (ett_linear.py): one record per look-back and horizon
LINEAR_RESULTS = REPO / "benchmarks" / "results" / "ett-linear.jsonl"
LINEAR = "nlinear-ls"

PAPER_SPLIT = {"val_start": "2017-06-26", "test_start": "2017-10-24", "end": "2018-02-21"}

# name -> model settings. "seg-lstm" is the recommended recurrent model for this data: SegRNN-style
# segment inputs (24 steps = one day per RNN step) and a direct head, forecasting relative to the
# last value.
NETWORKS = {
    "rnn": {"cell": "rnn", "hidden_size": 64, "layers": 2},
    "lstm": {"cell": "lstm", "hidden_size": 64, "layers": 2},
    "gru": {"cell": "gru", "hidden_size": 64, "layers": 2},
    "bi-lstm": {"cell": "lstm", "hidden_size": 64, "layers": 2, "bidirectional": True},
    # the step-by-step decoders train free-running (teacher_forcing 0: no scheduled sampling), chosen
    # on 3-seed selection MSE at L=96, H=96 against the default start ratio of 0.5 (benchmarks/README.md)
    "seq2seq": {
        "architecture": "seq2seq",
        "cell": "gru",
        "attention": "none",
        "hidden_size": 64,
        "layers": 1,
        "teacher_forcing": 0.0,
    },
    # its runs (hours each, step by step) were made with the attention layout of before issue 41:
    # one query per decoder state over the encoder states; not rerun with the `steps` layout
    "seq2seq-attention": {
        "architecture": "seq2seq",
        "cell": "gru",
        "attention": "bahdanau",
        "attention_layout": "states",
        "hidden_size": 64,
        "layers": 1,
        "teacher_forcing": 0.0,
    },
    "seg-lstm": {"cell": "lstm", "hidden_size": 128, "layers": 1, "segment_length": 24},
    "seg-gru": {"cell": "gru", "hidden_size": 128, "layers": 1, "segment_length": 24},
    # the seq2seq + attention model at full strength: a GRU encoder over one-day segments, the
    # direct decoder emitting one day per step, and every forecast step attending over every
    # look-back step (the `lags` layout, retrieving the look-back's own inputs: issue 41's third
    # pass; its runs with the earlier layouts and values, `lags` retrieving encoder states too,
    # `steps`, and one query per decoder day over the encoder days, are in
    # results/ett-runs-superseded.jsonl). Its lag scores learn at a tenth of the product's default
    # scale (issue 41's tenth pass: 10 of 3 / 10 / 30 / 100 by the third pass's rule on selection;
    # its runs at 100 are in results/ett-runs-superseded.jsonl)
    "seg-seq2seq-attention": {
        "architecture": "seq2seq",
        "decoder": "direct",
        "cell": "gru",
        "attention": "bahdanau",
        "attention_layout": "lags",
        "attention_values": "inputs",
        "attention_lag_scale": 10.0,
        "hidden_size": 128,
        "layers": 1,
        "segment_length": 24,
    },
    # the same network without attention: the ablation (issue 41)
    "seg-seq2seq": {
        "architecture": "seq2seq",
        "decoder": "direct",
        "cell": "gru",
        "attention": "none",
        "hidden_size": 128,
        "layers": 1,
        "segment_length": 24,
    },
    # the seq2seq attention model with the config's defaults for everything the issue leaves open
    # (LSTM 2 x 64, Bahdanau attention in the `lags` layout) and the direct decoder in one-day
    # segments (`--model seq2seq --decoder direct --set model.segment_length=24`), with calendar
    # features: one of the alignment target's models. What a look-back step retrieves is its observed
    # value, not its calendar features (issue 41's fourth pass; the runs that retrieved them too are
    # in results/ett-runs-superseded.jsonl)
    "default-attention": {
        "architecture": "seq2seq",
        "decoder": "direct",
        "cell": "lstm",
        "attention": "bahdanau",
        "attention_layout": "lags",
        "attention_values": "inputs",
        "attention_retrieves_calendar": False,
        "hidden_size": 64,
        "layers": 2,
        "segment_length": 24,
    },
}
# the same step by step (no segments): the encoder and decoder states are per hour (`--decoder direct`)
NETWORKS["default-attention-hourly"] = {**NETWORKS["default-attention"], "segment_length": 0}
# what `forecast train --model seq2seq` builds, nothing else set: the autoregressive decoder (one
# step at a time, feeding back its prediction, teacher forcing from 0.5 decaying by 0.9 an epoch),
# whose context is what its attention retrieves: the look-back's observed values alone since issue
# 41's fourth pass (its runs retrieving the encoder states too are in results/ett-runs-superseded.jsonl)
NETWORKS["default-attention-stepwise"] = {
    "architecture": "seq2seq",
    "cell": "lstm",
    "attention": "bahdanau",
    "attention_layout": "lags",
    "attention_values": "inputs",
    "attention_retrieves_calendar": False,
    "hidden_size": 64,
    "layers": 2,
}

# the segment default without calendar features: what they cost that model (the alignment target
# asks for them; issue 41's fourth pass measured this row for the cost alone)
NETWORKS["default-attention-no-calendar"] = dict(NETWORKS["default-attention"])

# name -> data settings beyond the common ones (the bundled ETTh1, target OT alone)
DATA: dict[str, dict[str, object]] = {
    "default-attention": {"calendar_features": True},
    "default-attention-hourly": {"calendar_features": True},
    "default-attention-stepwise": {"calendar_features": True},
}
# the alignment target's models (ETTh1 L=96, H=24, calendar features on), and the segment default
# without them for comparison: run at that cell only
ALIGNMENT_MODELS = (
    "default-attention-stepwise",
    "default-attention",
    "default-attention-hourly",
    "default-attention-no-calendar",
)
ATTENTION_PAIRS = {"seg-seq2seq-attention": "seg-seq2seq"}  # with attention -> the same without
TIMING_REFERENCE = "seg-gru"  # the same-size many-to-one network the attention model's time is compared with
# the same for the alignment models (LSTM 2 x 64, as they are): the plain lstm, run in the same invocation
ALIGNMENT_TIMING_REFERENCE = "lstm"

# name -> training settings of that network beyond the common ones (run_config), chosen on
# selection MSE like the rest of its configuration (benchmarks/README.md, "How the tables are made"):
# a moving average of the weights for the segment many-to-one models (0.99 of 0.95 / 0.98 / 0.99;
# the segment seq2seq's best, 0.99, missed the adoption bar of a 2% lower selection MSE)
TRAINING: dict[str, dict[str, float]] = {"seg-lstm": {"ema_decay": 0.99}, "seg-gru": {"ema_decay": 0.99}}

PUBLISHED = {
    96: {
        "LSTMa (Informer, AAAI 2021; its own look-back, not 96)": {
            24: (0.114, 0.272),
            48: (0.193, 0.358),
            168: (0.236, 0.392),
            336: (0.590, 0.698),
            720: (0.683, 0.768),
        },
        "Informer (AAAI 2021; input length tuned per horizon, not 96)": {
            24: (0.098, 0.247),
            48: (0.158, 0.319),
            168: (0.183, 0.346),
            336: (0.222, 0.387),
            720: (0.269, 0.435),
        },
        "Darts 0.48 BlockRNN LSTM (measured by the issue)": {24: (0.130, 0.296), 96: (0.334, 0.512)},
        "Darts BlockRNN LSTM + RevIN (measured by the issue)": {24: (0.0383, 0.152), 96: (0.0649, 0.197)},
        "neuralforecast 3.3 LSTM (measured by the issue)": {24: (0.0461, 0.166)},
    },
    336: {
        "DLinear (AAAI 2023)": {
            96: (0.056, 0.180),
            192: (0.071, 0.204),
            336: (0.098, 0.244),
            720: (0.189, 0.359),
        },
        "NLinear (AAAI 2023)": {
            96: (0.053, 0.177),
            192: (0.069, 0.204),
            336: (0.081, 0.226),
            720: (0.080, 0.226),
        },
        "PatchTST (ICLR 2023)": {
            96: (0.055, 0.179),
            192: (0.071, 0.205),
            336: (0.081, 0.225),
            720: (0.087, 0.232),
        },
    },
}

HORIZONS = {96: [24, 48, 96, 168, 336, 720], 336: [96, 192, 336, 720]}

# k of the selection rule. ETTh1's validation is 4 months; the selection period is its second half
# (split.selection 0.5), so k = 2 is the most folds as long as it that fit, and it keeps the
# early-stopping and calibration rows of k = 1: the two rules then score the very same trained
# models, and each fold holds 721 windows even at H=720 (shorter folds, e.g. k = 4 of one month,
# would hold a single window there). Fold 2 is late June to late August 2017, fold 1 late August to
# late October: together they span the summer-to-autumn change that one fold saw half of.
SELECTION_FOLDS = 2
# the epoch cap of every run (early stopping ends most sooner); the cosine schedule anneals over it
EPOCHS = 10
SEGMENTED = {name for name, settings in NETWORKS.items() if settings.get("segment_length")}


def cells_and_seeds(
    lookbacks: str, horizons: str | None, seeds: str
) -> tuple[list[tuple[int, int]], list[int]]:
    """The (look-back, horizon) cells and seeds of comma-separated options, as the probe scripts take
    them (horizons None: every horizon of each look-back); a bad one stops with the option named."""
    try:
        looked = [int(x) for x in lookbacks.split(",")]
        seeded = [int(x) for x in seeds.split(",")]
        wanted = None if horizons is None else {int(x) for x in horizons.split(",")}
    except ValueError as exc:
        raise SystemExit(f"--lookbacks/--horizons/--seeds: comma-separated integers ({exc})") from None
    if set(looked) - set(HORIZONS):
        raise SystemExit(f"--lookbacks: {sorted(set(looked) - set(HORIZONS))} not in {list(HORIZONS)}")
    cells = [(lb, h) for lb in looked for h in HORIZONS[lb] if wanted is None or h in wanted]
    if not cells:
        raise SystemExit(f"--horizons: none of {sorted(wanted or [])} in {HORIZONS}")
    return cells, seeded


def positive_integer(option: str) -> int:
    """An argparse type: a positive integer, or a one-line error naming the value."""
    if not option.isdigit() or int(option) < 1:
        raise argparse.ArgumentTypeError(f"a positive integer, not {option!r}")
    return int(option)


def cell_options(parser: argparse.ArgumentParser, results: Path) -> None:
    """The options of the scripts that measure the benchmark's cells and render their records
    (ett_residual_signal.py, ett_ablation_significance.py): which cells and seeds, torch threads,
    the records file, and the table."""
    parser.add_argument("--lookbacks", default="96,336", help="comma-separated: 96 and/or 336")
    parser.add_argument("--horizons", help="comma-separated (default: every horizon of the look-back)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--threads", type=positive_integer, default=1, help="torch CPU threads")
    parser.add_argument("--results", type=Path, default=results)
    parser.add_argument("--render", action="store_true", help="only print what --results holds")
    parser.add_argument("--readme", type=Path, help="with --render: write it between the file's markers")


def records_to_render(read, path: Path) -> list[dict]:
    """The records ``read`` finds in ``path`` for --render, or a stop naming the empty file."""
    records = read(path)
    if not records:
        raise SystemExit(f"--results: no records in {path}: run the measurement first")
    return records


def show_table(table: str, readme: Path | None, begin: str, end: str) -> None:
    """Print a rendered table, and with --readme write it between the file's markers too."""
    if readme:
        write_block(readme, begin, end, table + "\n")
    print(table)


def measure_cells(args: argparse.Namespace, measure, read, merged, summary) -> None:
    """For each cell of ``cell_options``: ``measure(lookback, horizon, seeds)`` with the given torch
    threads, the record (with the code and machine) merged into --results as soon as it is done,
    so that an interrupted run keeps the cells before it, and ``summary(record)`` printed."""
    cells, seeds = cells_and_seeds(args.lookbacks, args.horizons, args.seeds)
    import torch

    from pipelines.cli import quiet_libraries
    from pipelines.interrupts import INTERRUPTED_EXIT, sigint_received, watching_sigint

    quiet_libraries()
    torch.set_num_threads(args.threads)
    code, where = commit(), machine()
    stopped = f"interrupted: {args.results} holds the cells measured before it"
    try:
        with watching_sigint():
            for lookback, horizon in cells:
                record = {**measure(lookback, horizon, sorted(seeds)), "commit": code, "machine": where}
                write_runs(args.results, merged(read(args.results), record))
                print(summary(record), flush=True)
    except KeyboardInterrupt:
        print(stopped, file=sys.stderr)
        raise SystemExit(INTERRUPTED_EXIT) from None
    except SystemExit:  # Lightning answers a Ctrl-C inside fit with sys.exit(1) (pipelines/interrupts.py)
        if not sigint_received():
            raise
        print(stopped, file=sys.stderr)
        raise SystemExit(INTERRUPTED_EXIT) from None


def readme_markers(results: Path, script: str) -> tuple[str, str]:
    """The README block a cell script's table goes to, named after its records file (so the tables
    of two sets of runs can stand side by side) and saying which command writes it."""
    return (
        f"<!-- {results.stem}:begin (generated by {script} --render --readme) -->",
        f"<!-- {results.stem}:end -->",
    )


def cell_script(description: str, results: Path, render, measure, read, merged, summary, markers) -> None:
    """The main of a script that measures cells and renders their records: ``cell_options``, then
    with --render the table of --results (``render(records)``, into the README block between
    ``markers`` with --readme), else ``measure_cells``."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    cell_options(parser, results)
    args = parse_cell_options(parser)
    if args.render:
        show_table(render(records_to_render(read, args.results)), args.readme, *markers)
        return
    measure_cells(args, measure, read, merged, summary)


def parse_cell_options(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Parse ``cell_options`` (and the script's own), stopping where --readme comes without --render."""
    args = parser.parse_args()
    if args.readme and not args.render:
        raise SystemExit("--readme writes the rendered table: use it with --render")
    return args


@dataclass
class Plan:
    lookback: int
    network: str
    horizons: list[int]
    seeds: int


def cpu_plan(seeds: int) -> list[Plan]:
    """The CPU plan, most telling runs first (an interrupted plan resumes where it stopped): the
    segment models (many-to-one, and seq2seq with attention and without: the attention ablation)
    at both look-backs, then the plain networks at L=96 and a plain LSTM at L=336, then the
    step-by-step seq2seq at L=96 (it decodes one step at a time: with attention at H=720 an epoch
    took 338-1011 s on one loaded CPU thread, a run 54-103 min; L=336 is left to a GPU, --full),
    then the default attention model with calendar features at L=96, H=24 (the alignment target):
    as `--model seq2seq` builds it (step by step), and with the direct decoder in one-day segments
    and hourly; ``seeds`` seeds every row."""
    segments = ("seg-lstm", "seg-gru", "seg-seq2seq-attention", "seg-seq2seq")
    return [
        *(Plan(336, n, HORIZONS[336], seeds) for n in segments),
        *(Plan(96, n, HORIZONS[96], seeds) for n in segments),
        *(Plan(96, n, HORIZONS[96], seeds) for n in ("lstm", "gru", "rnn", "bi-lstm")),
        Plan(336, "lstm", HORIZONS[336], seeds),
        *(Plan(96, n, HORIZONS[96], seeds) for n in ("seq2seq", "seq2seq-attention")),
        *(Plan(96, n, [24], seeds) for n in ALIGNMENT_MODELS),
    ]


def interleaved(todo: list[tuple[Plan, int, int]]) -> list[tuple[Plan, int, int]]:
    """Within each group of consecutive plans of one look-back, the networks take turns at every
    (horizon, seed): whatever else loads the machine then weighs on all of them alike, so their
    seconds can be compared side by side."""
    groups: list[list[tuple[Plan, int, int]]] = []
    for item in todo:
        if groups and groups[-1][0][0].lookback == item[0].lookback and item[0].network in SEGMENTED:
            groups[-1].append(item)
        else:
            groups.append([item])
    return [item for group in groups for item in sorted(group, key=lambda x: (x[2], x[1]))]


ONLY_AT = {name: {96: [24]} for name in ALIGNMENT_MODELS}  # the alignment target's


def full_plan(seeds: int) -> list[Plan]:
    return [
        Plan(lookback, n, ONLY_AT[n][lookback] if n in ONLY_AT else HORIZONS[lookback], seeds)
        for lookback in HORIZONS
        for n in NETWORKS
        if n not in ONLY_AT or lookback in ONLY_AT[n]
    ]


def narrowed(plans: list[Plan], args: argparse.Namespace) -> list[Plan]:
    """The plan cut down by --networks / --lookbacks / --horizons (each unset = all)."""

    def chosen(option: str | None) -> set[str] | None:
        return None if option is None else {item.strip() for item in option.split(",")}

    networks, lookbacks, horizons = chosen(args.networks), chosen(args.lookbacks), chosen(args.horizons)
    if networks and networks - set(NETWORKS):
        raise SystemExit(f"--networks: unknown {sorted(networks - set(NETWORKS))}; known: {list(NETWORKS)}")
    kept = []
    for plan in plans:
        if (networks and plan.network not in networks) or (lookbacks and str(plan.lookback) not in lookbacks):
            continue
        steps = [h for h in plan.horizons if not horizons or str(h) in horizons]
        if steps:
            kept.append(Plan(plan.lookback, plan.network, steps, plan.seeds))
    return kept


def seed_list(option: str | None, seeds: int) -> set[int] | None:
    """--only-seeds as a set of seeds, each one of 0..seeds-1 (unset = all)."""
    if option is None:
        return None
    try:
        chosen = {int(item) for item in option.split(",")}
    except ValueError:
        raise SystemExit(f"--only-seeds: {option!r} is not a comma-separated list of integers") from None
    if not chosen <= set(range(seeds)):
        raise SystemExit(
            f"--only-seeds: {sorted(chosen - set(range(seeds)))} not in 0..{seeds - 1} (--seeds {seeds})"
        )
    return chosen


def ot_train_std() -> float:
    """The std of OT over the train rows, in degC: what the z-scored figures are divided by."""
    from forecaster.data.datamodule import prepare_series
    from forecaster.data.source import load_from_config

    config = run_config(96, 24, "lstm", 0, 1, "cpu").forecast_config()
    return float(prepare_series(load_from_config(config.data), config).scaler.std[0])


def read_runs(path: Path, required: tuple[str, ...] = ()) -> list[dict]:
    """The records of a JSON-lines file ([] where there is none yet). A path that is not such a
    file, or a record without one of the ``required`` fields, stops with the file, line and field
    named: the scripts render tables from these files, and a traceback there names none of them."""
    if not path.exists():
        return []
    if not path.is_file():
        raise SystemExit(f"{path} is not a file of records")
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError:
        raise SystemExit(f"{path} is not a text file of JSON records") from None
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}, line {number}: not a JSON record ({exc.msg})") from None
        missing = [field for field in required if not isinstance(record, dict) or field not in record]
        if missing:
            raise SystemExit(f"{path}, line {number}: the record has no {', '.join(missing)}")
        records.append(record)
    return records


def write_runs(path: Path, records: list[dict]) -> None:
    """All records at once through a temporary file, so a crash mid-write leaves the old file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text("".join(json.dumps(r) + "\n" for r in records))
    partial.replace(path)


def committed_run(network: str, lookback: int, horizon: int, seed: int) -> dict | None:
    """The committed run of ``network`` at this cell and seed (RAW_RESULTS; the last written wins,
    as it does in the tables), or None."""
    key = (network, lookback, horizon, seed)
    runs = [
        r for r in read_runs(RAW_RESULTS) if (r["network"], r["lookback"], r["horizon"], r["seed"]) == key
    ]
    return runs[-1] if runs else None


def recorded_runs() -> list[dict]:
    """Every run on record: the superseded ones first, then the current ones (RAW_RESULTS), so that
    where a key repeats, the last one read is the run the tables keep."""
    return [run for path in (SUPERSEDED, RAW_RESULTS) for run in read_runs(path)]


def runs_by_commit(network: str, lookback: int, horizon: int, seeds: list[int]) -> dict[str, list[dict]]:
    """commit -> the runs of ``network`` at this cell made at that commit, one per seed of ``seeds``
    (RAW_RESULTS and SUPERSEDED; only commits that have every seed; where one commit has a seed twice,
    the later run, as the tables keep it): what a measurement of the runs of one time (issue 41's
    sixth to eighth passes) is checked against once a rerun replaced them."""
    found: dict[str, dict[int, dict]] = {}
    for run in recorded_runs():
        if (run["network"], run["lookback"], run["horizon"]) == (network, lookback, horizon):
            found.setdefault(run["commit"], {})[run["seed"]] = run
    return {c: [runs[s] for s in seeds] for c, runs in found.items() if all(s in runs for s in seeds)}


def retrain(network: str, lookback: int, horizon: int, seed: int):
    """Train ``network`` at this cell and seed as the benchmark's run did (``run_config`` on the CPU,
    without MLflow: the same starting weights and batches as the committed run) -> the trained
    model, the prepared data, and the training's seconds."""
    from forecaster.data.datamodule import prepare
    from forecaster.data.source import load_from_config
    from forecaster.training import train_model

    config = run_config(lookback, horizon, network, seed, EPOCHS, "cpu").forecast_config()
    prepared = prepare(load_from_config(config.data), config)
    started = time.perf_counter()
    trained = train_model(config, prepared)
    return trained, prepared, time.perf_counter() - started


def split_forecasts(predictor, prepared, split: str):
    """A trained network's forecasts (N, H) of ``split``'s windows, made as evaluation makes them
    (``SplitWindows`` and ``Predictor.predict`` on raw units), on the z-scored scale of the tables."""
    from forecaster.evaluation import SplitWindows

    given = SplitWindows.of(predictor, prepared, split)
    raw = predictor.predict(given.past, given.times, future=given.future, series_ids=given.ids).mean
    return (raw - prepared.scaler.mean[0]) / prepared.scaler.std[0]


def read_linear(path: Path = LINEAR_RESULTS) -> dict[tuple[int, int], dict]:
    """(look-back, horizon) -> the NLinear record there (ett_linear.py); the last written wins."""
    return {(r["lookback"], r["horizon"]): r for r in read_runs(path)}


def run_record(
    outcome, plan: Plan, horizon: int, seed: int, seconds: float, std: float, code: str, where: dict
) -> dict:
    """One finished run, as committed: z-scored MSE/MAE (the papers' scale) and MAE in degC on
    selection and test for the model and the baselines, with timing, interval coverage, and the
    code and machine it ran on (``provenance``)."""

    def scaled(metrics: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return {
            name: {"mse": m["rmse"] ** 2 / std**2, "mae": m["mae"] / std, "mae_c": m["mae"]}
            for name, m in metrics.items()
        }

    return {
        "network": plan.network,
        "lookback": plan.lookback,
        "horizon": horizon,
        "seed": seed,
        "commit": code,
        "machine": where,
        "settings": NETWORKS[plan.network],
        "train_settings": TRAINING.get(plan.network, {}),
        "std_c": std,
        "seconds": seconds,
        "epochs": outcome.epochs,
        "test_windows": outcome.test_windows,
        "test": scaled(outcome.metrics),
        "selection": scaled(outcome.selection_metrics),
        "selection_folds": [scaled(fold) for fold in outcome.selection_by_fold],  # fold 1 first
        "coverage_80": outcome.intervals.get("80", {}).get("coverage"),
        "run_id": outcome.run_id,
        "data_settings": DATA.get(plan.network, {}),
        "train_seconds": outcome.train_seconds,  # the fit alone; ``seconds`` is the whole run
        "alignment": outcome.alignment,  # attention models, on 64 test windows (reported only)
        # attention models: MSE with / without what the attention retrieves, selection and test
        "retrieval": outcome.retrieval,
    }


def run_config(lookback: int, horizon: int, network: str, seed: int, epochs: int, accelerator: str):
    from pipelines.config import RunConfig

    return RunConfig.model_validate(
        {
            "data": {"dataset": "etth1", **DATA.get(network, {})},
            "split": {**PAPER_SPLIT, "selection_folds": SELECTION_FOLDS},
            "window": {"lookback": lookback, "horizon": horizon, "stride": 1},
            "model": {"dropout": 0.1, "level_norm": "last", **NETWORKS[network]},
            "train": {
                "epochs": epochs,
                "patience": 3,
                "batch_size": 128,
                "learning_rate": 1e-3,
                "seed": seed,
                "progress_bar": False,
                "accelerator": accelerator,
                **TRAINING.get(network, {}),
            },
            "tracking": {
                "experiment": "ett-benchmark",
                "run_name": f"{network}-L{lookback}-H{horizon}-seed{seed}",
                "onnx_export": False,  # compared, never served: the seconds are training's
            },
        }
    )


def fmt(pair: tuple[float, float] | None, digits: int = 3) -> str:
    return "" if pair is None else f"{pair[0]:.{digits}f}/{pair[1]:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="every network and horizon")
    parser.add_argument("--networks", help="comma-separated: only these networks of the plan")
    parser.add_argument("--lookbacks", help="comma-separated: only these look-backs of the plan")
    parser.add_argument("--horizons", help="comma-separated: only these horizons of the plan")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--only-seeds",
        help="comma-separated: only these of the seeds 0..SEEDS-1 (e.g. to add seeds to a row)",
    )
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="torch CPU threads (1 when other work shares the cores: spinning threads stall)",
    )
    parser.add_argument(
        "--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    )
    parser.add_argument("--results", type=Path, default=RAW_RESULTS, help="raw runs (JSON lines)")
    parser.add_argument("--render", action="store_true", help="only print the tables from --results")
    parser.add_argument(
        "--readme",
        type=Path,
        help="with --render: write the tables into this file, between its ett-tables markers",
    )
    parser.add_argument("--commit", help="render only runs made at this commit (default: all)")
    parser.add_argument(
        "--linear-results", type=Path, default=LINEAR_RESULTS, help="NLinear's records (ett_linear.py)"
    )
    args = parser.parse_args()
    only_seeds = seed_list(args.only_seeds, args.seeds)
    if args.render:
        runs = [r for r in read_runs(args.results) if args.commit in (None, r["commit"])]
        linear = {
            k: r for k, r in read_linear(args.linear_results).items() if args.commit in (None, r["commit"])
        }
        if args.readme:
            write_block(args.readme, BEGIN, END, render(runs, linear) + "\n")
            print(f"wrote the tables of {len(runs)} runs into {args.readme}")
        else:
            print(render(runs, linear))
        return

    import torch

    from pipelines.cli import quiet_libraries
    from pipelines.train import run_training

    quiet_libraries()
    torch.set_num_threads(args.threads)
    plans = narrowed(full_plan(args.seeds) if args.full else cpu_plan(args.seeds), args)
    std = ot_train_std()
    code, where = commit(), machine()
    done = {
        (r["network"], r["lookback"], r["horizon"], r["seed"])
        for r in read_runs(args.results)
        if r["commit"] == code
    }
    todo = [
        (plan, horizon, seed)
        for plan in plans
        for horizon in plan.horizons
        for seed in range(plan.seeds)
        if (plan.network, plan.lookback, horizon, seed) not in done
        and (only_seeds is None or seed in only_seeds)
    ]
    todo = interleaved(todo)
    print(f"{len(todo)} runs to do, {len(done)} already in {args.results} at commit {code}", flush=True)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    for k, (plan, horizon, seed) in enumerate(todo, 1):
        config = run_config(plan.lookback, horizon, plan.network, seed, args.epochs, args.accelerator)
        tick = time.perf_counter()
        outcome = run_training(config, args.tracking_uri)
        record = run_record(outcome, plan, horizon, seed, time.perf_counter() - tick, std, code, where)
        with args.results.open("a") as raw:
            raw.write(json.dumps(record) + "\n")
        elapsed = time.perf_counter() - started
        left = elapsed / k * (len(todo) - k)
        print(
            f"[{k}/{len(todo)}, {elapsed / 60:.0f} min, ~{left / 60:.0f} min left] {plan.network:>17} "
            f"L={plan.lookback:<3} H={horizon:<3} seed {seed}: selection MSE {folds_mse(record, SELECTION_FOLDS):.4f}, "
            f"test MSE {record['test']['model']['mse']:.4f} MAE {record['test']['model']['mae']:.4f} "
            f"({record['seconds']:.0f} s)",
            flush=True,
        )
    print(
        "\n"
        + render(
            [r for r in read_runs(args.results) if r["commit"] == code], read_linear(args.linear_results)
        )
    )


BEGIN, END = (
    "<!-- ett-tables:begin (generated by ett_benchmark.py --render --readme) -->",
    "<!-- ett-tables:end -->",
)


def readme_tables(document: str, markers: tuple[str, str] = (BEGIN, END)) -> str:
    """The generated block of a README between ``markers``, as its render printed it (the
    README's figures come from the raw results only, and a test checks they still do)."""
    return read_block(document, *markers).rstrip("\n")


@dataclass
class Row:
    """The seeds of one network at one look-back and horizon."""

    runs: list[dict]

    def mean_std(self, split: str, metric: str, name: str = "model") -> tuple[float, float]:
        values = [r[split][name][metric] for r in self.runs]
        return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def on_current_rule(run: dict) -> bool:
    """Whether ``run`` was scored by today's selection rule: each of SELECTION_FOLDS folds recorded
    (runs made before issue 34 hold the selection period alone, k = 1)."""
    return len(run.get("selection_folds", [])) == SELECTION_FOLDS


def grouped(runs: list[dict]) -> dict[tuple[int, str, int], Row]:
    """The runs of each (look-back, network, horizon); where some were scored by today's rule,
    only those (a row never mixes the two rules' selection figures)."""
    rows: dict[tuple[int, str, int], Row] = {}
    for run in runs:
        rows.setdefault((run["lookback"], run["network"], run["horizon"]), Row([])).runs.append(run)
    for key, row in rows.items():
        current = [run for run in row.runs if on_current_rule(run)]
        rows[key] = Row(current or row.runs)
    return rows


def current(row: Row) -> bool:
    return on_current_rule(row.runs[0])


def chosen(rows: dict[tuple[int, str, int], Row], lookback: int, horizon: int) -> str | None:
    """The network with the lowest mean selection MSE here, among the rows scored by today's rule
    (or all rows when none is): the pick, made without test data."""
    here = {net: row for (lb, net, h), row in rows.items() if lb == lookback and h == horizon}
    if any(current(row) for row in here.values()):
        here = {net: row for net, row in here.items() if current(row)}
    return min(here, key=lambda net: fold_mse(here[net])) if here else None


def folds_mse(run: dict, folds: int) -> float:
    """One run's selection MSE over its first ``folds`` folds: the mean of their MSEs (fold 1
    alone: k = 1). Runs made before the folds were recorded have their selection period's only."""
    if "selection_folds" not in run:
        return run["selection"]["model"]["mse"]
    return statistics.mean(fold["model"]["mse"] for fold in run["selection_folds"][:folds])


def fold_mse(row: Row, folds: int = SELECTION_FOLDS) -> float:
    """Mean over seeds of ``folds_mse``: what the pick and the tables' selection MSE read."""
    return statistics.mean(folds_mse(run, folds) for run in row.runs)


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            result[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return result


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation: Pearson's on the ranks (NaN when one side is all ties)."""
    try:
        return statistics.correlation(ranks(a), ranks(b))
    except statistics.StatisticsError:
        return float("nan")


def rank_table(rows: dict[tuple[int, str, int], Row]) -> list[str]:
    """How well each selection rule predicts test, from the same trained models: at every look-back
    and horizon, the pick of k = 1 (fold 1, the selection period alone) and of k = SELECTION_FOLDS
    (the mean over folds), each pick's test MSE against the best network's on test, and Spearman's
    correlation of selection and test MSE over the networks. Fold 2 against fold 1 is measured
    before test: how much one fold's order says about the next."""
    k = SELECTION_FOLDS
    lines = [
        f"### Selection against test (k = 1 vs k = {k}, the same runs)",
        "",
        f"Networks scored by today's rule only (every fold recorded). Pick: the lowest mean selection MSE "
        f"(k = 1: fold 1, the selection period; k = {k}: the mean over folds 1-{k}); "
        "its test MSE and how far it is above the best network on test; rho: Spearman's correlation of "
        "mean selection and mean test MSE over the networks; folds: fold 2's order against fold 1's "
        "(both before test).",
        "",
        f"| L | H | networks | best on test | k = 1 pick | k = {k} pick | rho k = 1 | rho k = {k} | folds 2 vs 1 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    tally: dict[int, list[tuple[bool, float, float]]] = {1: [], k: []}
    agreement = []
    for lookback, horizons in HORIZONS.items():
        for horizon in horizons:
            here = {
                net: row
                for (lb, net, h), row in rows.items()
                if lb == lookback and h == horizon and current(row)
            }
            if len(here) < 3:
                continue
            names = sorted(here)
            test = {net: here[net].mean_std("test", "mse")[0] for net in names}
            best = min(names, key=test.__getitem__)
            cells = []
            for folds in (1, k):
                score = {net: fold_mse(here[net], folds) for net in names}
                pick = min(names, key=score.__getitem__)
                regret = test[pick] / test[best] - 1
                rho = spearman([score[n] for n in names], [test[n] for n in names])
                tally[folds].append((pick == best, regret, rho))
                cells.append((f"{pick} ({test[pick]:.4f}, +{regret:.1%})", rho))
            fold2 = [
                statistics.mean(r["selection_folds"][1]["model"]["mse"] for r in here[n].runs) for n in names
            ]
            agree = spearman(fold2, [fold_mse(here[n], 1) for n in names])
            agreement.append(agree)
            lines.append(
                f"| {lookback} | {horizon} | {len(names)} | {best} ({test[best]:.4f}) | {cells[0][0]} | "
                f"{cells[1][0]} | {cells[0][1]:+.2f} | {cells[1][1]:+.2f} | {agree:+.2f} |"
            )
    if not tally[1]:
        return []
    lines.append("")
    for folds in (1, k):
        hits, regrets, rhos = zip(*tally[folds], strict=True)
        lines.append(
            f"k = {folds}: the pick was the best on test in {sum(hits)} of {len(hits)} cells; its test MSE "
            f"was on average {statistics.mean(regrets):.1%} above the best (worst {max(regrets):.1%}); "
            f"mean rho {statistics.mean(rhos):+.2f}."
        )
    lines += [
        f"Fold 2's order against fold 1's, before test: mean rho {statistics.mean(agreement):+.2f}.",
        "",
    ]
    return lines


def run_fit_seconds(run: dict) -> float:
    """The fit alone where the run recorded it (since issue 41), else the whole run."""
    return run.get("train_seconds") or run["seconds"]


def fit_seconds(row: Row) -> float:
    """Mean over seeds of the fit's seconds."""
    return statistics.mean(run_fit_seconds(r) for r in row.runs)


def epoch_seconds(row: Row) -> float:
    """Mean over seeds of the fit's seconds per epoch."""
    return statistics.mean(run_fit_seconds(r) / r["epochs"] for r in row.runs)


def attention_table(rows: dict[tuple[int, str, int], Row]) -> list[str]:
    """Issue 41's ablation: each attention network against the same network without attention
    (ATTENTION_PAIRS), test MSE over seeds, and its fit time as a ratio to TIMING_REFERENCE's
    runs, made in the same invocation, networks taking turns; then how every attention row's
    weights align (forecaster/alignment.py, 64 evenly spaced test windows, reported only)."""
    lines = []
    for attended, plain in ATTENTION_PAIRS.items():
        cells = []
        for lookback, horizons in HORIZONS.items():
            for horizon in horizons:
                with_attention = rows.get((lookback, attended, horizon))
                without = rows.get((lookback, plain, horizon))
                if with_attention is None or without is None:
                    continue
                cells.append(
                    (
                        lookback,
                        horizon,
                        with_attention,
                        without,
                        rows.get((lookback, TIMING_REFERENCE, horizon)),
                    )
                )
        if not cells:
            continue
        lines += [
            f"### Attention against none: {attended} and {plain} (issue 41)",
            "",
            f"Test MSE, mean over seeds +- sample std (n); ratio: with / without attention; fit seconds (the "
            f"fit alone, mean over seeds) and their ratio to {TIMING_REFERENCE}'s, run in the same invocation; "
            "per epoch: the same ratio of seconds per epoch (early stopping ends runs after different "
            "numbers of epochs).",
            "",
            f"| L | H | {attended} | {plain} | ratio | naive | fit s: attention / none / {TIMING_REFERENCE} | "
            f"attention / {TIMING_REFERENCE} | per epoch |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        wins, beats_naive, ratios, per_epoch_ratios = 0, 0, [], []
        for lookback, horizon, with_attention, without, reference in cells:
            (a, sa), (b, sb) = with_attention.mean_std("test", "mse"), without.mean_std("test", "mse")
            naive = with_attention.runs[0]["test"]["naive"]["mse"]
            wins += a < b
            beats_naive += a < naive
            fit = [fit_seconds(row) for row in (with_attention, without)]
            timing, ratio, per_epoch = f"{fit[0]:.0f} / {fit[1]:.0f} / -", "", ""
            if reference is not None:
                reference_fit = fit_seconds(reference)
                timing = f"{fit[0]:.0f} / {fit[1]:.0f} / {reference_fit:.0f}"
                ratios.append(fit[0] / reference_fit)
                ratio = f"{ratios[-1]:.2f}"
                per_epoch_ratios.append(epoch_seconds(with_attention) / epoch_seconds(reference))
                per_epoch = f"{per_epoch_ratios[-1]:.2f}"
            lines.append(
                f"| {lookback} | {horizon} | {a:.4f} +-{sa:.4f} (n={len(with_attention.runs)}) | "
                f"{b:.4f} +-{sb:.4f} (n={len(without.runs)}) | {a / b:.3f} | {naive:.4f} | {timing} | {ratio} | "
                f"{per_epoch} |"
            )
        lines += [
            "",
            f"Attention lower than none in {wins} of {len(cells)} cells, lower than naive in {beats_naive} of "
            f"{len(cells)}"
            + (
                f"; fit time {min(ratios):.2f}x to {max(ratios):.2f}x {TIMING_REFERENCE}'s, "
                f"{min(per_epoch_ratios):.2f}x to {max(per_epoch_ratios):.2f}x per epoch."
                if ratios
                else "."
            ),
            "",
        ]
    aligned = sorted((key, row) for key, row in rows.items() if all(r.get("alignment") for r in row.runs))
    if aligned:
        lines += [
            "### How the attention aligns (issue 41)",
            "",
            "Measured on the attention weights of 64 evenly spaced test windows per run (reported only), "
            "mean over seeds: entropy of the rows over log L (1 = uniform), mean total-variation "
            "distance between the rows of two forecast steps (0 = every step the same row), the weight "
            "on lags that are whole days (k*24) and what uniform rows put there.",
            "",
            "| network | L | H | calendar | entropy | row distance | weight on lags k*24 (uniform) | test MSE | "
            f"n | fit s, per epoch: model / {ALIGNMENT_TIMING_REFERENCE} |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for (lookback, network, horizon), row in aligned:

            def mean(key: str, row: Row = row) -> float:
                return statistics.mean(r["alignment"][key] for r in row.runs)

            calendar = "yes" if row.runs[0].get("data_settings", {}).get("calendar_features") else "no"
            lines.append(
                f"| {network} | {lookback} | {horizon} | {calendar} | {mean('entropy'):.3f} | "
                f"{mean('row_distance'):.3f} | {mean('seasonal_share'):.1%} ({mean('seasonal_share_uniform'):.1%}) | "
                f"{row.mean_std('test', 'mse')[0]:.4f} | {len(row.runs)} | "
                f"{timing_against(row, rows.get((lookback, ALIGNMENT_TIMING_REFERENCE, horizon)), network)} |"
            )
        lines.append("")
    return lines


def timing_against(row: Row, reference: Row | None, network: str) -> str:
    """An alignment model's fit seconds and seconds per epoch against the reference network's runs
    of the same commit (the same invocation), as ratios; blank for other rows."""
    if network not in ALIGNMENT_MODELS or reference is None:
        return ""
    commits = {r["commit"] for r in row.runs}
    same = Row([r for r in reference.runs if r["commit"] in commits])
    if not same.runs:
        return ""
    return (
        f"{fit_seconds(row):.0f} s / {fit_seconds(same):.0f} s = {fit_seconds(row) / fit_seconds(same):.2f}x; "
        f"per epoch {epoch_seconds(row) / epoch_seconds(same):.2f}x"
    )


def linear_row(
    linear: dict[tuple[int, int], dict], lookback: int, horizons: list[int], label: str, cell
) -> list[str]:
    """NLinear's row of a look-back's table (none where it has no record there): ``cell`` of each
    horizon's record."""
    if not any((lookback, h) in linear for h in horizons):
        return []
    cells = ["" if (lookback, h) not in linear else cell(linear[(lookback, h)]) for h in horizons]
    return [f"| {label} | " + " | ".join(cells) + " |"]


def linear_test(record: dict) -> str:
    test = record["test"]["model"]
    return f"{test['mse']:.4f}/{test['mae']:.4f}"


def linear_selection(record: dict) -> str:
    return f"sel. MSE {folds_mse(record, SELECTION_FOLDS):.4f}; {record['test']['model']['mae_c']:.3f} degC"


def at(horizons: list[str]) -> str:
    return f"at H={', '.join(horizons)}" if horizons else "at no horizon"


def linear_lines(
    linear: dict[tuple[int, int], dict], rows: dict, lookback: int, horizons: list[int]
) -> list[str]:
    """NLinear's selection MSE beside the pick's at each horizon, and which would be picked if it
    were a candidate: where selection would have carried the floor, and where test says it mattered."""
    cells, picked, lower_on_test = [], [], []
    for h in horizons:
        record, pick = linear.get((lookback, h)), chosen(rows, lookback, h)
        if record is None or pick is None:
            continue
        mine, theirs = folds_mse(record, SELECTION_FOLDS), fold_mse(rows[(lookback, pick, h)])
        cells.append(f"H={h}: {mine:.4f} against {pick}'s {theirs:.4f}")
        picked += [str(h)] if mine < theirs else []
        pick_test = rows[(lookback, pick, h)].mean_std("test", "mse")[0]
        lower_on_test += [str(h)] if record["test"]["model"]["mse"] < pick_test else []
    if not cells:
        return []
    return [
        f"{LINEAR} (NLinear fitted by least squares on these training windows, ett_linear.py; one fit, no "
        f"seed), selection MSE against the chosen network's: {'; '.join(cells)}. As a candidate it would be "
        f"chosen {at(picked)}; its test MSE is below the chosen network's {at(lower_on_test)}.",
        "",
    ]


def render(runs: list[dict], linear: dict[tuple[int, int], dict] | None = None) -> str:
    """The README tables, from raw runs only (and NLinear's records, ``read_linear``, where given)."""
    linear = linear or {}
    if not runs:
        return "no runs recorded yet"
    rows = grouped(runs)
    commits = sorted({r["commit"] for r in runs})
    std = runs[0]["std_c"]
    lines = [
        f"ETTh1 univariate (OT), paper protocol; z-score std of OT on train rows = {std:.4f} degC; "
        f"{len(runs)} runs at commit(s) {', '.join(commits)}.",
        "Cells: test MSE/MAE on the z-scored scale; learned models: mean over seeds +- sample std (n). "
        f"(chosen): the network with the lowest mean selection MSE (the mean over {SELECTION_FOLDS} "
        "folds) at that look-back and horizon; [k=1]: runs made before the rolling-origin rule, "
        "scored on the selection period alone, so not among the picks.",
        "",
    ]
    for lookback, horizons in HORIZONS.items():
        mine = {k: v for k, v in rows.items() if k[0] == lookback}
        if not mine:
            continue
        first = {
            h: next((row.runs[0] for (lb, _, hh), row in mine.items() if hh == h), None) for h in horizons
        }
        lines += [f"### Look-back {lookback}", ""]
        lines.append("| model | " + " | ".join(f"H={h}" for h in horizons) + " |")
        lines.append("|---|" + "---|" * len(horizons))
        for name in ("naive", "seasonal_naive"):
            cells = [
                ""
                if first[h] is None
                else f"{first[h]['test'][name]['mse']:.4f}/{first[h]['test'][name]['mae']:.4f}"
                for h in horizons
            ]
            lines.append(f"| {name.replace('_', ' ')} | " + " | ".join(cells) + " |")
        lines += linear_row(
            linear, lookback, horizons, f"{LINEAR} (NLinear, least squares, these windows)", linear_test
        )
        for network in NETWORKS:
            cells = []
            for h in horizons:
                row = mine.get((lookback, network, h))
                if row is None:
                    cells.append("")
                    continue
                (mse, smse), (mae, smae) = row.mean_std("test", "mse"), row.mean_std("test", "mae")
                pick = " (chosen)" if chosen(rows, lookback, h) == network else ""
                older = "" if current(row) else " [k=1]"
                cells.append(f"{mse:.4f}/{mae:.4f} +-{smse:.4f}/{smae:.4f} (n={len(row.runs)}){pick}{older}")
            if any(cells):
                lines.append(f"| **{network}** | " + " | ".join(cells) + " |")
        for paper, figures in PUBLISHED[lookback].items():
            lines.append(f"| {paper} | " + " | ".join(fmt(figures.get(h)) for h in horizons) + " |")
        lines += ["", "| model | " + " | ".join(f"H={h}" for h in horizons) + " |"]
        lines.append("|---|" + "---|" * len(horizons))
        lines.append(
            "| test windows (2881 - H) | "
            + " | ".join("" if first[h] is None else str(first[h]["test_windows"]) for h in horizons)
            + " |"
        )
        for network in NETWORKS:
            cells = []
            for h in horizons:
                row = mine.get((lookback, network, h))
                if row is None:
                    cells.append("")
                    continue
                selection = fold_mse(row)
                mae_c = row.mean_std("test", "mae_c")[0]
                seconds = statistics.mean(r["seconds"] for r in row.runs)
                per_epoch = statistics.mean(r["seconds"] / max(1, r["epochs"]) for r in row.runs)
                covered = [r["coverage_80"] for r in row.runs if r["coverage_80"] is not None]
                coverage = f", 80% cov {statistics.mean(covered):.1%}" if covered else ""
                cells.append(
                    f"sel. MSE {selection:.4f}; {mae_c:.3f} degC, {seconds:.0f} s "
                    f"({per_epoch:.1f} s/epoch){coverage}"
                )
            if any(cells):
                lines.append(
                    f"| {network}: selection MSE, test MAE degC, s/run | " + " | ".join(cells) + " |"
                )
        lines += linear_row(
            linear, lookback, horizons, f"{LINEAR}: selection MSE, test MAE degC", linear_selection
        )
        naive_c = [
            "" if first[h] is None else f"{first[h]['test']['naive']['mae_c']:.3f} degC" for h in horizons
        ]
        lines += ["| naive: MAE degC | " + " | ".join(naive_c) + " |", ""]
        lines += linear_lines(linear, rows, lookback, horizons)
    lines += rank_table(rows)
    lines += attention_table(rows)
    hours = sum(r["seconds"] for r in runs) / 3600
    lines.append(f"Training time of these runs: {hours:.1f} h in all.")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
