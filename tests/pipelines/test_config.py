import pytest

from forecaster.errors import ConfigError
from pipelines.config import load_run_config, validate
from tests.conftest import CONFIGS


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_config_validates(path):
    config = load_run_config(path)
    assert config.data.dataset is not None


def test_overrides_reach_the_config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("data: {dataset: etth1}\nmodel: {cell: gru}\n")
    config = load_run_config(path, ["model.hidden_size=128", "model.bidirectional=true", "window.horizon=48"])
    assert (config.model.cell, config.model.hidden_size, config.model.bidirectional) == ("gru", 128, True)
    assert config.window.horizon == 48


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"data": {"dataset": "etth1"}, "model": {"hiden_size": 3}}, "model.hiden_size: unknown key"),
        (
            {"data": {"dataset": "etth1"}, "model": {"hidden_size": "big"}},
            "model.hidden_size: Input should be",
        ),
        ({"model": {"cell": "lstm"}}, "data: missing required field"),
        (
            {"data": {"dataset": "etth1"}, "model": {"cell": "tcn"}},
            "model.cell: Input should be 'rnn', 'lstm'",
        ),
        ({"data": {"path": "x.csv"}}, "needs `time_column` and `target`"),
        ({"data": {"dataset": "etth1"}, "split": {"train": 0.9, "val": 0.2, "test": 0.1}}, "sum to 1"),
        (
            {"data": {"dataset": "etth1"}, "model": {"attention_lag_scale": 0}},
            "model.attention_lag_scale: Input should be greater than 0",
        ),
    ],
    ids=[
        "unknown-key",
        "wrong-type",
        "missing",
        "bad-choice",
        "path-needs-columns",
        "split-sum",
        "lag-scale",
    ],
)
def test_invalid_configs_name_the_field(data, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        validate(data)


def test_bad_yaml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_run_config(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("data: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_run_config(bad)


def test_a_config_that_is_a_directory_binary_or_holds_a_key_twice_is_named(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_run_config(tmp_path)
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(ConfigError, match=r"model.bin is not UTF-8 text \(byte 0\)"):
        load_run_config(binary)
    twice = tmp_path / "twice.yaml"
    twice.write_text("data: {dataset: etth1}\nmodel: {cell: gru}\nmodel: {hidden_size: 8}\n")
    with pytest.raises(ConfigError, match="key 'model' is given twice"):
        load_run_config(twice)


@pytest.mark.parametrize(
    ("assignment", "outcome"),
    [
        ("data.time_format=%d/%m/%Y", "%d/%m/%Y"),  # YAML cannot read it: the text as typed
        ("model.hidden_size=[1", "model.hidden_size: Input should be a valid integer"),
        ("model.cell=!!python/object/apply:os.system [id]", "model.cell: Input should be 'rnn'"),
        ("model.cell={", "model.cell: Input should be 'rnn'"),
    ],
)
def test_a_set_value_yaml_cannot_read_is_its_text(assignment, outcome):
    """Never a YAML traceback: the value is the text typed, which validation then names by field
    where the setting needs something else (and no tag constructs anything)."""
    overrides = ["data.dataset=etth1", assignment]
    if assignment.startswith("data.time_format"):
        assert load_run_config(None, overrides).data.time_format == outcome
        return
    with pytest.raises(ConfigError, match=outcome.replace("[", r"\[")):
        load_run_config(None, overrides)
