"""The HTTP tracking path, against a real `mlflow server` process, and MLflow's own serving."""

from __future__ import annotations

import mlflow
import numpy as np
import pytest

from tests.pipelines.helpers import train_json
from tests.servers import mlflow_model_server, mlflow_server, post_json

pytestmark = pytest.mark.integration


def test_train_register_and_mlflow_models_serve_through_a_tracking_server(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with mlflow_server(tmp_path) as url:
        result = train_json(url, "model.architecture=seq2seq", register="served")
        client = mlflow.MlflowClient(url)
        run = client.get_run(result["run_id"])
        assert run.info.status == "FINISHED"
        assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # stored by the server
        assert {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
        assert str(client.get_model_version_by_alias("served", "champion").version) == "1"

        mlflow.set_tracking_uri(url)
        model = mlflow.pyfunc.load_model("models:/served@champion")
        window = np.linspace(8.0, 14.0, 14)[None]  # one raw Melbourne-like window, L=14
        expected = model.predict(window)

        with mlflow_model_server(tmp_path, url, "models:/served@champion") as served:
            answer = post_json(f"{served}/invocations", {"inputs": window.tolist()})
    np.testing.assert_allclose(np.asarray(answer["predictions"]), expected, rtol=1e-12)
