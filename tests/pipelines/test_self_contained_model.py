"""A registered model loads with ``mlflow.pyfunc.load_model`` where this project is not installed:
it carries the forecaster package (``code_paths``, forecaster/pyfunc.py) and forecasts the same.

The environment without the project: a fresh venv whose only addition is a .pth line naming this
venv's site-packages (MLflow, torch and the rest, at the versions that trained the model). A plain
directory line in a .pth does not run the .pth files inside that directory, so the project's
editable install (a .pth of its own) is not picked up there: ``import forecaster`` fails, which the
script asserts before it loads the model, from a folder outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sysconfig
import venv

import numpy as np
import pytest

from forecaster.data.datamodule import prepare_series
from forecaster.data.source import load_from_config
from pipelines.config import load_run_config
from pipelines.train import run_training
from tests.conftest import REPO, TINY

pytestmark = pytest.mark.slow  # trains a real model and starts a second interpreter

LOAD = """
import sys
try:
    import forecaster
except ModuleNotFoundError:
    pass
else:
    sys.exit(f"forecaster is importable here ({forecaster.__file__}): this checks nothing")
import mlflow, numpy as np
mlflow.set_tracking_uri(sys.argv[1])
model = mlflow.pyfunc.load_model("models:/portable/1")
np.save(sys.argv[3], model.predict(np.load(sys.argv[2])))
print(sys.modules["forecaster"].__file__)
"""


def bare_python(directory) -> str:
    """A venv with this one's third-party packages and not this project."""
    venv.create(directory, with_pip=False)
    site_packages = sysconfig.get_paths(vars={"base": str(directory), "platbase": str(directory)})["purelib"]
    with open(os.path.join(site_packages, "borrowed.pth"), "w") as pth:
        pth.write(sysconfig.get_paths()["purelib"] + "\n")
    return str(directory / "bin" / "python")


def test_a_registered_model_loads_and_forecasts_without_this_project_installed(tracking_uri, tmp_path):
    config = load_run_config(
        None, [*TINY, "model.architecture=seq2seq", "tracking.registered_model=portable"]
    )
    outcome = run_training(config, tracking_uri)
    prepared = prepare_series(load_from_config(config.data), config.forecast_config())
    np.save(tmp_path / "windows.npy", prepared.windows("test").past()[:, :, 0])  # raw (N, L)
    python = bare_python(tmp_path / "bare")
    elsewhere = tmp_path / "elsewhere"  # outside the checkout: no forecaster/ in the working folder
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(
        [python, "-c", LOAD, tracking_uri, tmp_path / "windows.npy", tmp_path / "forecasts.npy"],
        cwd=elsewhere,
        env={**env, "INFERENCE_RUNTIME": "torch"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    loaded_from = done.stdout.strip().splitlines()[-1]
    # the package the model carries (its code/ folder), not this checkout's
    assert "/code/forecaster/" in loaded_from and not loaded_from.startswith(str(REPO)), loaded_from
    np.testing.assert_array_equal(np.load(tmp_path / "forecasts.npy"), outcome.test_forecasts)
