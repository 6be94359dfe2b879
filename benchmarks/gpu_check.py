"""GPU check, for whoever has a CUDA machine (CI has none):

    .venv/bin/python benchmarks/gpu_check.py

Trains a tiny seq2seq-with-attention model on the GPU (Lightning, accelerator=gpu), then asserts
that the served network runs on CUDA with torch (INFERENCE_RUNTIME=auto picks torch there; the
ONNX export, verified at registration, serves CPUs) and agrees with the CPU: float32 to 1e-4
(cuDNN kernels differ from CPU ones), bfloat16 to 5e-2 relative. Exits 2 with a message where no GPU is present.

Then the serving figures, as on the CPU: `serve_bench.py --quick` (the issue-10 LSTM, one epoch:
the forward cost does not depend on how well it trained) with our API on CUDA beside MLflow's
server and the HTTP floor (needs `wrk`); `--no-serving` skips it, `--serving-args` passes more.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to check here (run this on a GPU machine)")
        return 2
    from fastapi.testclient import TestClient

    from pipelines.config import load_run_config
    from pipelines.train import run_training
    from service.main import create_app
    from service.settings import ServiceSettings

    workdir = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    uri = f"sqlite:///{workdir / 'mlflow.db'}"
    import os

    os.chdir(workdir)
    config = load_run_config(
        REPO / "pipelines/configs/quick-seq2seq-attention.yaml",
        [
            "train.accelerator=gpu",
            "train.epochs=2",
            "tracking.registered_model=gpu-check",
            "tracking.allow_worse_than_naive=true",  # 2 epochs: it checks the GPU, not the skill
            "train.progress_bar=false",
        ],
    )
    started = time.perf_counter()
    outcome = run_training(config, uri)
    print(
        f"trained on {torch.cuda.get_device_name(0)} in {time.perf_counter() - started:.1f} s; "
        f"test MAE {outcome.metrics['model']['mae']:.4f}"
    )

    import mlflow

    mlflow.set_tracking_uri(uri)
    predictor = mlflow.pyfunc.load_model("models:/gpu-check@champion").unwrap_python_model().predictor
    windows = 11 + np.random.default_rng(0).normal(0, 3, size=(512, predictor.lookback))
    assert predictor.export.verified, predictor.export.reason  # exported from the CUDA-trained network
    cpu = predictor.to("cpu").use_runtime("torch").predict(windows, return_attention=True)
    onnx = predictor.use_runtime("auto").predict(windows, return_attention=True)
    assert predictor.runtime.name == "onnx"  # auto on a CPU: the verified export in ONNX Runtime
    np.testing.assert_allclose(onnx.mean, cpu.mean, atol=1e-4, rtol=1e-5)
    gpu = predictor.to("cuda").predict(windows, return_attention=True)
    assert next(predictor.network.parameters()).is_cuda
    assert predictor.runtime.name == "torch", predictor.runtime.name  # auto on CUDA: torch
    np.testing.assert_allclose(gpu.mean, cpu.mean, atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(gpu.attention, cpu.attention, atol=1e-4)
    bf16 = predictor.to("cuda", torch.bfloat16).predict(windows)
    np.testing.assert_allclose(bf16.mean, cpu.mean, rtol=5e-2, atol=5e-2)
    print(
        f"float32 max |gpu-cpu| {np.abs(gpu.mean - cpu.mean).max():.2e}; "
        f"bfloat16 max {np.abs(bf16.mean - cpu.mean).max():.2e}"
    )

    settings = ServiceSettings(
        mlflow_tracking_uri=uri, model_uri="models:/gpu-check@champion", device="auto", reload_interval_s=0
    )
    with TestClient(create_app(settings)) as client:
        deadline = time.monotonic() + 120  # the model loads in the background after start-up
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, client.get("/readyz").text
            time.sleep(0.1)
        description = client.get("/v1/model").json()
        assert description["device"] == "cuda", description["device"]
        assert description["runtime"] == "torch", description  # INFERENCE_RUNTIME=auto on CUDA
        answer = client.post("/v1/predict", json={"series": [{"values": windows[0].tolist()}]}).json()
    np.testing.assert_allclose(answer["forecasts"][0]["values"], cpu.mean[0], atol=1e-4, rtol=1e-4)
    print("service on cuda agrees with the CPU: OK")
    return 0


def serving_figures(extra: list[str]) -> int:
    """serve_bench.py with the API on the GPU (DEVICE=auto picks CUDA); its exit status."""
    import subprocess

    command = [sys.executable, str(REPO / "benchmarks/serve_bench.py"), "--quick", "--heavy-rounds", "0"]
    print("\nserving figures on this machine (our API on CUDA):", " ".join(command[1:] + extra), flush=True)
    return subprocess.call([*command, *extra], cwd=REPO)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-serving", action="store_true", help="skip the serving benchmark")
    parser.add_argument("--serving-args", default="", help='more serve_bench.py options, e.g. "--rounds 1"')
    options = parser.parse_args()
    status = main()
    if status == 0 and not options.no_serving:
        status = serving_figures(options.serving_args.split())
    raise SystemExit(status)
