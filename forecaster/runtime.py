"""What runs the network: torch, or ONNX Runtime on the graph exported at registration.

Both take the batch ``model_inputs`` assembles and return the network's ``Forecast``, so scaling,
level normalisation, intervals and everything else around the network stay one code path in the
predictor; only this call differs. ``INFERENCE_RUNTIME`` (the service's setting) picks: ``torch``,
``onnx``, or ``auto``: ONNX Runtime on a CPU when the model carries a verified export (it runs
the same graph faster, most at batch 1: benchmarks/README.md has the figures), torch on CUDA
(ONNX Runtime's CPU build is what is installed; cuDNN serves the GPU). A version without a
verified export serves with torch whatever is asked, and ``choose_runtime`` says why."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import nn

from forecaster.models.output import Forecast
from forecaster.models.series_embedding import run_network
from forecaster.onnx_export import ONNX_FILE, ExportReport

RUNTIME_CHOICES: tuple[str, ...] = ("auto", "onnx", "torch")
RUNTIME_ENV = "INFERENCE_RUNTIME"  # the service's setting; the pyfunc reads the same variable


def runtime_from_environment() -> str:
    """What a pyfunc loaded outside the service runs (``mlflow models serve``, ``forecast
    predict``): ``INFERENCE_RUNTIME`` when set, else ``auto``."""
    return os.environ.get(RUNTIME_ENV, "auto").strip().lower() or "auto"


class NetworkRuntime(Protocol):
    name: str

    def __call__(self, batch: dict[str, torch.Tensor]) -> Forecast: ...


class TorchNetwork:
    """The network itself, on its device (the caller holds ``torch.inference_mode``)."""

    name = "torch"

    def __init__(self, network: nn.Module) -> None:
        self.network = network

    def __call__(self, batch: dict[str, torch.Tensor]) -> Forecast:
        return run_network(self.network, batch)


def onnx_session(path: Path, threads: int):
    """An ONNX Runtime CPU session running ops one after another on ``threads`` intra-op threads
    (the service gives each process one, as it gives torch one)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only: not a warning per unused initializer
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxNetwork:
    """The verified graph in ONNX Runtime on the CPU: CPU tensors in (shared with numpy, not
    copied), the network's Forecast out (torch tensors over ONNX Runtime's arrays)."""

    name = "onnx"

    def __init__(self, directory: Path, report: ExportReport, threads: int) -> None:
        self.session = onnx_session(directory / ONNX_FILE, threads)
        self.inputs = [node.name for node in self.session.get_inputs()]
        self.outputs = [node.name for node in self.session.get_outputs()]
        self.segment = report.segment

    def __call__(self, batch: dict[str, torch.Tensor]) -> Forecast:
        feed = {name: np.ascontiguousarray(batch[name].numpy()) for name in self.inputs}
        arrays = self.session.run(None, feed)
        got = {name: torch.from_numpy(array) for name, array in zip(self.outputs, arrays, strict=True)}
        return Forecast(
            mean=got["mean"],  # (B, H)
            attention=got.get("attention"),  # (B, H/w or H, L/w)
            quantiles=got.get("quantiles"),  # (B, H, Q)
            segment=self.segment,
            attention_within=got.get("attention_within"),  # (H, L) or (B, H, L); older graphs: none
        )


def choose_runtime(
    choice: str, device: torch.device, report: ExportReport, dtype: torch.dtype = torch.float32
) -> tuple[str, str | None]:
    """(the runtime to use, why it is not the one asked for or ``auto``'s first pick, if so)."""
    if choice not in RUNTIME_CHOICES:
        raise ValueError(f"inference runtime {choice!r}: expected one of {', '.join(RUNTIME_CHOICES)}")
    if choice == "torch":
        return "torch", None
    if device.type != "cpu":
        if choice == "auto":
            return "torch", None  # auto's pick on a GPU
        return "torch", f"ONNX Runtime serves on the CPU only and the model is on {device}"
    if dtype != torch.float32:  # the graph computes in float32, as it was verified
        return "torch", f"the exported graph computes in float32 and the model is in {dtype}"
    if not report.verified:
        return "torch", f"this model carries no verified ONNX export ({report.reason})"
    return "onnx", None


def build_runtime(
    name: str, network: nn.Module, directory: Path | None, report: ExportReport
) -> NetworkRuntime:
    if name == "onnx" and directory is not None:
        return OnnxNetwork(directory, report, threads=torch.get_num_threads())
    return TorchNetwork(network)
