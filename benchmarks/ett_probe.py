"""Try a change to one network's ETTh1 configuration on the selection window only, the way the
benchmark's configurations are chosen (benchmarks/README.md, "How the tables are made").

    .venv/bin/python benchmarks/ett_probe.py seg-gru --set train.ema_decay=0.95 --seeds 0,1,2
    .venv/bin/python benchmarks/ett_probe.py seg-lstm --set model.dropout=0.2 --lookbacks 96,336
    .venv/bin/python benchmarks/ett_probe.py seg-seq2seq --set train.epochs=20 --lookbacks 96

Each run trains as ett_benchmark.py does (its run_config, then the --set overrides) without
MLflow, and only the selection window is scored: the test split is never evaluated, so nothing a
probe prints or keeps can carry test figures into a choice. Per look-back and horizon it prints the
mean selection MSE over the seeds and its ratio to the committed runs of the network's current
configuration for the same seeds (benchmarks/results/ett-runs.jsonl), then the geometric mean of
those ratios, the figure the benchmark's adoption rules read. Every run is appended to
--results (benchmarks/results/ett-probes.jsonl).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ett_benchmark as bench  # noqa: E402  (the benchmark's protocol, networks and raw results)
from provenance import commit, machine  # noqa: E402
from readme_block import write_block  # noqa: E402

PROBES = bench.REPO / "benchmarks" / "results" / "ett-probes.jsonl"


def probe_config(lookback: int, horizon: int, network: str, seed: int, sets: list[str]):
    """The benchmark's configuration of ``network`` with the ``--set`` overrides applied and
    validated (a bad one stops with the field named). Another epoch cap is a ``--set`` too
    (``train.epochs=20``), so that a probe's record names everything it changed."""
    from pipelines.config import apply_override, validate

    data = bench.run_config(lookback, horizon, network, seed, bench.EPOCHS, "cpu").model_dump()
    for assignment in sets:
        apply_override(data, assignment)
    return validate(data, source="--set")


def run_probe(config, std: float) -> dict[str, float]:
    """Train (no MLflow) and score the selection window: MSE on the z-scored scale."""
    from forecaster.data.datamodule import prepare
    from forecaster.data.source import load_from_config
    from forecaster.selection import evaluate_selection
    from forecaster.training import train_model

    forecast_config = config.forecast_config()
    prepared = prepare(load_from_config(forecast_config.data), forecast_config)
    started = time.perf_counter()
    trained = train_model(forecast_config, prepared)
    seconds = time.perf_counter() - started
    scored = evaluate_selection(trained.predictor, prepared, forecast_config.split.folds)
    selection = scored.metrics
    return {  # the selection score's RMSE (the mean over folds) squared: see committed_selection
        "selection_mse": selection["model"]["rmse"] ** 2 / std**2,
        "selection_naive_mse": selection["naive"]["rmse"] ** 2 / std**2,
        "epochs": trained.epochs_run,
        "seconds": seconds,
        # attention models: how the weights of selection-period windows align (forecaster/alignment.py)
        **({"alignment": scored.alignment.as_dict()} if scored.alignment else {}),
    }


def base_of(record: dict) -> dict | None:
    """The configuration a probe changed: recorded since issue 41 (``base``: the network's model
    and training settings); None for an earlier probe, made against the configuration the network
    had then, before attention layouts existed."""
    return record.get("base")


def label(record: dict) -> str:
    """The network a probe changed, with its attention layout where it has one (a probe made
    before layouts existed changed the `states` layout, the only one then)."""
    network, base = record["network"], base_of(record)
    if base is None:
        return (
            f"{network} (states layout)" if "attention_layout" in bench.NETWORKS.get(network, {}) else network
        )
    layout = base["settings"].get("attention_layout")
    return network if layout is None else f"{network} ({layout} layout)"


def base_runs(network: str, base: dict | None, commits: set[str] | None = None) -> list[dict]:
    """The committed runs of ``network`` in configuration ``base`` (settings and training settings);
    for ``base`` None, its runs without an attention layout, the configuration of every probe made
    before issue 41 (the segment seq2seq's are in the superseded file since). ``commits``: only the
    runs made at these commits."""
    # the superseded runs first, then the current ones: a later run of the same configuration and
    # seed replaces an earlier one (committed_selection keeps the last), so a configuration rerun
    # on a later commit is compared with its rerun, not with the runs it superseded
    runs = [
        r
        for r in bench.recorded_runs()
        if r["network"] == network and (commits is None or r["commit"] in commits)
    ]
    if base is None:
        return [r for r in runs if "attention_layout" not in r["settings"]]
    return [
        r for r in runs if r["settings"] == base["settings"] and r.get("train_settings", {}) == base["train"]
    ]


def committed_selection(
    network: str,
    folds: int = bench.SELECTION_FOLDS,
    base: dict | None = None,
    commits: set[str] | None = None,
) -> dict[tuple[int, int, int], float]:
    """(look-back, horizon, seed) -> selection MSE over ``folds`` folds of the committed runs of
    ``network`` in configuration ``base`` (``base_runs``, made at ``commits`` if given) that recorded
    them (a ratio to a score over other folds would mean nothing), on
    the probes' own scale: the square of the folds' mean RMSE, as the selection score averages
    RMSE over folds (the benchmark's pick reads the mean of the folds' MSEs instead, which is
    never lower; a probe's ratio needs both sides alike, and probes recorded this one)."""
    return {
        (r["lookback"], r["horizon"], r["seed"]): statistics.mean(
            math.sqrt(fold["model"]["mse"]) for fold in r["selection_folds"][:folds]
        )
        ** 2
        for r in base_runs(network, base, commits)
        if len(r.get("selection_folds", [])) >= folds
    }


def summary(records: list[dict], network: str) -> list[str]:
    """Mean selection MSE per look-back and horizon, its ratio to the committed runs of the same
    seeds, and the geometric mean of the ratios."""
    committed = reference(network, records[0], read_probes() + records) if records else {}
    cells: dict[tuple[int, int], list[dict]] = {}
    for record in records:
        cells.setdefault((record["lookback"], record["horizon"]), []).append(record)
    lines, ratios = [], []
    for (lookback, horizon), runs in sorted(cells.items()):
        mean = statistics.mean(r["selection_mse"] for r in runs)
        seeds = sorted(r["seed"] for r in runs)
        base = [committed.get((lookback, horizon, s)) for s in seeds]
        ratio = None if None in base else mean / statistics.mean(base)
        if ratio is not None:
            ratios.append(ratio)
        against = "no committed runs of these seeds" if ratio is None else f"{ratio:.3f}x committed"
        lines.append(f"L={lookback:<3} H={horizon:<3} seeds {seeds}: selection MSE {mean:.4f} ({against})")
    if ratios:
        gmean = math.exp(statistics.mean(math.log(r) for r in ratios))
        lines.append(f"geometric mean of the ratios over {len(ratios)} cells: {gmean:.3f}")
    return lines


def reference(network: str, record: dict, probes: list[dict]) -> dict[tuple[int, int, int], float]:
    """What a probe's selection MSE is a ratio to: the committed runs of the configuration it
    changed, or where none were committed yet (a configuration searched before its 3-seed runs),
    that configuration's own probes (no --set) on the same selection folds."""
    base, folds = base_of(record), record.get("k") or bench.SELECTION_FOLDS
    committed = committed_selection(network, folds, base)
    if committed:
        return committed
    return {
        (p["lookback"], p["horizon"], p["seed"]): p["selection_mse"]
        for p in probes
        if p["network"] == network and not p["sets"] and base_of(p) == base and p.get("k") == folds
    }


def read_probes() -> list[dict]:
    return bench.read_runs(PROBES)


BEGIN, END = (
    "<!-- ett-probes:begin (generated by ett_probe.py --render --readme) -->",
    "<!-- ett-probes:end -->",
)


def render(records: list[dict]) -> str:
    """The probes scored by today's selection rule (bench.SELECTION_FOLDS folds), one row per
    network, look-back and change: selection MSE per horizon as a ratio to the committed runs of
    the same seeds, their geometric mean (what the adoption rule reads), and whether the change
    beat naive's selection MSE at every horizon."""
    groups: dict[tuple[str, int, tuple[str, ...]], list[dict]] = {}
    for record in records:
        if record.get("k") == bench.SELECTION_FOLDS and record["sets"]:  # no --set: a reference
            key = (label(record), record["lookback"], tuple(record["sets"]))
            groups.setdefault(key, []).append(record)
    if not groups:
        return "no probes scored by today's selection rule"
    lines = [
        f"Probes on today's selection rule (k = {bench.SELECTION_FOLDS}); cells: selection MSE as a ratio "
        "to the committed configuration's runs of the same seeds (below 1: better on selection).",
        "",
    ]
    for lookback in sorted({lb for _, lb, _ in groups}):
        horizons = bench.HORIZONS[lookback]
        lines += [
            "| network, L="
            + str(lookback)
            + " | change | "
            + " | ".join(f"H={h}" for h in horizons)
            + " | geometric mean | beats naive everywhere | runs |",
            "|---|---|" + "---|" * len(horizons) + "---|---|---|",
        ]
        for (name, lb, sets), runs in sorted(groups.items()):
            if lb != lookback:
                continue
            committed = reference(runs[0]["network"], runs[0], records)
            cells, ratios, beats = [], [], True
            for horizon in horizons:
                here = [r for r in runs if r["horizon"] == horizon]
                base = [committed.get((lookback, horizon, r["seed"])) for r in here]
                if not here or None in base:
                    cells.append("")
                    continue
                ratio = statistics.mean(r["selection_mse"] for r in here) / statistics.mean(base)
                ratios.append(ratio)
                beats &= all(r["selection_mse"] < r["selection_naive_mse"] for r in here)
                cells.append(f"{ratio:.3f}")
            gmean = math.exp(statistics.mean(math.log(r) for r in ratios)) if ratios else float("nan")
            lines.append(
                f"| {name} | {' '.join(sets)} | "
                + " | ".join(cells)
                + f" | {gmean:.3f} | {'yes' if beats else 'no'} | {len(runs)} |"
            )
        lines.append("")
    lines += alignment_table(records)
    lines += against_twin(records)
    return "\n".join(lines).rstrip("\n")


def configuration(network: str) -> dict:
    """A network's configuration as probes record it (``base``): its settings and training settings."""
    return {"settings": bench.NETWORKS[network], "train": bench.TRAINING.get(network, {})}


def configuration_without(network: str, *added: str) -> dict:
    """``network``'s configuration without the settings ``added`` (keys set since): what it was
    before they were added, as long as no other setting changed its value since."""
    current = configuration(network)
    return {
        **current,
        "settings": {key: value for key, value in current["settings"].items() if key not in added},
    }


# name -> the earlier configurations of an attention network whose probes against the network without
# attention the README still shows (newest first), with what tells them apart from the current one:
# the tenth pass adopted model.attention_lag_scale=10, probed on the configuration before it
EARLIER_CONFIGURATIONS: dict[str, list[tuple[str, dict]]] = {
    "seg-seq2seq-attention": [
        (
            "before the tenth pass (model.attention_lag_scale 100, the default)",
            configuration_without("seg-seq2seq-attention", "attention_lag_scale"),
        )
    ]
}


def ratio_to(
    runs: dict[tuple[int, int, int], float], reference: dict[tuple[int, int, int], float]
) -> dict[tuple[int, int], float]:
    """(look-back, horizon) -> the mean over seeds of ``runs`` as a ratio to ``reference``'s mean over
    the same seeds, for the cells where ``reference`` has every one of them."""
    cells: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for key in runs:
        cells.setdefault(key[:2], []).append(key)
    return {
        cell: statistics.mean(runs[k] for k in keys) / statistics.mean(reference[k] for k in keys)
        for cell, keys in cells.items()
        if all(k in reference for k in keys)
    }


def selection_by_change(
    records: list[dict], network: str, base: dict | None = None
) -> dict[tuple[str, ...], dict[tuple[int, int, int], float]]:
    """The probes of changes to ``network``'s configuration ``base`` (default: its current one) on
    today's rule: change (its --set list) -> (look-back, horizon, seed) -> selection MSE."""
    base = configuration(network) if base is None else base
    changes: dict[tuple[str, ...], dict[tuple[int, int, int], float]] = {}
    for record in records:
        if (
            record["network"] == network
            and record["sets"]
            and record.get("k") == bench.SELECTION_FOLDS
            and base_of(record) == base
        ):
            key = (record["lookback"], record["horizon"], record["seed"])
            changes.setdefault(tuple(record["sets"]), {})[key] = record["selection_mse"]
    return changes


def against_twin(records: list[dict]) -> list[str]:
    """What issue 41's passes judged an attention change by: the attention network's mean selection
    MSE over seeds as a ratio to the same network without attention's (bench.ATTENTION_PAIRS), cell
    by cell, on the probes' scale. One table for the attention network's current configuration, then
    one for each of its EARLIER_CONFIGURATIONS. The first row is that configuration's committed runs
    (the superseded ones for an earlier configuration) against the network without attention's made
    in the same invocations (the same commits); a
    change to it is set against the network without attention's probes with the same change where
    it has some (an epoch cap given to both), its committed runs of the same seeds otherwise. Then
    the cells below 1, the worst cell and the geometric mean: the third pass's rule reads the lowest
    worst cell, then the geometric mean."""
    lines: list[str] = []
    for attended, plain in bench.ATTENTION_PAIRS.items():
        configurations = [("current", configuration(attended)), *EARLIER_CONFIGURATIONS.get(attended, [])]
        for described, base in configurations:
            lines += twin_table(records, attended, plain, described, base)
    return lines


def twin_table(records: list[dict], attended: str, plain: str, described: str, base: dict) -> list[str]:
    """``against_twin``'s table for the attention network's configuration ``base`` (``described``:
    which configuration it is, for the heading). Stops where that configuration has committed runs
    but the network without attention has none of the same commits: its ratios would be empty."""
    folds = bench.SELECTION_FOLDS
    cells = [(lookback, horizon) for lookback, horizons in bench.HORIZONS.items() for horizon in horizons]
    # the network without attention's runs made with this configuration's, in the same invocations:
    # a rerun of it beside a later configuration differs in the last digits (the machine's)
    commits = {run["commit"] for run in base_runs(attended, base)}
    twin = committed_selection(plain, folds, configuration(plain), commits)
    if commits and not twin:
        raise SystemExit(
            f"{plain} has no committed runs of {attended}'s commits {sorted(commits)} ({described})"
        )
    rows = [("(committed)", "committed", ratio_to(committed_selection(attended, folds, base), twin), 0)]
    twin_changes = selection_by_change(records, plain)
    for sets, runs in sorted(selection_by_change(records, attended, base).items()):
        same = twin_changes.get(sets)
        reference, against = (same, "the same change") if same else (twin, "committed")
        rows.append((" ".join(sets), against, ratio_to(runs, reference), len(runs)))
    lines = [
        f"The {attended} probes against {plain} (issue 41), {attended}'s {described} configuration, the "
        f"probes' scale: mean selection MSE over seeds, {attended} / {plain}, below 1: attention lower; "
        f"{plain}'s runs with the same change, or its committed runs of the same seeds.",
        "",
        f"| change | {plain} | "
        + " | ".join(f"L={lb} H={h}" for lb, h in cells)
        + " | below 1 | worst | geometric mean | runs |",
        "|---|---|" + "---|" * len(cells) + "---|---|---|---|",
    ]
    for change, against, ratios, runs in rows:
        shown = [ratios[cell] for cell in cells if cell in ratios]
        if not shown:  # no cell whose seeds the reference has
            continue
        gmean = math.exp(statistics.mean(math.log(r) for r in shown))
        lines.append(
            f"| {change} | {against} | "
            + " | ".join(f"{ratios[cell]:.4f}" if cell in ratios else "" for cell in cells)
            + f" | {sum(r < 1 for r in shown)} of {len(shown)} | {max(shown):.4f} | {gmean:.4f} | "
            + f"{runs or ''} |"
        )
    return [*lines, ""]


def alignment_table(records: list[dict]) -> list[str]:
    """How the attention of the probes that recorded it aligns on the selection period's windows
    (forecaster/alignment.py; reported only, never a reason to adopt): per network, look-back and
    change (unchanged: the reference probes, no --set), means over runs."""
    groups: dict[tuple[str, int, tuple[str, ...]], list[dict]] = {}
    for record in records:
        if record.get("k") == bench.SELECTION_FOLDS and record.get("alignment"):
            groups.setdefault((label(record), record["lookback"], tuple(record["sets"])), []).append(record)
    if not groups:
        return []
    lines = [
        "Their attention on the selection period's windows, means over runs: entropy of the rows over "
        "log L (1 = uniform), mean total-variation distance between the rows of two forecast steps, "
        "weight on lags k*24 (what uniform rows put there).",
        "",
        "| network | L | change | entropy | row distance | weight on lags k*24 (uniform) | runs |",
        "|---|---|---|---|---|---|---|",
    ]
    for (name, lookback, sets), runs in sorted(groups.items(), key=lambda item: (item[0][1], item[0])):

        def mean(key: str, runs: list[dict] = runs) -> float:
            return statistics.mean(r["alignment"][key] for r in runs)

        lines.append(
            f"| {name} | {lookback} | {' '.join(sets) or '(unchanged)'} | {mean('entropy'):.3f} | "
            f"{mean('row_distance'):.3f} | {mean('seasonal_share'):.1%} ({mean('seasonal_share_uniform'):.1%}) | "
            f"{len(runs)} |"
        )
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if "--render" in sys.argv:  # the README's probe table from --results alone, no training
        parser.add_argument("--render", action="store_true")
        parser.add_argument("--results", type=Path, default=PROBES)
        parser.add_argument("--readme", type=Path, help="write it between the file's ett-probes markers")
        args = parser.parse_args()
        table = render(bench.read_runs(args.results))
        if args.readme:
            write_block(args.readme, BEGIN, END, table + "\n")
            print(f"wrote the probe table into {args.readme}")
        else:
            print(table)
        return
    parser.add_argument("network", choices=list(bench.NETWORKS))
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--lookbacks", default="336", help="comma-separated: 96 and/or 336")
    parser.add_argument("--horizons", help="comma-separated (default: every horizon of the look-back)")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds")
    parser.add_argument("--threads", type=bench.positive_integer, default=1, help="torch CPU threads")
    parser.add_argument("--results", type=Path, default=PROBES, help="probe runs (JSON lines)")
    args = parser.parse_args()
    cells, seeds = bench.cells_and_seeds(args.lookbacks, args.horizons, args.seeds)

    import torch

    from forecaster.errors import ConfigError
    from pipelines.cli import quiet_libraries

    quiet_libraries()
    torch.set_num_threads(args.threads)
    plan = [(lookback, horizon, seed) for lookback, horizon in cells for seed in seeds]
    try:
        configs = [probe_config(lb, h, args.network, s, args.sets) for lb, h, s in plan]
    except ConfigError as exc:
        raise SystemExit(str(exc)) from None
    std = bench.ot_train_std()
    code, where = commit(), machine()
    records = []
    for (lookback, horizon, seed), config in zip(plan, configs, strict=True):
        record = {
            "network": args.network,
            "sets": args.sets,
            "lookback": lookback,
            "horizon": horizon,
            "seed": seed,
            "commit": code,
            "machine": where,
            "k": config.split.folds,  # the selection folds its selection MSE is the mean over
            "base": configuration(args.network),
            **run_probe(config, std),
        }
        records.append(record)
        args.results.parent.mkdir(parents=True, exist_ok=True)
        with args.results.open("a") as raw:
            raw.write(json.dumps(record) + "\n")
        aligned = record.get("alignment")
        alignment = (
            ""
            if aligned is None
            else (
                f", entropy {aligned['entropy']:.3f}, row distance {aligned['row_distance']:.3f}, "
                f"lags k*{aligned['period']} {aligned['seasonal_share']:.3f} "
                f"(uniform {aligned['seasonal_share_uniform']:.3f})"
            )
        )
        print(
            f"{args.network} {' '.join(args.sets) or '(as committed)'} L={lookback} H={horizon} "
            f"seed {seed}: selection MSE {record['selection_mse']:.4f} ({record['seconds']:.0f} s){alignment}",
            flush=True,
        )
    print("\n".join(summary(records, args.network)))


if __name__ == "__main__":
    main()
