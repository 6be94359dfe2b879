"""What a user names when asking for a model, as config sections: the `forecast train` options and
the Python API's ``Forecaster(...)`` arguments both go through here, so ``--model seq2seq`` and
``Forecaster(model="seq2seq")`` mean the same config. Only what was given is set: every default is
the config's (forecaster/config.py), none is decided here."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from forecaster.config import without_attention_of_many_to_one
from forecaster.data.datasets import DATASETS
from forecaster.errors import ConfigError, DataError


def data_settings(
    data: str | None,
    time_column: str | None = None,
    target: str | None = None,
    covariates: list[str] | None = None,
    future_covariates: list[str] | None = None,
    id_column: str | None = None,
    time_format: str | None = None,
) -> dict[str, Any]:
    """The data section: ``data`` a bundled dataset's name or a file (refused at once when it is
    neither: a misspelling is said in a second, not after the imports)."""
    settings: dict[str, Any] = {}
    if data is not None:
        if data not in DATASETS and not Path(data).exists():
            if Path(data).suffix:  # meant as a file: say so before asking for its columns
                raise DataError(f"{data}: file not found")  # as the loader words it
            known = ", ".join(sorted(DATASETS))
            raise DataError(f"{data!r} is neither a bundled dataset ({known}) nor an existing file")
        settings["dataset" if data in DATASETS else "path"] = data
    given = {
        "time_column": time_column,
        "target": target,
        "covariates": covariates,
        "future_covariates": future_covariates,
        "id_column": id_column,
        "time_format": time_format,
    }
    return settings | {key: value for key, value in given.items() if value is not None}


def model_settings(
    model: str | None = None,
    cell: str | None = None,
    bidirectional: bool | None = None,
    attention: str | None = None,
    decoder: str | None = None,
) -> dict[str, Any]:
    """The model section: ``model`` a cell (a many-to-one network) or ``seq2seq``; a value that is
    neither is left to the config's validation, which names the field. A cell sets attention and
    the decoder to what a many-to-one network has (none, and the field's default) over a seq2seq
    config's (``--config seq2seq.yaml --model lstm`` is an LSTM); either given beside it is refused
    by name."""
    settings: dict[str, Any] = {}
    if model == "seq2seq":
        settings["architecture"] = "seq2seq"
    elif model is not None:
        settings.update(architecture="many_to_one", cell=model, attention="none", decoder="autoregressive")
    given = {"cell": cell, "bidirectional": bidirectional, "attention": attention, "decoder": decoder}
    return settings | {key: value for key, value in given.items() if value is not None}


def window_settings(lookback: int | None = None, horizon: int | None = None) -> dict[str, Any]:
    given = {"lookback": lookback, "horizon": horizon}
    return {key: value for key, value in given.items() if value is not None}


def merge(settings: dict[str, Any], section: str, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` set in ``settings[section]`` over what it held (a YAML's, say); returns ``settings``."""
    if values:
        settings.setdefault(section, {}).update(values)
    return settings


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping: YAML says keys are unique,
    and PyYAML keeps the last silently, so a second `model:` section would drop the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: merged by the loader itself
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):  # PyYAML's own error names it
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML config file's sections; a missing or malformed file is a ConfigError naming it."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} not found")
    if not path.is_file():
        raise ConfigError(f"config file {path} is a directory, not a file")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader) or {}
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.start}): is it a YAML file?"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of sections, not {type(data)}")
    return without_attention_of_many_to_one(data)  # a run's config.yaml logged before it was refused


def config_error(exc: ValidationError, source: str) -> ConfigError:
    """pydantic's errors as one line naming each bad field (``model.cell: ...; train.epochs: ...``)."""
    problems = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "(top level)"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] == "missing":
            message = "missing required field"
        problems.append(f"{field}: {message}")
    return ConfigError(f"invalid {source}: " + "; ".join(problems))
