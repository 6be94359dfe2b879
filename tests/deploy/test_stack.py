"""The docker-compose topology as real processes: PostgreSQL holds MLflow's tables, an S3 endpoint
(moto's standalone server, a real S3 HTTP API on loopback, standing in for MinIO) holds its
artifacts, and `mlflow server` proxies them (`--serve-artifacts --artifacts-destination s3://...`).
Through it: `forecast train --register` over HTTP alone, this project's prediction service and
`mlflow models serve` loading @champion, and a training killed with SIGKILL resumed from its
checkpoint artifact in the bucket.

One stack for the module (its start and stop take most of a minute) and one registered model,
shared by the tests (make test runs a module on one worker: --dist loadfile). The HTTP tracking path against a
server is proven here for every command that takes a tracking URI: the client never touches the
database or the bucket itself."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import mlflow
import numpy as np
import psycopg
import pytest

from tests.conftest import ONNX_AND_PLOTS, free_port
from tests.pipelines.helpers import forecast, train_json
from tests.pipelines.test_resume import kill_after_checkpoint, settings
from tests.postgres import fresh_databases, why_unavailable
from tests.servers import mlflow_model_server, post_json, prediction_service, running

BUCKET = "mlflow-artifacts"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}
MOTO = shutil.which("moto_server", path=str(Path(sys.executable).parent))
WINDOW = [10.0 + i % 5 for i in range(14)]  # one raw Melbourne-like window, L=14
# Over HTTP a run's training lock is a lease tag (pipelines/locks.py): `--resume` of a run whose
# trainer was killed takes its lease over once it saw it unchanged for LEASE_S (120 s). The resume
# here runs with this lease instead: the same wait and takeover, two minutes sooner.
RESUME_LEASE_S = 4.0

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(MOTO is None, reason="moto's server is not installed: pip install 'moto[server]'"),
    pytest.mark.skipif(why_unavailable() is not None, reason=f"PostgreSQL unavailable: {why_unavailable()}"),
]


class Stack:
    """The running stack: the tracking server's URL, the database's and the bucket's endpoint."""

    def __init__(self, workdir: Path, tracking: str, database: str, endpoint: str) -> None:
        self.workdir, self.tracking, self.database, self.endpoint = workdir, tracking, database, endpoint

    @property
    def s3_environment(self) -> dict[str, str]:
        return {**CREDENTIALS, "MLFLOW_S3_ENDPOINT_URL": self.endpoint}

    def bucket_keys(self) -> list[str]:
        import boto3

        s3 = boto3.client("s3", endpoint_url=self.endpoint, **client_credentials())
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]


def client_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        "region_name": CREDENTIALS["AWS_DEFAULT_REGION"],
    }


@contextlib.contextmanager
def s3_server(workdir: Path) -> Iterator[str]:
    """moto_server on loopback with an empty bucket; yields its endpoint URL."""
    import boto3

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with running([MOTO, "-H", "127.0.0.1", "-p", str(port)], f"{endpoint}/moto-api/", workdir / "s3.log"):
        boto3.client("s3", endpoint_url=endpoint, **client_credentials()).create_bucket(Bucket=BUCKET)
        yield endpoint


@contextlib.contextmanager
def mlflow_server_on_s3(workdir: Path, database: str, s3: dict[str, str]) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", database]
    command += ["--serve-artifacts", "--artifacts-destination", f"s3://{BUCKET}/"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    url = f"http://127.0.0.1:{port}"
    with running(command, f"{url}/health", workdir / "mlflow-server.log", env=s3):
        yield url


@pytest.fixture(scope="module")
def stack(tmp_path_factory, postgres_url: str) -> Iterator[Stack]:
    """The stack's database is a new one on the session's PostgreSQL server (tests/conftest.py):
    a server of its own cost an initdb and a start, and showed nothing more."""
    workdir = tmp_path_factory.mktemp("stack")
    (database,) = fresh_databases(postgres_url, "compose_stack")
    with contextlib.ExitStack() as started:
        endpoint = started.enter_context(s3_server(workdir))
        s3 = {**CREDENTIALS, "MLFLOW_S3_ENDPOINT_URL": endpoint}
        tracking = started.enter_context(mlflow_server_on_s3(workdir, database, s3))
        yield Stack(workdir, tracking, database, endpoint)


@pytest.fixture(scope="module")
def trained(stack: Stack) -> dict:
    """A seq2seq + attention model (with its plots and ONNX export), registered as `stack`, trained
    by a client that talks HTTP only, from a folder where no artifact may land."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(stack.workdir)
        return train_json(stack.tracking, "model.architecture=seq2seq", *ONNX_AND_PLOTS, register="stack")


def test_runs_live_in_postgresql_and_artifacts_in_the_bucket(stack: Stack, trained: dict):
    assert trained["registered_version"] == "1" and trained["promoted"] is True
    with psycopg.connect(stack.database) as connection, connection.cursor() as cursor:
        cursor.execute("select count(*) from runs where status = 'FINISHED'")
        assert cursor.fetchone()[0] >= 1
        cursor.execute("select name from registered_models")
        assert ("stack",) in cursor.fetchall()
    client = mlflow.MlflowClient(stack.tracking)
    run = client.get_run(trained["run_id"])
    assert run.info.status == "FINISHED"
    assert run.info.artifact_uri.startswith("mlflow-artifacts:")  # proxied by the server
    assert {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    keys = stack.bucket_keys()
    assert any(key.endswith("plots/forecast_vs_actual.png") for key in keys), keys
    assert any(key.endswith("MLmodel") for key in keys), keys
    assert not (stack.workdir / "mlartifacts").exists()  # nothing went to a local folder instead
    print(f"{len(keys)} objects in s3://{BUCKET}/ after one training, e.g. {sorted(keys)[:3]}")


def test_the_service_and_mlflow_models_serve_answer_from_the_bucket(stack: Stack, trained: dict):
    mlflow.set_tracking_uri(stack.tracking)
    expected = mlflow.pyfunc.load_model("models:/stack@champion").predict(np.asarray([WINDOW]))
    with contextlib.ExitStack() as servers:
        api = servers.enter_context(
            prediction_service(stack.workdir, stack.tracking, "models:/stack@champion")
        )
        ours = post_json(f"{api}/v1/predict", {"series": [{"values": WINDOW}]})
        served = servers.enter_context(
            mlflow_model_server(
                stack.workdir, stack.tracking, "models:/stack@champion", env=stack.s3_environment
            )
        )
        theirs = post_json(f"{served}/invocations", {"inputs": [WINDOW]})
    assert ours["model"] == {
        "name": "stack",
        "version": "1",
        "uri": "models:/stack/1",
        "run_id": trained["run_id"],
    }
    assert len(ours["forecasts"][0]["values"]) == 4
    np.testing.assert_allclose(np.asarray(theirs["predictions"]), expected, rtol=1e-12)


def resume_with_a_short_lease(workdir: Path, run_id: str, tracking: str) -> tuple[dict, float]:
    """`forecast train --resume RUN_ID --json` with pipelines/locks.py's LEASE_S (and the wait
    pipelines/resume.py derives from it) at RESUME_LEASE_S; its output and how long it took. In
    this process: the killed trainer was a process of its own (that is what a SIGKILL needs), the
    resume is about what it finds in the bucket, and a second CLI process cost 7 s of imports."""
    import pipelines.locks as locks
    import pipelines.resume as resume

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(workdir)
        patch.setattr(locks, "LEASE_S", RESUME_LEASE_S)
        patch.setattr(resume, "LEASE_S", RESUME_LEASE_S)
        started = time.monotonic()
        result = forecast("train", "--resume", run_id, "--tracking-uri", tracking, "--json")
        took = time.monotonic() - started
    assert result.exit_code == 0, result.output[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), took


def test_a_training_killed_with_sigkill_resumes_from_its_checkpoint_in_the_bucket(stack: Stack):
    tracking, workdir = stack.tracking, stack.workdir
    run_id = kill_after_checkpoint(
        workdir, tracking, 2, *settings(), "--experiment", "crash", "--tracking-uri", tracking
    )
    resumed, took = resume_with_a_short_lease(workdir, run_id, tracking)
    assert resumed["run_id"] == run_id
    assert took > RESUME_LEASE_S  # it waited for the killed trainer's lease to age out, then took it
    tags = mlflow.MlflowClient(tracking).get_run(run_id).data.tags
    checkpoints = {k for k in stack.bucket_keys() if f"/{run_id}/artifacts/checkpoints/" in k}
    # superseded checkpoints were deleted from the bucket; the newest of each kind is kept
    assert {k.split("/artifacts/", 1)[1] for k in checkpoints} == {
        tags["checkpoint.last"],
        tags["checkpoint.best"],
    }
    print("checkpoints of the resumed run in S3:", *sorted(checkpoints), sep="\n  ")
