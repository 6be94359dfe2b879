"""The S3 artifact path of docker-compose.yml, for real: moto's standalone server (a real S3 HTTP
endpoint on loopback) stands in for MinIO, `mlflow server` stores artifacts in its bucket
(`--artifacts-destination s3://...`, proxied with `--serve-artifacts`) over PostgreSQL, and a
model is trained, registered, loaded by the prediction service and by `mlflow models serve`, and a
training killed with SIGKILL is resumed from its checkpoint artifact, all through S3. The objects
are then listed in the bucket."""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest

from tests.conftest import free_port
from tests.pipelines.helpers import train_json
from tests.pipelines.test_resume import kill_after_checkpoint, run_cli, settings
from tests.postgres import postgres_server, why_unavailable
from tests.servers import mlflow_model_server, post_json, prediction_service, running

BUCKET = "mlflow-artifacts"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}
MOTO = shutil.which("moto_server", path=str(Path(sys.executable).parent))

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(MOTO is None, reason="moto's server is not installed: pip install 'moto[server]'"),
    pytest.mark.skipif(why_unavailable() is not None, reason=f"PostgreSQL unavailable: {why_unavailable()}"),
]


@contextlib.contextmanager
def s3_server(workdir: Path) -> Iterator[str]:
    """moto_server on loopback with an empty bucket; yields its endpoint URL."""
    import boto3

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with running([MOTO, "-H", "127.0.0.1", "-p", str(port)], f"{endpoint}/moto-api/", workdir / "s3.log"):
        boto3.client("s3", endpoint_url=endpoint, **client_credentials()).create_bucket(Bucket=BUCKET)
        yield endpoint


def client_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


@contextlib.contextmanager
def mlflow_server_on_s3(workdir: Path, database: str, s3: dict[str, str]) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", database]
    command += ["--serve-artifacts", "--artifacts-destination", f"s3://{BUCKET}/"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    url = f"http://127.0.0.1:{port}"
    with running(command, f"{url}/health", workdir / "mlflow-server.log", env=s3):
        yield url


def bucket_keys(endpoint: str) -> list[str]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, **client_credentials())
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def test_train_register_and_serve_with_artifacts_in_s3(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    window = {"series": [{"values": [10.0 + i % 5 for i in range(14)]}]}
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(s3_server(tmp_path))
        s3 = {**CREDENTIALS, "MLFLOW_S3_ENDPOINT_URL": endpoint}
        database = stack.enter_context(postgres_server())
        tracking = stack.enter_context(mlflow_server_on_s3(tmp_path, database, s3))

        trained = train_json(tracking, register="s3")  # the client talks HTTP only; the server writes S3
        run = mlflow.MlflowClient(tracking).get_run(trained["run_id"])
        assert run.info.artifact_uri.startswith("mlflow-artifacts:")
        keys = bucket_keys(endpoint)
        assert any(key.endswith("plots/forecast_vs_actual.png") for key in keys), keys
        assert any(key.endswith("MLmodel") for key in keys), keys
        assert not (tmp_path / "mlartifacts").exists()  # nothing went to a local folder instead

        # SIGKILL mid-training, resume from the checkpoint the server stored in S3
        run_id = kill_after_checkpoint(
            tmp_path, tracking, 2, *settings(), "--experiment", "crash", "--tracking-uri", tracking
        )
        resumed = run_cli(tmp_path, "--resume", run_id, "--tracking-uri", tracking, "--json")
        assert resumed["run_id"] == run_id
        tags = mlflow.MlflowClient(tracking).get_run(run_id).data.tags
        checkpoints = {k for k in bucket_keys(endpoint) if f"/{run_id}/artifacts/checkpoints/" in k}
        # superseded checkpoints were deleted from the bucket; the newest of each kind is kept
        assert {k.split("/artifacts/", 1)[1] for k in checkpoints} == {
            tags["checkpoint.last"],
            tags["checkpoint.best"],
        }

        api = stack.enter_context(prediction_service(tmp_path, tracking, "models:/s3@champion"))
        ours = post_json(f"{api}/v1/predict", window)
        served = stack.enter_context(mlflow_model_server(tmp_path, tracking, "models:/s3@champion", env=s3))
        theirs = post_json(f"{served}/invocations", {"inputs": [window["series"][0]["values"]]})

    assert ours["model"]["version"] == "1" and ours["model"]["run_id"] == trained["run_id"]
    assert len(ours["forecasts"][0]["values"]) == 4
    assert len(theirs["predictions"]) == 1
    print(f"{len(keys)} objects in s3://{BUCKET}/ after the first training, e.g. {sorted(keys)[:3]}")
    print("checkpoints of the resumed run in S3:", *sorted(checkpoints), sep="\n  ")
