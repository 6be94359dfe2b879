"""`forecast serve` where no tracking store exists creates none, and says what it serves from: the
503s and the log name the model URI and the store, and how a model gets there."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

import mlflow
import pytest

from service.model_store import ModelStore, not_ready_reason
from service.registry_store import NoStoreError
from tests.conftest import REPO, empty_tracking_store, free_port
from tests.servers import running
from tests.waiting import until

STORE = "sqlite:///mlflow.db"  # serve's default
MODEL = "models:/demo-forecaster@champion"  # serve's default
HOW = "forecast train ... --register NAME"


def answer(url: str, body: bytes | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_missing_sqlite_store_is_reported_not_created(tmp_path):
    store = ModelStore(f"sqlite:///{tmp_path / 'absent.db'}", MODEL, "cpu", "float32")
    with pytest.raises(NoStoreError):
        store.refresh()
    assert list(tmp_path.iterdir()) == []
    assert (
        f"no model at {MODEL} in the tracking store sqlite:///{tmp_path / 'absent.db'}" in store.status.reason
    )
    assert "does not exist" in store.status.reason and HOW in store.status.reason


def test_behind_an_api_key_the_public_reason_hides_where_the_model_and_store_live(tmp_path):
    uri = f"sqlite:///{tmp_path / 'absent.db'}"
    store = ModelStore(uri, MODEL, "cpu", "float32")
    with pytest.raises(NoStoreError):
        store.refresh()
    public = not_ready_reason(store, public=True)
    assert uri not in public and MODEL not in public and str(tmp_path) not in public, public
    assert "the configured MODEL_URI" in public and HOW in public  # still says what to do
    assert uri in not_ready_reason(store) and MODEL in not_ready_reason(store)  # for the log, the key holder


def test_an_alias_the_registered_model_lacks_is_named_not_a_missing_model(tmp_path):
    """The model exists, its alias does not (MLflow: "Registered model alias nope not found"):
    the 503s said there was no model at all and to train one."""
    uri = empty_tracking_store(tmp_path / "mlflow.db")
    mlflow.MlflowClient(uri).create_registered_model("demo-forecaster")
    store = ModelStore(uri, "models:/demo-forecaster@nope", "cpu", "float32")
    with pytest.raises(Exception, match="alias nope not found"):
        store.refresh()
    reason = store.status.reason
    assert "the registered model 'demo-forecaster' has no alias 'nope'" in reason, reason
    assert "forecast promote --name demo-forecaster --version N --alias nope" in reason
    assert "no model at" not in reason and HOW not in reason
    public = not_ready_reason(store, public=True)
    assert uri not in public and str(tmp_path) not in public, public


@pytest.mark.slow  # starts a server process
def test_serve_in_an_empty_folder_creates_no_file_and_names_the_uri_and_store(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)  # the server's working directory: where sqlite:///mlflow.db would land
    for name in ("MLFLOW_TRACKING_URI", "MODEL_URI"):
        monkeypatch.delenv(name, raising=False)  # serve's defaults
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "pipelines.cli", "serve", "--port", str(port)]
    with running(command, f"{url}/healthz", tmp_path / "serve.log", env={"PYTHONPATH": str(REPO)}):

        def reason_given() -> tuple[int, str] | None:
            said = answer(f"{url}/readyz")
            return said if "no model at" in said[1] else None

        ready = until(reason_given, "/readyz's reason")
        predicted = answer(f"{url}/v1/predict", json.dumps({"series": [{"values": [1.0] * 20}]}).encode())
    for status, text in (ready, predicted):
        assert status == 503, text
        assert f"no model at {MODEL} in the tracking store {STORE}" in text and HOW in text
    log = (tmp_path / "serve.log").read_text()
    assert MODEL in log and STORE in log and HOW in log
    assert list(empty.iterdir()) == []  # no mlflow.db, nothing else
