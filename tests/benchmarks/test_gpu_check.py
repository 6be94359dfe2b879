"""benchmarks/README.md's GPU-check block is what gpu_check.py --render makes of the committed
record, the record is a run that passed every check on the machine it names, and the script
refuses to run without an output folder or, outside a rehearsal, without CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.benchmarks.rendering import render_into_readme
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_check  # noqa: E402


def committed() -> dict:
    return json.loads(gpu_check.RAW_RESULTS.read_text())


def test_the_readme_block_is_the_committed_record_rendered():
    readme = (REPO / "benchmarks" / "README.md").read_text()
    assert gpu_check.readme_block(readme) == gpu_check.render(committed())


def test_render_readme_replaces_only_its_block(tmp_path):
    text = render_into_readme(tmp_path, "gpu_check.py", gpu_check.RAW_RESULTS, gpu_check.BEGIN, gpu_check.END)
    assert gpu_check.render(committed()) in text


def test_the_committed_record_passed_on_the_machine_it_names():
    record = committed()
    assert record["ok"] and record["checks"] and all(line["ok"] for line in record["checks"])
    assert record["rehearsal"] == (record["device"] == "cpu") and record["device_name"]
    assert {"cpu", "cpu_capability", "torch", "threads", "python", "cores"} <= set(record["machine"])
    assert [model["model"] for model in record["models"]] == list(gpu_check.MODELS)
    for model in record["models"]:
        first, second = gpu_check.legs(record["device"])
        assert [(leg["device"], leg["runtime"]) for leg in model["servers"].values()] == [
            (first.device, first.runtime),
            (second.device, second.runtime),
        ]
        assert model["max_abs_z"]["torch_vs_onnx"] <= record["tolerance_z"]
    assert set(record["stages_s"]) == {"install", "preflight", "train", "serve", "agree", "load", "total"}


def test_cuda_is_served_by_autos_pick_and_the_rehearsal_by_torch_on_the_cpu():
    assert [(leg.device, leg.asked, leg.runtime) for leg in gpu_check.legs("cuda")] == [
        ("cuda", "auto", "torch"),
        ("cpu", "onnx", "onnx"),
    ]
    assert gpu_check.legs("cpu")[0] == gpu_check.Leg(runtime="torch", device="cpu", asked="torch")


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give --out DIR (or set OUT)"),
        (
            ["--render", "--results", "/nonexistent/gpu_check.json"],
            "no results at /nonexistent/gpu_check.json",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message):
    environment = {k: v for k, v in os.environ.items() if k != "OUT"}
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), *args],
        capture_output=True,
        text=True,
        env=environment,
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_without_cuda_it_says_to_rehearse_instead(tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stopped:
        gpu_check.main(["--out", str(tmp_path)])
    assert stopped.value.code == 2 and not any(tmp_path.iterdir())
    assert "no CUDA device here; --rehearsal runs the same check on the CPU" in capsys.readouterr().err
