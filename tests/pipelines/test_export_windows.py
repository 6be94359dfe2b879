"""The ONNX export is checked on selection windows, never test's: whether the graph is kept
decides what serves, and no decision reads the test split."""

from __future__ import annotations

import torch

from forecaster.data.datamodule import prepare
from forecaster.data.source import load_from_config
from pipelines.config import read_yaml, validate
from pipelines.logging_run import held_out_inputs
from tests.conftest import REPO


def test_the_export_is_checked_on_selection_windows_only():
    config = validate(read_yaml(str(REPO / "pipelines/configs/quick-lstm.yaml")), source="quick-lstm.yaml")
    prepared = prepare(load_from_config(config.data), config)
    checked = held_out_inputs(prepared)["past"]  # (B, L, F)
    selection = torch.stack([item["past"] for item in prepared.dataset("selection")])
    test = {tuple(item["past"].flatten().tolist()) for item in prepared.dataset("test")}
    assert len(checked) == 64
    assert all(any(torch.equal(row, window) for window in selection) for row in checked)
    assert not any(tuple(row.flatten().tolist()) in test for row in checked)
