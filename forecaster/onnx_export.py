"""The network exported to ONNX, kept only when ONNX Runtime gives the torch network's outputs.

Why: at serving sizes a recurrent network's forward pass in torch eager costs mostly per-op
dispatch, not arithmetic (2 x 64 layers, L=96, H=24, one thread: an LSTM at batch 1 takes 1.53 ms
in torch and 0.55 ms in ONNX Runtime; a GRU 6.3 ms and 0.48 ms). The exported graph is exactly
the call the predictor makes (``run_network`` on ``model_inputs``' batch, teacher forcing off);
its outputs are the forecast, the quantiles and the raw attention weights where the network has
them, every axis 0 the batch, of any size (but the within-segment weights every window shares).

The export is checked on held-out windows at several batch sizes against the torch network and
saved only when every output agrees to ``TOLERANCE`` on the network's own (z-scored) scale: a
version either carries a verified graph or none, and its report says which and why
(``ExportReport.tags``: ``runtimes=torch,onnx``, or ``runtimes=torch`` and ``onnx_export=<why>``).

The TorchScript-based exporter (``dynamo=False``) is used: on torch 2.13 it exports every
architecture here (fused RNN/LSTM/GRU layers as ONNX's own, unrolled step-by-step decoders) with a
dynamic batch axis in about a second; the torch.export-based one exports them too, equally
exact, but takes 10 to 30 s per model and needs onnxscript."""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from forecaster.models.output import Forecast
from forecaster.models.series_embedding import run_network

ONNX_FILE = "network.onnx"
REPORT_FILE = "onnx_export.json"
TOLERANCE = 1e-5  # max abs difference on the network's own output (z-scored units)
BATCH_SIZES = (1, 7, 64)  # checked; 1 and a size that is no power of two catch fixed shapes
EXAMPLE_BATCH = 2  # traced with 2 windows: a batch of 1 could be taken for a constant
OPSET = 17
INPUTS = ("past", "future", "series")  # model_inputs' keys, in the graph's input order
OUTPUTS = ("mean", "quantiles", "attention", "attention_within")


@dataclass
class ExportReport:
    """What became of a network's export; written beside the weights as ``onnx_export.json``."""

    verified: bool
    reason: str | None = None  # why there is no graph, when there is none
    inputs: list[str] = field(default_factory=list)  # the graph's inputs (model_inputs' keys)
    outputs: list[str] = field(default_factory=list)  # of OUTPUTS
    segment: int = 1  # Forecast.segment: look-back and horizon steps per attention row/column
    max_abs_diff: dict[str, float] = field(default_factory=dict)  # batch size -> worst output

    @property
    def runtimes(self) -> list[str]:
        return ["torch", "onnx"] if self.verified else ["torch"]

    def tags(self) -> dict[str, str]:
        """The run's and the registered version's tags: which runtimes the model carries."""
        tags = {"runtimes": ",".join(self.runtimes)}
        if not self.verified:
            tags["onnx_export"] = (self.reason or "not exported")[:250]
        return tags

    def save(self, directory: Path) -> None:
        (directory / REPORT_FILE).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, directory: Path) -> ExportReport:
        """The report saved with a model; a model saved before exports existed has none."""
        path = directory / REPORT_FILE
        if not path.exists():
            return cls(verified=False, reason="saved without an ONNX export")
        report = cls(**json.loads(path.read_text()))
        if report.verified and not (directory / ONNX_FILE).exists():
            return cls(verified=False, reason=f"{ONNX_FILE} is missing")
        return report


RUNTIME_TAGS = ("runtimes", "onnx_export")


def runtime_tags(tags: Mapping[str, object] | None) -> dict[str, str]:
    """The runtime tags among a run's tags or a logged model's metadata, for its registered version."""
    return {key: str(tags[key]) for key in RUNTIME_TAGS if key in (tags or {})}


class ExportedNetwork(nn.Module):
    """The graph's module: the predictor's network call on model_inputs' tensors, teacher forcing
    off, returning plain tensors (an exporter cannot return a NamedTuple with optional fields)."""

    def __init__(self, network: nn.Module, inputs: list[str], outputs: list[str]) -> None:
        super().__init__()
        self.network = network
        self.inputs, self.outputs = inputs, outputs

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # tensors: past (B, L, F+K), then future (B, H, Kf+K) and series (B,) where the model has them
        out = run_network(self.network, dict(zip(self.inputs, tensors, strict=True)))
        # (B, H), (B, H, Q), attention (B, H/w, L/w), (B, H, L) or (B, m, H, L/w), within beside it
        return tuple(getattr(out, name) for name in self.outputs)


def per_window(forecast: Forecast, name: str) -> bool:
    """Whether output ``name`` has a batch axis: all do but the within-segment attention weights
    of a model without calendar features, (m, H, L), which every window shares."""
    shared = name == "attention_within" and forecast.attention_within.dim() < forecast.attention.dim()
    return not shared


def held_out_rows(windows: int, size: int) -> torch.Tensor:
    """``size`` row indices spread over ``windows`` held-out windows (repeated when too few)."""
    return torch.linspace(0, windows - 1, size).round().long()


def export_network(network: nn.Module, held_out: dict[str, torch.Tensor], directory: Path) -> ExportReport:
    """Export ``network`` into ``directory`` and keep the graph only if it matches torch on the
    ``held_out`` batch (model_inputs' keys, any extra keys such as ``target`` ignored) at every
    size of BATCH_SIZES. Never raises: a failed export is a report saying why."""
    path = directory / ONNX_FILE
    try:
        report = _export_and_check(network, held_out, path)
    except Exception as exc:  # an exporter or runtime failure: the model serves with torch
        report = ExportReport(verified=False, reason=f"export failed: {type(exc).__name__}: {exc}"[:500])
    if not report.verified:
        path.unlink(missing_ok=True)
    report.save(directory)
    return report


def _export_and_check(network: nn.Module, held_out: dict[str, torch.Tensor], path: Path) -> ExportReport:
    network = copy.deepcopy(network).cpu().float().eval()  # the served copy keeps its device
    batch = {key: held_out[key].cpu() for key in INPUTS if key in held_out}
    windows = len(batch["past"])
    with torch.inference_mode():
        reference = run_network(network, batch)
    outputs = [name for name in OUTPUTS if getattr(reference, name) is not None]
    # eval() on the wrapper too: the exporter puts the module back in the mode it found it in,
    # and a new module starts in training mode, which would switch dropout and a series
    # embedding's id hiding back on in the network it wraps
    module = ExportedNetwork(network, list(batch), outputs).eval()
    example = tuple(tensor[held_out_rows(windows, EXAMPLE_BATCH)] for tensor in batch.values())
    axes = {name: {0: "batch"} for name in [*batch, *outputs] if name in batch or per_window(reference, name)}
    with warnings.catch_warnings():  # the exporter's deprecation and tracer notes, every time
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            example,
            str(path),
            dynamo=False,
            input_names=list(batch),
            output_names=outputs,
            dynamic_axes=axes,
            opset_version=OPSET,
        )
    from forecaster.runtime import onnx_session  # onnxruntime is imported only when used

    session = onnx_session(path, threads=1)
    inputs = [node.name for node in session.get_inputs()]  # an input the graph never reads is dropped
    report = ExportReport(
        verified=True, inputs=inputs, outputs=outputs, segment=reference.segment, max_abs_diff={}
    )
    for size in BATCH_SIZES:
        rows = held_out_rows(windows, size)
        diff = _max_abs_diff(network, session, {key: tensor[rows] for key, tensor in batch.items()}, outputs)
        report.max_abs_diff[str(size)] = diff
        if not diff < TOLERANCE:  # NaN fails too
            report.verified = False
            report.reason = (
                f"ONNX Runtime differs from torch by {diff:.3g} at batch {size} (tolerance {TOLERANCE:g})"
            )
    return report


def _max_abs_diff(network: nn.Module, session, batch: dict[str, torch.Tensor], outputs: list[str]) -> float:
    """The largest difference between torch's and ONNX Runtime's outputs on one batch."""
    with torch.inference_mode():
        expected: Forecast = run_network(network, batch)
    feed = {node.name: batch[node.name].numpy() for node in session.get_inputs()}
    got = dict(zip(outputs, session.run(outputs, feed), strict=True))
    return max(float(np.abs(getattr(expected, name).numpy() - got[name]).max()) for name in outputs)
