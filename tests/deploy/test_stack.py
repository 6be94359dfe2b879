"""The docker-compose topology, as real processes: PostgreSQL -> `mlflow server` (serving its
artifacts) -> `forecast train --register` -> the prediction service loading @champion -> POST."""

from __future__ import annotations

import mlflow
import psycopg
import pytest

from tests.pipelines.helpers import train_json
from tests.postgres import postgres_server, why_unavailable
from tests.servers import mlflow_server, post_json, prediction_service

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(why_unavailable() is not None, reason=f"PostgreSQL unavailable: {why_unavailable()}"),
]


def test_train_register_and_serve_through_mlflow_on_postgres(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with postgres_server() as database, mlflow_server(tmp_path, backend_store_uri=database) as tracking:
        trained = train_json(tracking, "model.architecture=seq2seq", register="stack")
        assert trained["registered_version"] == "1" and trained["promoted"] is True
        with psycopg.connect(database) as connection, connection.cursor() as cursor:
            cursor.execute("select count(*) from runs where status = 'FINISHED'")
            assert cursor.fetchone()[0] >= 1  # the runs really live in PostgreSQL
            cursor.execute("select name from registered_models")
            assert cursor.fetchall() == [("stack",)]
        run = mlflow.MlflowClient(tracking).get_run(trained["run_id"])
        assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # proxied by the server

        with prediction_service(tmp_path, tracking, "models:/stack@champion") as api:
            answer = post_json(
                f"{api}/v1/predict", {"series": [{"values": [10.0 + i % 5 for i in range(14)]}]}
            )
    assert answer["model"] == {
        "name": "stack",
        "version": "1",
        "uri": "models:/stack/1",
        "run_id": trained["run_id"],
    }
    assert len(answer["forecasts"][0]["values"]) == 4
