"""benchmarks/README.md's ONNX-against-torch block (issue 33) is what decoder_serving.py --render
makes of the committed raw results, and the targets are computed from those results as the issue
states them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

import decoder_serving  # noqa: E402

from tests.benchmarks.rendering import render_into_readme  # noqa: E402


def wrk_run(server, model, runtime, connections, p50, p99, rps, cpu_us, round_no=1, **extra) -> dict:
    return {
        "round": round_no,
        "server": server,
        "model": model,
        "runtime": runtime,
        "connections": connections,
        "requests": 1000,
        "duration_s": 1.0,
        "rps": rps,
        "errors": {"connect": 0, "read": 0, "write": 0, "timeout": 0, "status": 0},
        "statuses": {"200": 1000},
        "latency_ms": {"p50": p50, "p90": p99, "p99": p99, "max": p99, "mean": p50},
        "server_cpu_s": cpu_us * 1e-3,
        "cpu_us_per_request": cpu_us,
        **extra,
    }


def results() -> dict:
    network = [
        {"model": "lstm", "asked": "torch", "runtime": "torch", "served_with": "torch",
         "network_us_per_window_b1": 1500.0, "network_us_per_window_b32": 360.0,
         "network_us_per_window_b256": 300.0, "formed_batch": 16.0, "network_us_per_window_formed": 400.0},
        {"model": "lstm", "asked": "onnx", "runtime": "onnx", "served_with": "onnx",
         "network_us_per_window_b1": 550.0, "network_us_per_window_b32": 320.0,
         "network_us_per_window_b256": 290.0, "formed_batch": 16.0, "network_us_per_window_formed": 330.0},
    ]  # fmt: skip
    batched = {"batched_windows": 1600.0, "forward_passes": 100.0}
    runs = []
    for round_no, slower in ((1, 1.0), (2, 2.0), (3, 1.1)):  # medians: round 3's figures
        runs += [
            wrk_run("ours", "lstm", "torch", 1, 2.2 * slower, 3.0, 400, 900, round_no),
            wrk_run(
                "ours", "lstm", "torch", 32, 20.0, 40.0 * slower, 1500, 700 * slower, round_no, **batched
            ),
            wrk_run("ours", "lstm", "onnx", 1, 1.0 * slower, 2.0, 800, 600, round_no),
            wrk_run("ours", "lstm", "onnx", 32, 10.0, 60.0 * slower, 2100, 500, round_no, **batched),
            wrk_run("floor", None, None, 1, 0.3 * slower, 0.5, 3000, 120, round_no),
            wrk_run("floor", None, None, 32, 5.0, 9.0, 8000, 100 * slower, round_no),
            wrk_run("mlflow", "lstm", "torch", 32, 100.0, 300.0, 250, 4000, round_no),
            wrk_run("mlflow", "lstm", "onnx", 32, 90.0, 280.0, 250, 3800, round_no),
        ]
    return {
        "date": "2026-12-01", "commit": "abc1234", "versions": {"torch": "2.13"}, "lookback": 96,
        "horizon": 96, "rounds": 3, "seconds": 10, "runtimes": ["torch", "onnx"], "models": ["lstm"],
        "mlflow": True, "network": network, "runs": runs,
    }  # fmt: skip


def test_the_targets_are_the_issues_on_the_medians_over_rounds():
    rows = decoder_serving.targets(decoder_serving.summarise(results()))

    def met(who: str, starts: str) -> bool:
        (row,) = [t for t in rows if t["who"] == who and t["target"].startswith(starts)]
        return row["met"]

    # c32 CPU per request (medians 770 and 500 us) <= 1.5 x (floor's 110 + network at the formed batch)
    assert not met("lstm / torch", "c32 CPU")  # 770 > 1.5 x (110 + 400) = 765
    assert met("lstm / onnx", "c32 CPU")  # 500 <= 1.5 x (110 + 330) = 660
    assert [t for t in rows if "formed batch (16.0 windows)" in t["target"]]
    assert met("lstm / torch", "c32 p99") and not met("lstm / onnx", "c32 p99")  # 44 and 66 ms
    assert not met("lstm / torch", "c32 req/s") and met("lstm / onnx", "c32 req/s")  # 6x and 8.4x
    # c1 p50 (2.42 and 1.1 ms) <= floor p50 (0.33) + one forward pass at batch 1 + 0.5 ms
    assert not met("lstm / torch", "c1 p50")  # 2.42 > 0.33 + 1.5 + 0.5
    assert met("lstm / onnx", "c1 p50")  # 1.1 <= 0.33 + 0.55 + 0.5
    assert met("lstm", "ONNX network")  # 550 / 1500 = 0.37x
    assert len(rows) == 2 * 4 + 1


def test_without_a_recorded_batch_the_cpu_target_uses_batch_32_and_says_so():
    raw = results()
    for costs in raw["network"]:
        costs["formed_batch"] = costs["network_us_per_window_formed"] = None
    (row,) = [t for t in decoder_serving.targets(decoder_serving.summarise(raw)) if t["who"] == "lstm / torch"
              and t["target"].startswith("c32 CPU")]  # fmt: skip
    assert "batch 32 (formed batch not recorded)" in row["target"] and "(110 + 360)" in row["figures"]


def test_render_writes_between_the_markers_only(tmp_path):
    raw = tmp_path / "runtimes.json"
    raw.write_text(json.dumps(results()))
    text = render_into_readme(tmp_path, "decoder_serving.py", raw, decoder_serving.BEGIN, decoder_serving.END)
    assert "| lstm | onnx (onnx) | 550 | 320 | 290 | 16.0 | 330 |" in text
    assert decoder_serving.readme_block(text) == decoder_serving.render(results())


def test_the_readme_block_is_the_committed_results_rendered():
    """A hand edit of a figure in the block, or results changed without --render, fails here."""
    if not decoder_serving.RUNTIMES_RESULTS.exists():
        pytest.skip(
            "benchmarks/results/decoder_serving_runtimes.json is not committed yet (it comes from a run "
            "of decoder_serving.py --runtimes torch,onnx on a quiet machine)"
        )
    results = json.loads(decoder_serving.RUNTIMES_RESULTS.read_text())
    readme = (REPO / "benchmarks/README.md").read_text()
    assert decoder_serving.readme_block(readme) == decoder_serving.render(results)
