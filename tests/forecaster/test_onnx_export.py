"""The ONNX export gives the torch network's outputs (forecast, quantiles, attention weights) for
every architecture and head, at batch sizes it was not traced at; a predictor loaded with a
verified export runs it, one without (or with the file gone) runs torch and says why."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from forecaster.data.datamodule import prepare
from forecaster.data.source import load_from_config
from forecaster.onnx_export import ONNX_FILE, REPORT_FILE, TOLERANCE, ExportReport, export_network
from forecaster.predictor import Predictor
from forecaster.runtime import OnnxNetwork, TorchNetwork, choose_runtime
from tests.forecaster.conftest import NETWORKS
from tests.forecaster.test_model_inputs import config_for, hourly_file, untrained_predictor

PANEL = "panel-gru-embedding"  # a panel's series embedding and window-standardised level on top
SEGMENT_ATTENTION = dict(architecture="seq2seq", decoder="direct", cell="gru", segment_length=4)
EXTRA = {  # the segment seq2seq + attention (SegRNN encoder, direct decoder)
    # per forecast step over each segment, and within it per step: (B, H, L) with calendar features
    "seq2seq-segments-attention": dict(SEGMENT_ATTENTION, attention="bahdanau"),
    # without calendar features the within-segment weights are (H, L), one for every window
    "seq2seq-segments-attention-no-calendar": dict(SEGMENT_ATTENTION, attention="bahdanau"),
    # the layout of models saved before issue 41: attention per segment
    "seq2seq-segments-attention-states": dict(
        SEGMENT_ATTENTION, attention="bahdanau", attention_layout="states"
    ),
}
WITHOUT_CALENDAR = {"seq2seq-segments-attention-no-calendar"}
ARCHITECTURES = [*sorted(NETWORKS), *EXTRA, PANEL]


def prepared_predictor(tmp_path, name: str):
    if name == PANEL:
        model = {"cell": "gru", "series_embedding": 3, "level_norm": "standard"}
        config = config_for(hourly_file(tmp_path, panel=True), model, id_column="id")
    else:
        data = {"calendar_features": False} if name in WITHOUT_CALENDAR else {}
        config = config_for(hourly_file(tmp_path), {**NETWORKS, **EXTRA}[name], **data)
    prepared = prepare(load_from_config(config.data), config)
    return untrained_predictor(config, prepared), prepared


def held_out(prepared, rows: np.ndarray) -> dict[str, torch.Tensor]:
    """Test windows as the network takes them (calendar, future covariates, series ids)."""
    batch = prepared.dataset("test").__getitems__(rows.tolist())
    batch.pop("target")
    return batch


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_the_export_gives_the_networks_outputs_at_any_batch_size(tmp_path, name):
    predictor, prepared = prepared_predictor(tmp_path, name)
    directory = predictor.save(tmp_path / "model")
    windows = len(prepared.dataset("test"))
    report = export_network(predictor.network, held_out(prepared, np.arange(min(windows, 64))), directory)
    assert report.verified, report.reason
    assert report.tags() == {"runtimes": "torch,onnx"}
    assert sorted(report.max_abs_diff, key=int) == ["1", "7", "64"]  # checked at these sizes
    loaded = Predictor.load(directory)
    assert isinstance(loaded.runtime, OnnxNetwork) and loaded.runtime_note is None
    torch_network = TorchNetwork(loaded.network)
    rng = np.random.default_rng(1)
    for size in (1, 7, 64, 100):  # 100: more windows than the check saw, in another order
        batch = held_out(prepared, rng.integers(0, windows, size))
        with torch.inference_mode():
            expected, got = torch_network(batch), loaded.runtime(batch)
        assert got.segment == expected.segment
        for field in ("mean", "quantiles", "attention", "attention_within"):
            want, have = getattr(expected, field), getattr(got, field)
            assert (want is None) == (have is None), field
            if want is not None:
                assert have.shape == want.shape, field
                np.testing.assert_allclose(have.numpy(), want.numpy(), rtol=0, atol=TOLERANCE, err_msg=field)
    if predictor.has_attention or predictor.config.model.quantiles:
        assert ("attention" in report.outputs) == predictor.has_attention
        assert ("quantiles" in report.outputs) == bool(predictor.config.model.quantiles)


@pytest.mark.parametrize(
    "name",
    ["seq2seq-attention-quantiles", "seq2seq-segments-attention", "seq2seq-segments-attention-no-calendar"],
)
def test_the_predictor_forecasts_the_same_through_either_runtime(tmp_path, name):
    """Scaling, calendar, future covariates, attention per step (a segment model's spread over
    its steps) and intervals around the network are one code path: only the network call differs."""
    predictor, prepared = prepared_predictor(tmp_path, name)
    directory = predictor.save(tmp_path / "model")
    export_network(predictor.network, held_out(prepared, np.arange(64)), directory)
    loaded = Predictor.load(directory)
    windows = prepared.parts[0].windows("test")
    args = (windows.past(), windows.past_times())
    onnx = loaded.use_runtime("onnx").predict(
        *args, future=windows.future_covariates(), return_attention=True
    )
    assert loaded.runtime.name == "onnx"
    eager = loaded.use_runtime("torch").predict(
        *args, future=windows.future_covariates(), return_attention=True
    )
    assert loaded.runtime.name == "torch"
    scale = loaded.scaler.std[0]  # the network's tolerance in the target's units
    np.testing.assert_allclose(onnx.mean, eager.mean, rtol=0, atol=TOLERANCE * scale)
    assert onnx.attention.shape == (len(onnx.mean), loaded.horizon, loaded.lookback)
    np.testing.assert_allclose(onnx.attention, eager.attention, rtol=0, atol=TOLERANCE)
    assert onnx.quantiles.keys() == eager.quantiles.keys()
    assert bool(onnx.quantiles) == bool(loaded.config.model.quantiles)
    for level in onnx.quantiles:
        np.testing.assert_allclose(
            onnx.quantiles[level], eager.quantiles[level], rtol=0, atol=TOLERANCE * scale
        )


def test_an_export_that_differs_is_not_kept(tmp_path, monkeypatch):
    predictor, prepared = prepared_predictor(tmp_path, "gru")
    directory = predictor.save(tmp_path / "model")
    monkeypatch.setattr("forecaster.onnx_export.TOLERANCE", -1.0)  # no graph can pass this
    report = export_network(predictor.network, held_out(prepared, np.arange(8)), directory)
    assert not report.verified and "differs from torch" in report.reason
    assert report.tags() == {"runtimes": "torch", "onnx_export": report.reason}
    assert not (directory / ONNX_FILE).exists() and (directory / REPORT_FILE).exists()
    loaded = Predictor.load(directory).use_runtime("onnx")
    assert loaded.runtime.name == "torch" and "no verified ONNX export" in loaded.runtime_note


def test_a_model_without_its_export_file_runs_torch_and_says_why(tmp_path):
    predictor, prepared = prepared_predictor(tmp_path, "lstm")
    directory = predictor.save(tmp_path / "model")
    assert Predictor.load(directory).runtime_note.endswith("(saved without an ONNX export)")
    assert export_network(predictor.network, held_out(prepared, np.arange(8)), directory).verified
    assert Predictor.load(directory).runtime.name == "onnx"
    (directory / ONNX_FILE).unlink()
    loaded = Predictor.load(directory)
    assert loaded.runtime.name == "torch" and f"{ONNX_FILE} is missing" in loaded.runtime_note


def test_auto_picks_onnx_on_a_cpu_and_torch_elsewhere():
    verified = ExportReport(verified=True)
    missing = ExportReport(verified=False, reason="saved without an ONNX export")
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert choose_runtime("auto", cpu, verified) == ("onnx", None)
    assert choose_runtime("auto", cuda, verified) == ("torch", None)
    assert choose_runtime("torch", cpu, verified) == ("torch", None)
    assert choose_runtime("onnx", cpu, verified) == ("onnx", None)
    runtime, why = choose_runtime("onnx", cuda, verified)
    assert runtime == "torch" and "CPU only" in why
    runtime, why = choose_runtime("onnx", cpu, missing)
    assert runtime == "torch" and "saved without an ONNX export" in why
    runtime, why = choose_runtime("auto", cpu, verified, torch.bfloat16)
    assert runtime == "torch" and "float32" in why
    with pytest.raises(ValueError, match="expected one of"):
        choose_runtime("tensorrt", cpu, verified)
