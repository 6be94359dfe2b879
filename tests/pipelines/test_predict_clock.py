"""`forecast predict` reads a history file on the model's training clock: zone-aware timestamps
for a model trained on naive local ones are refused by name, not read as UTC."""

from __future__ import annotations

from forecaster.data.datamodule import prepare
from forecaster.data.source import load_from_config
from pipelines.predict import clock_mismatch
from tests.forecaster.test_model_inputs import config_for, hourly_file, untrained_predictor


def test_a_zoned_file_for_a_local_model_is_refused_naming_the_file(tmp_path):
    config = config_for(hourly_file(tmp_path), {"cell": "gru"})
    predictor = untrained_predictor(config, prepare(load_from_config(config.data), config))
    (tmp_path / "zoned").mkdir()
    zoned = config.data.model_copy(
        update={"path": str(hourly_file(tmp_path / "zoned", zone="Europe/Berlin"))}
    )
    problem = clock_mismatch(predictor, load_from_config(zoned))
    assert problem is not None and "zoned/hourly.csv" in problem and "data.timezone" in problem
    assert clock_mismatch(predictor, load_from_config(config.data)) is None


def test_a_model_on_a_named_zone_reads_a_zoned_file_on_that_zone(tmp_path):
    path = hourly_file(tmp_path, zone="Europe/Berlin")
    config = config_for(path, {"cell": "gru"}, timezone="Europe/Berlin")
    predictor = untrained_predictor(config, prepare(load_from_config(config.data), config))
    loaded = load_from_config(config.data)
    assert clock_mismatch(predictor, loaded) is None and str(loaded.frame.index[0]) == "2021-05-01 00:00:00"
